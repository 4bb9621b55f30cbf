"""run.py end to end: the bootstrap, clear errors, and the CPU release against the real server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def run_py(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "run.py"), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env)


def test_list_prints_catalog() -> None:
    result = run_py("--list")
    assert result.returncode == 0, result.stderr
    assert "SmolLM2-135M-I" in result.stdout and "tt-transformers" in result.stdout


@pytest.mark.parametrize("argv, message", [
    (["--model", "SmolLM2-135M-Instruc", "--workflow", "release", "--device", "cpu"],
     "run.py: error: unknown --model 'SmolLM2-135M-Instruc'; did you mean 'SmolLM2-135M-Instruct'?"),
    (["--model", "SmolLM2-135M-Instruct", "--workflow", "server", "--device", "cpu"],
     "run.py: error: --workflow server starts a server: add --local-server or --docker-server"),
    (["--model", "SmolLM2-135M-Instruct", "--workflow", "release", "--device", "t3k"],
     "run.py: error: model 'SmolLM2-135M-Instruct' does not support device 't3k'; supported devices: cpu"),
])
def test_bad_input_is_one_line_exit_2(argv: list[str], message: str) -> None:
    result = run_py(*argv)
    assert result.returncode == 2
    assert result.stderr.strip() == message
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.integration
@pytest.mark.slow
def test_cpu_release_smoke(tmp_path) -> None:
    """The README's main command at smoke size: real server, real evals and benchmarks, a verdict."""
    out = tmp_path / "run"
    result = run_py("--model", "SmolLM2-135M-Instruct", "--workflow", "release", "--device", "cpu",
                    "--local-server", "--service-port", str(_free_port()), "--workflow-args", "mode=smoke",
                    "--output-dir", str(out), timeout=1500)
    output = result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1] == f"Run directory: {out.resolve()}", output[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert {"run_id", "model_id", "workflow", "status", "steps"} <= set(manifest)
    steps = {s["name"]: s for s in manifest["steps"]}
    for name in ("resolve_spec", "prepare_host", "prepare_venvs", "start_server", "wait_ready", "evals",
                 "benchmarks", "reports", "teardown"):
        assert name in steps, (name, list(steps))
    assert steps["tests"]["status"] == "skipped" and steps["stress_tests"]["status"] == "skipped"
    for name in ("evals", "benchmarks", "reports"):
        assert steps[name]["outputs"], name
        for rel in steps[name]["outputs"]:
            assert (out / rel).exists(), rel
    for name in ("report.md", "report.json", "summary.csv", "report.html"):
        assert (out / "reports" / name).exists()
    report = json.loads((out / "reports" / "report.json").read_text())
    verdict = report["verdict"]["result"]
    assert result.returncode == (0 if verdict == "PASS" else 3), output[-3000:]
    assert (out / "server.log").stat().st_size > 0
    # Rebuild the reports from the files alone; the verdict is the same.
    (out / "reports" / "report.json").unlink()
    rebuilt = run_py("--workflow", "reports", "--output-dir", str(out), timeout=300)
    assert rebuilt.returncode == result.returncode, rebuilt.stdout[-2000:] + rebuilt.stderr[-2000:]
    assert json.loads((out / "reports" / "report.json").read_text())["verdict"]["result"] == verdict


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
