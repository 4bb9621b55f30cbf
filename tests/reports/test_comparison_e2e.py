"""run.py end to end: a stub server made 30% slower is a regression that fails the verdict.

Two benchmark runs (smoke) against the shipped delay-programmed stub (a named fake: no engine),
the second with ``--compare-to last``; the run history is a private SQLite file.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from contracts import REPO_ROOT

MODEL = "SmolLM2-135M-Instruct"


def _run(url: str, out, env, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO_ROOT / "run.py"), "--model", MODEL, "--device", "cpu",
                           "--workflow", "benchmarks", "--server-url", url, "--no-auth", "--workflow-args",
                           "mode=smoke", "--output-dir", str(out), *extra],
                          capture_output=True, text=True, timeout=600, cwd=REPO_ROOT, env=env)


@pytest.mark.slow
def test_a_30_percent_slower_server_is_reported_regressed_and_fails(tmp_path, fake_server_process) -> None:
    env = dict(os.environ, TT_HISTORY_URL=f"sqlite:///{tmp_path / 'history.sqlite3'}")
    fast = fake_server_process("benchmarking.stub_server", "--ttft-ms", "50", "--itl-ms", "10", "--model", MODEL)
    first = _run(fast.url, tmp_path / "base", env)
    assert first.returncode == 0, first.stdout[-3000:]
    assert "history: indexed" in (tmp_path / "base" / "run.log").read_text()
    fast.stop()
    slow = fake_server_process("benchmarking.stub_server", "--ttft-ms", "65", "--itl-ms", "13", "--model", MODEL)
    second = _run(slow.url, tmp_path / "slow", env, "--compare-to", "last")
    report = json.loads((tmp_path / "slow" / "reports" / "report.json").read_text())
    comparison = report["comparison"]
    assert comparison["baseline_run"] == json.loads((tmp_path / "base" / "manifest.json").read_text())["run_id"]
    decisions = {m["name"]: m["decision"] for m in comparison["metrics"]}
    # smoke: 8 requests at concurrency 4 decide; the concurrency-1 point's 4 requests cannot decide its
    # targets, so adaptive sampling sends 4 more, and its 8 decide the comparison too
    assert {d for name, d in decisions.items() if "con-4" in name} == {"regressed"}, decisions
    assert {d for name, d in decisions.items() if "con-1" in name} == {"regressed"}, decisions
    assert report["verdict"]["result"] == "FAIL" and second.returncode == 3, second.stdout[-3000:]
    assert "regressed" in second.stdout and "Comparison with a baseline run" in second.stdout
