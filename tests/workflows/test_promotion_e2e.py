"""``release_matrix.py --promote`` end to end on the project's stub: clean runs, then a run whose stub answers
40% slower per token; the regression gate fails its verdict and the promotion demotes the spec, naming the
metric and its ratio in promotions.json and the release notes.

The runs are plain run.py smoke benchmark runs against ``benchmarking.stub_server`` (a named fake with a
programmed TTFT/ITL, no engine) with a private run history (TT_HISTORY_URL); the promotion reads them from
that history with ``--skip-run`` (it runs nothing again) and applies to a copy of the catalog.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from contracts import REPO_ROOT

MODEL = "SmolLM2-135M-Instruct"
SMOL = "id_vllm-cpu_SmolLM2-135M-Instruct_cpu"
#: Slow runs tried: the gate decides only when the host was equally busy in both runs (its CPU pressure),
#: which other work on a shared host can change between two runs.
ATTEMPTS = 4
MATRIX = ("schema: tt-release-matrix/1\ntiers:\n  stub:\n    description: the stub\n    devices: [cpu]\n"
          "    statuses: [EXPERIMENTAL, FUNCTIONAL, COMPLETE, TOP_PERF]\n    models: [SmolLM2-135M-Instruct]\n"
          "    impls: [vllm-cpu]\n    workflow: benchmarks\n    mode: smoke\n"
          "promotion:\n  releases: 2\n  required_tiers:\n    cpu: [stub]\n")


def _run(url: str, out, history, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TT_HISTORY_URL=f"sqlite:///{history}")
    return subprocess.run([sys.executable, str(REPO_ROOT / "run.py"), "--model", MODEL, "--device", "cpu",
                           "--workflow", "benchmarks", "--server-url", url, "--no-auth", "--workflow-args",
                           "mode=smoke", "--output-dir", str(out), *extra],
                          capture_output=True, text=True, timeout=600, cwd=REPO_ROOT, env=env)


def _baselines() -> int:
    """Clean runs before the slow one: two (a promotion needs two clean releases), more when the gate needs
    more accepted runs to tell the run-to-run noise (``reports.run_noise.MIN_RUNS``, where it has one)."""
    from reports import run_noise

    return max(2, int(getattr(run_noise, "MIN_RUNS", 1)))


def _slow_run(tmp_path, history, fast_url: str, slow_url: str):
    """The newest clean run and the slow run right after it, on a copy of the history per attempt (an
    undecided attempt must not become the next one's baseline): run back to back, the two see a shared host
    alike more often than runs minutes apart. The slow run's history, report and process once the gate decided."""
    from reports.comparison import busier_host

    for attempt in range(ATTEMPTS):
        copy = tmp_path / f"history-slow{attempt}.sqlite3"
        shutil.copyfile(history, copy)
        base = _run(fast_url, tmp_path / f"last-base{attempt}", copy)
        assert base.returncode == 0, base.stdout[-3000:]
        out = tmp_path / f"slow{attempt}"
        done = _run(slow_url, out, copy, "--compare-to", "last")
        report = json.loads((out / "reports" / "report.json").read_text())
        comparison = report["comparison"]
        if busier_host(comparison["cpu_pressure"], comparison["baseline_cpu_pressure"]) is None:
            return copy, report, done
    pytest.fail(f"the host was busier in every slow attempt than in its baseline: {comparison['notes']}")


@pytest.mark.slow
def test_a_regression_the_gate_fails_demotes_the_spec_naming_metric_and_ratio(tmp_path, fake_server_process) -> None:
    """Slow: three or four run.py smoke runs against the stub (the last clean one and the slow one again when
    the host was busier in one of them) and release_matrix.py --promote --apply, each a process with its own
    venv start-up: 33 s here on 2 cores in one attempt, over 60 s when the host makes it try again."""
    history = tmp_path / "history.sqlite3"
    fast = fake_server_process("benchmarking.stub_server", "--ttft-ms", "50", "--itl-ms", "10", "--model", MODEL)
    for i in range(_baselines() - 1):
        done = _run(fast.url, tmp_path / f"base{i}", history)
        assert done.returncode == 0, done.stdout[-3000:]
    slow = fake_server_process("benchmarking.stub_server", "--ttft-ms", "50", "--itl-ms", "14", "--model", MODEL)
    slow_history, report, done = _slow_run(tmp_path, history, fast.url, slow.url)
    fast.stop()
    slow.stop()
    regressed = {m["name"]: m["ratio"] for m in report["comparison"]["metrics"] if m["decision"] == "regressed"}
    tpot = {name: ratio for name, ratio in regressed.items() if name.endswith(" tpot_ms")}
    assert tpot and all(1.2 < r < 1.6 for r in tpot.values()), report["comparison"]
    assert report["verdict"]["result"] == "FAIL" and done.returncode == 3, done.stdout[-3000:]
    assert any(b["category"] == "comparison" for b in report["verdict"]["blockers"])

    repo = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "workflows" / "model_specs", repo / "workflows" / "model_specs")
    shutil.copy(REPO_ROOT / "VERSION", repo / "VERSION")
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    env = dict(os.environ, TT_HISTORY_URL=f"sqlite:///{slow_history}")
    env.pop("TT_INFERENCE_ORCHESTRATOR", None)
    out = tmp_path / "promote"
    promoted = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "release_matrix.py"), "--matrix",
                               str(tmp_path / "matrix.yaml"), "--tier", "stub", "--skip-run", "--promote", "--apply",
                               "--apply-to", str(repo), "--out", str(out)],
                              capture_output=True, text=True, timeout=300, cwd=REPO_ROOT, env=env)
    assert promoted.returncode == 0, (promoted.stdout + promoted.stderr)[-3000:]
    doc = json.loads((out / "promotions.json").read_text())
    (proposal,) = doc["promotions"]
    assert (proposal["decision"], proposal["from"], proposal["evidence"]) == (
        "demote", "COMPLETE", [report["metadata"]["run_id"]]), proposal
    name, ratio = next(iter(sorted(tpot.items())))
    assert f"{name} x{ratio:.2f}" in proposal["reason"] and "the regression gate failed its verdict" in \
        proposal["reason"], proposal["reason"]
    notes = (out / "release_notes.md").read_text()
    assert f"{name} x{ratio:.2f}" in notes and "(failed the verdict)" in notes and "engine external" in notes
    assert f"status: {proposal['to']}" in (repo / "workflows" / "model_specs" / "cpu.yaml").read_text()
