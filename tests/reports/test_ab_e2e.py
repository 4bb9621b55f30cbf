"""run.py end to end: a paired A/B of two live stub servers (``--baseline-url``) is a gate.

The shipped delay-programmed stub (a named fake: no engine) is the baseline at 40 ms between tokens; this
run's server (the candidate) is a second stub at 56 ms (40% slower per token: ``regressed``, verdict FAIL,
exit 3) or at 40 ms (``within_noise`` on every metric, PASS, exit 0). One small point keeps each run short
(blocks of 4 requests at concurrency 2, 8 output tokens).
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from contracts import REPO_ROOT

MODEL = "SmolLM2-135M-Instruct"
ARGS = "mode=smoke points=64x8x2x4 ab_cycles=8"


def _run(url: str, baseline: str, out) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO_ROOT / "run.py"), "--model", MODEL, "--device", "cpu",
                           "--workflow", "benchmarks", "--server-url", url, "--baseline-url", baseline, "--no-auth",
                           "--workflow-args", ARGS, "--output-dir", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)


@pytest.fixture
def baseline(fake_server_process):
    return fake_server_process("benchmarking.stub_server", "--ttft-ms", "50", "--itl-ms", "40", "--model", MODEL)


def _decisions(out) -> dict[str, str]:
    report = json.loads((out / "reports" / "report.json").read_text())
    return {m["metric"]: m["decision"] for r in report["ab"]["records"] for m in r["metrics"]}


def test_a_40_percent_slower_candidate_is_regressed_and_exits_3(tmp_path, fake_server_process, baseline) -> None:
    slow = fake_server_process("benchmarking.stub_server", "--ttft-ms", "50", "--itl-ms", "56", "--model", MODEL)
    done = _run(slow.url, baseline.url, tmp_path / "slow")
    decisions = _decisions(tmp_path / "slow")
    assert decisions["mean_tpot_ms"] == "regressed" and decisions["output_tok_s"] == "regressed", decisions
    assert done.returncode == 3, done.stdout[-3000:]
    assert "A/B" in done.stdout and "REGRESSED" in done.stdout
    assert (tmp_path / "slow" / "benchmarks" / "point_isl-64_osl-8_con-2_n-4.ab.json").is_file()
    assert "<h2>A/B</h2>" in (tmp_path / "slow" / "reports" / "report.html").read_text()


def test_an_equal_candidate_is_within_noise_and_exits_0(tmp_path, fake_server_process, baseline) -> None:
    same = fake_server_process("benchmarking.stub_server", "--ttft-ms", "50", "--itl-ms", "40", "--model", MODEL)
    done = _run(same.url, baseline.url, tmp_path / "same")
    assert set(_decisions(tmp_path / "same").values()) == {"within_noise"}, done.stdout[-3000:]
    assert done.returncode == 0, done.stdout[-3000:]
    assert "## A/B" in (tmp_path / "same" / "reports" / "report.md").read_text()
