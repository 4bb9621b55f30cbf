"""--spec-decode-metrics-url, the upstream project's flag, is the benchmarks key spec_decode_metrics_url: the same
endpoints reach the client, and a wrong workflow, a duplicate or a bad URL is one line, exit 2, before any work."""
from __future__ import annotations

import subprocess
import sys

import pytest

from contracts import REPO_ROOT
from workflows.catalog import load_catalog
from workflows.cli import UsageError, parse_args

CATALOG = load_catalog()
BASE = ["--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--server-url", "http://127.0.0.1:9"]


def test_the_flag_is_the_benchmarks_key() -> None:
    urls = "http://w1:8000/metrics,http://w2:8000/metrics"
    options = parse_args([*BASE, "--workflow", "benchmarks", "--spec-decode-metrics-url", urls], CATALOG)
    assert options.workflow_args["spec_decode_metrics_url"] == urls
    with pytest.raises(UsageError, match="use --workflow benchmarks or release"):
        parse_args([*BASE, "--workflow", "evals", "--spec-decode-metrics-url", urls], CATALOG)
    with pytest.raises(UsageError, match="give one"):
        parse_args([*BASE, "--workflow", "benchmarks", "--spec-decode-metrics-url", urls, "--workflow-args",
                    f"spec_decode_metrics_url={urls}"], CATALOG)


def test_a_bad_endpoint_is_refused_in_one_line_before_any_work(tmp_path) -> None:
    done = subprocess.run([sys.executable, str(REPO_ROOT / "run.py"), *BASE, "--workflow", "benchmarks",
                           "--spec-decode-metrics-url", "file:///etc/passwd", "--output-dir", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "spec_decode_metrics_url" in lines[0], done.stderr
    assert not (tmp_path / "run").exists()
