"""workflows/outcome.py: a run that did not pass ends with the server's own error when the server
failed, read from server.log (one closing line with the log's path)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import pytest

from contracts import REPO_ROOT
from contracts.run_dir import Manifest, RunStatus, Step, StepStatus
from tests.helpers import free_port
from workflows.outcome import summary_lines

MODEL = "SmolLM2-135M-Instruct"
CAUSE = "torch._inductor.exc.InductorError: InvalidCxxCompiler: No working C++ compiler found"
# What vLLM's engine prints when inductor has no compiler, then the API server's pointer to it.
ENGINE_TRACEBACK = f"""\
(EngineCore_DP0 pid=42) ERROR 11-22 21:50:09 [core.py:710] EngineCore encountered a fatal error.
(EngineCore_DP0 pid=42) ERROR 11-22 21:50:09 [core.py:710] Traceback (most recent call last):
(EngineCore_DP0 pid=42) ERROR 11-22 21:50:09 [core.py:710]   File "vllm/v1/sample/ops/logprobs.py", line 18, in batched_count_greater_than
(EngineCore_DP0 pid=42) ERROR 11-22 21:50:09 [core.py:710] {CAUSE} in torch._inductor.config.cpp.cxx: (None, 'g++')
(APIServer pid=1) ERROR 11-22 21:50:09 [async_llm.py:480] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
(APIServer pid=1) INFO:     Shutting down
"""  # noqa: E501 - vLLM's log lines as it writes them


def _manifest(status: RunStatus, *steps: tuple[str, StepStatus, str]) -> Manifest:
    manifest = Manifest(run_id="r", model_id="m", workflow="release", status=status)
    manifest.steps = [Step(name=name, status=st, detail=detail) for name, st, detail in steps]
    return manifest


def test_a_failed_step_quotes_the_server_error_with_the_log_path(tmp_path):
    (tmp_path / "server.log").write_text(ENGINE_TRACEBACK)
    manifest = _manifest(RunStatus.FAILED, ("evals", StepStatus.FAILED, "the server exited (code 0) during evals"))
    lines = summary_lines(tmp_path, manifest, "the server exited (code 0) during evals")
    quoted = [line for line in lines if line.startswith("server error: ")]
    assert quoted and CAUSE in quoted[0] and quoted[0].endswith(f"(log: {tmp_path / 'server.log'})"), lines
    interrupted = replace(_manifest(RunStatus.INTERRUPTED), status=RunStatus.INTERRUPTED)
    assert any(CAUSE in line for line in summary_lines(tmp_path, interrupted, "SIGTERM; partial results kept"))


def test_a_verdict_fail_alone_or_a_clean_log_quotes_nothing(tmp_path):
    (tmp_path / "server.log").write_text(ENGINE_TRACEBACK)
    verdict_only = _manifest(RunStatus.FAILED, ("reports", StepStatus.FAILED, "verdict FAIL"))
    assert not any(line.startswith("server error") for line in summary_lines(tmp_path, verdict_only, "verdict"))
    (tmp_path / "server.log").write_text("INFO ready\nINFO Shutting down\n")
    failed = _manifest(RunStatus.FAILED, ("evals", StepStatus.FAILED, "exit code 1"))
    assert not any(line.startswith("server error") for line in summary_lines(tmp_path, failed, "a client failed"))


@pytest.mark.slow
def test_an_engine_that_dies_mid_run_is_quoted_in_run_py_closing_lines(tmp_path):
    """--local-server with a fake engine: the fault server answers, dies during benchmarks (after
    readiness and three requests), and the engine writes vLLM's traceback before exiting 0."""
    engine = tmp_path / "fake_engine.sh"
    engine.write_text(
        "#!/bin/sh\n"
        f"cd {REPO_ROOT}\n"
        f"{sys.executable} -m benchmarking.fault_server --port $SERVICE_PORT --model {MODEL} --fault die_after=3\n"
        f"cat <<'EOF'\n{ENGINE_TRACEBACK}EOF\n"
        "exit 0\n")
    engine.chmod(0o755)
    out = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "run.py"), "--model", MODEL, "--device", "cpu", "--workflow", "benchmarks",
         "--local-server", "--service-port", str(free_port()), "--no-auth", "--disable-trace-capture",
         "--workflow-args", "mode=smoke", "--output-dir", str(out)],
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT, env=dict(os.environ, TT_ENGINE_PYTHON=str(engine)))
    assert result.returncode == 1, result.stdout[-3000:]
    closing = "\n".join(result.stdout.strip().splitlines()[-15:])
    assert "the server exited (code 0) during benchmarks" in closing, closing
    assert f"server error: {CAUSE}" in closing and f"(log: {out / 'server.log'})" in closing, closing


def test_closing_lines_name_the_evals_the_verdict_requires_not_every_undecided_score(tmp_path):
    """Smoke mode shows eval scores without requiring them: an undecided one is in the report, not in the
    run's last lines; a required one, or an eval that could not run, is named there."""
    import json

    for task, record in {"chat": {"status": "inconclusive", "value": 0.6, "ci95": [0.4, 0.8], "target": 0.48,
                                  "samples": 25},
                         "qa": {"status": "inconclusive", "value": 0.5, "ci95": [0.3, 0.7], "target": 0.4,
                                "samples": 25},
                         "mc": {"status": "failed", "error": "lm-eval exited 1"}}.items():
        (tmp_path / "evals" / task).mkdir(parents=True)
        (tmp_path / "evals" / task / "eval_record.json").write_text(json.dumps({"task": task, **record}))
    (tmp_path / "reports").mkdir()
    checks = [{"name": f"accuracy {task}", "category": "evals", "item": task, "required": task == "qa",
               "decision": "inconclusive"} for task in ("chat", "qa", "mc")]
    (tmp_path / "reports" / "report.json").write_text(json.dumps({"verdict": {"result": "INCONCLUSIVE",
                                                                              "checks": checks}}))
    lines = summary_lines(tmp_path, _manifest(RunStatus.INCONCLUSIVE), "the release verdict is INCONCLUSIVE")
    evals = [line for line in lines if line.startswith("eval ")]
    assert evals == ["eval mc: failed: lm-eval exited 1",
                     "eval qa: inconclusive: score 0.5 in [0.3, 0.7] vs target 0.4 (n=25)"], lines
