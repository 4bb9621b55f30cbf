"""The pipeline end to end against the shipped stub server (a named fake: no engine needed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from workflows.pipeline import client_sequence, needs_server
from contracts.workflow_args import WorkflowType

REPO = Path(__file__).resolve().parents[2]


def test_release_sequence_and_reports_follow_every_workflow() -> None:
    assert [w.value for w in client_sequence(WorkflowType.RELEASE)] == \
        ["evals", "benchmarks", "tests", "stress_tests", "reports"]
    assert client_sequence(WorkflowType.BENCHMARKS) == [WorkflowType.BENCHMARKS, WorkflowType.REPORTS]
    assert client_sequence(WorkflowType.SERVER) == []
    assert not needs_server(WorkflowType.REPORTS) and needs_server(WorkflowType.EVALS)


@pytest.fixture
def stub_server():
    """The delay-programmed stub from benchmarking/ serving the CPU default's model name."""
    proc = subprocess.Popen([sys.executable, "-m", "benchmarking.stub_server", "--port", "0", "--ttft-ms", "5",
                             "--itl-ms", "1", "--model", "SmolLM2-135M-Instruct"],
                            stdout=subprocess.PIPE, text=True, cwd=REPO)
    line = proc.stdout.readline()
    assert line.startswith("STUB_LISTENING"), line
    yield f"http://127.0.0.1:{line.split()[1]}"
    proc.terminate()
    proc.wait(timeout=10)


def run_py(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "run.py"), *args], capture_output=True, text=True,
                          timeout=600, cwd=REPO)


@pytest.mark.slow
def test_benchmarks_against_external_stub(stub_server, tmp_path) -> None:
    out = tmp_path / "run"
    result = run_py("--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "benchmarks",
                    "--server-url", stub_server, "--no-auth", "--workflow-args", "mode=smoke", "--output-dir", str(out))
    text = result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1] == f"Run directory: {out.resolve()}", text[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    names = [s["name"] for s in manifest["steps"]]
    assert names[:2] == ["resolve_spec", "prepare_host"]
    assert {"prepare_venvs", "start_server", "wait_ready", "warmup", "benchmarks", "reports", "teardown"} <= set(names)
    bench = next(s for s in manifest["steps"] if s["name"] == "benchmarks")
    assert bench["status"] == "passed", text[-3000:]
    assert any(o.endswith(".json") for o in bench["outputs"])
    assert (out / "model_spec.json").exists() and (out / "cli_args.json").exists()
    assert "[benchmarks]" in (out / "run.log").read_text()
    report = json.loads((out / "reports" / "report.json").read_text())
    assert result.returncode == (0 if report["verdict"]["result"] == "PASS" else 3), text[-3000:]


def test_external_server_with_wrong_model_is_one_clear_error(tmp_path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "benchmarking.stub_server", "--port", "0", "--model", "other-model"],
                            stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        port = proc.stdout.readline().split()[1]
        result = run_py("--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "benchmarks",
                        "--server-url", f"http://127.0.0.1:{port}", "--no-auth", "--output-dir", str(tmp_path / "r"))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert result.returncode == 1
    assert "SmolLM2-135M-Instruct" in result.stdout and "other-model" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert {s["name"]: s["status"] for s in manifest["steps"]}["benchmarks"] == "not_run"


def test_unreachable_external_server(tmp_path) -> None:
    result = run_py("--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "benchmarks",
                    "--server-url", "http://127.0.0.1:9", "--no-auth", "--output-dir", str(tmp_path / "r"))
    assert result.returncode == 1
    assert "127.0.0.1:9" in result.stdout and "Traceback" not in result.stdout + result.stderr


@pytest.mark.slow
def test_server_dying_mid_run_stops_with_log_tail_and_keeps_results(tmp_path) -> None:
    """A fake engine (the stub server, then a simulated crash) behind --local-server."""
    engine = tmp_path / "fake_engine.sh"
    engine.write_text(
        "#!/bin/sh\n"
        f"cd {REPO}\n"
        f"{sys.executable} -m benchmarking.stub_server --port $SERVICE_PORT --ttft-ms 400 --itl-ms 20 "
        "--model SmolLM2-135M-Instruct &\n"
        "sleep 6\nkill $!\necho 'fake engine: simulated crash'\nexit 7\n")
    engine.chmod(0o755)
    out = tmp_path / "run"
    env = dict(__import__("os").environ, TT_ENGINE_PYTHON=str(engine))
    result = subprocess.run(
        [sys.executable, str(REPO / "run.py"), "--model", "SmolLM2-135M-Instruct", "--device", "cpu",
         "--workflow", "benchmarks", "--local-server", "--service-port", str(_free_port()), "--no-auth",
         "--disable-trace-capture", "--workflow-args", "mode=full", "--output-dir", str(out)],
        capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "the server exited (code 7) during benchmarks" in result.stdout
    assert "fake engine: simulated crash" in result.stdout
    steps = {s["name"]: s for s in json.loads((out / "manifest.json").read_text())["steps"]}
    assert steps["benchmarks"]["status"] == "failed"
    assert steps["reports"]["status"] in ("passed", "failed") and steps["reports"]["outputs"]
    assert steps["teardown"]["status"] == "passed"


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
