"""run.py end to end: the bootstrap, clear errors, and the CPU release against the real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from contracts import REPO_ROOT
from tests.helpers import free_port, verdict_exit_code


def run_py(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO_ROOT / "run.py"), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO_ROOT, env=env)


def test_list_is_whole_when_piped() -> None:
    """`run.py --list | grep -c Instruct` counts every Instruct model: plain rows, names never cut."""
    from workflows.catalog import load_catalog

    specs = load_catalog().specs.values()
    result = run_py("--list")  # stdout is a pipe here
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["model", "device", "impl", "engine", "status", "default"]
    assert sum("Instruct" in line for line in lines) == sum("Instruct" in s.model_name for s in specs)
    assert any(line.split()[:3] == ["Llama-3.1-8B-Instruct", "n150", "tt-transformers"] for line in lines)
    assert "…" not in result.stdout and len(lines) == len(specs) + 1


def test_list_as_json() -> None:
    from workflows.catalog import load_catalog

    result = run_py("--list", "--format", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert len(rows) == len(load_catalog().specs)
    assert {"model": "SmolLM2-135M-Instruct", "device": "cpu", "impl": "vllm-cpu", "engine": "vllm",
            "status": "COMPLETE", "default": "yes"} in rows


def test_print_docker_cmd_on_any_host(tmp_path) -> None:
    """The 70B model needs hundreds of GB of RAM: printing its command must not judge this host."""
    out = tmp_path / "run"
    result = run_py("--model", "Llama-3.1-70B-Instruct", "--workflow", "server", "--device", "t3k",
                    "--docker-server", "--print-docker-cmd", "--no-auth", "--output-dir", str(out))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    lines = result.stdout.splitlines()
    command = next(line for line in lines if line.startswith("docker run "))
    assert "--device /dev/tenstorrent:/dev/tenstorrent" in command and "--publish 127.0.0.1:8000:8000" in command
    assert any(line.startswith("# note: the host that runs it needs >= ") and "GB of RAM" in line for line in lines)
    assert lines[-1] == f"Run directory: {out.resolve()}"


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


@pytest.mark.parametrize("workflow", ["benchmarks", "stress_tests"])  # both replay a trace with the same code
def test_bad_trace_stops_run_py_before_a_server_starts(tmp_path, workflow: str) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("timestamp,input_tokens,output_tokens\n0,10,2\n100,2000,100\n")
    result = run_py("--model", "SmolLM2-135M-Instruct", "--workflow", workflow, "--device", "cpu", "--local-server",
                    "--workflow-args", f"workload=trace trace_file={trace}", "--output-dir", str(tmp_path / "run"))
    assert result.returncode == 2
    assert result.stderr.strip() == (f"run.py: error: --workflow-args trace_file: {trace}:3: input 2000 + output 100 "
                                     "tokens exceed the model's context of 2048")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "directory", "too big"])
def test_a_trace_that_is_no_bounded_regular_file_is_one_line_exit_2(tmp_path, kind: str) -> None:
    """/dev/zero or a FIFO used to be read forever (run.py hung before any server started); a file over
    the bound is refused before it is read into memory. A sparse file stands in for a huge trace."""
    from benchmarking.workloads.trace_file import MAX_TRACE_BYTES

    trace = {"/dev/zero": "/dev/zero", "fifo": str(tmp_path / "fifo"), "directory": str(tmp_path),
             "too big": str(tmp_path / "huge.jsonl")}[kind]
    if kind == "fifo":
        os.mkfifo(trace)
    if kind == "too big":
        with open(trace, "wb") as handle:
            handle.truncate(MAX_TRACE_BYTES + 1)
    result = run_py("--model", "SmolLM2-135M-Instruct", "--workflow", "benchmarks", "--device", "cpu",
                    "--local-server", "--workflow-args", f"workload=trace trace_file={trace}",
                    "--output-dir", str(tmp_path / "run"), timeout=60)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"run.py: error: --workflow-args trace_file: {trace} ")
    assert ("regular file" in lines[0]) if kind != "too big" else ("MiB" in lines[0])
    assert not (tmp_path / "run").exists()


def test_a_key_given_twice_in_workflow_args_is_one_line_exit_2() -> None:
    result = run_py("--model", "SmolLM2-135M-Instruct", "--workflow", "release", "--device", "cpu",
                    "--local-server", "--workflow-args", "mode=smoke mode=ci")
    assert result.returncode == 2
    assert result.stderr.strip() == ("run.py: error: --workflow-args key 'mode' is given twice ('smoke', then "
                                     "'ci'); give it once")


@pytest.mark.integration
@pytest.mark.slow
def test_cpu_release_smoke(tmp_path) -> None:
    """The README's main command at smoke size: real server, real evals and benchmarks, a verdict.

    Slow: a whole release against a real vLLM server it starts itself (the --local-server path of the
    README's command) is the thing under test."""
    out = tmp_path / "run"
    result = run_py("--model", "SmolLM2-135M-Instruct", "--workflow", "release", "--device", "cpu",
                    "--local-server", "--service-port", str(free_port()), "--workflow-args", "mode=smoke",
                    "--output-dir", str(out), timeout=1500)
    output = result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1] == f"Run directory: {out.resolve()}", output[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert {"run_id", "model_id", "workflow", "status", "steps"} <= set(manifest)
    steps = {s["name"]: s for s in manifest["steps"]}
    for name in ("resolve_spec", "prepare_host", "prepare_venvs", "start_server", "wait_ready", "evals",
                 "benchmarks", "reports", "teardown"):
        assert name in steps, (name, list(steps))
    for name in ("tests", "stress_tests"):  # run, or recorded as skipped while not implemented
        assert steps[name]["status"] in ("passed", "failed", "skipped"), steps[name]
    for name in ("evals", "benchmarks", "reports"):
        assert steps[name]["outputs"], name
        for rel in steps[name]["outputs"]:
            assert (out / rel).exists(), rel
    for name in ("report.md", "report.json", "summary.csv", "report.html"):
        assert (out / "reports" / name).exists()
    report = json.loads((out / "reports" / "report.json").read_text())
    verdict = report["verdict"]["result"]
    # The verdict is the exit code: PASS 0, FAIL 3, INCONCLUSIVE 4 (a busy host can leave a perf point
    # undecided at smoke size; the report then names what more samples would decide).
    assert result.returncode == verdict_exit_code(verdict), output[-3000:]
    assert (out / "server.log").stat().st_size > 0
    # The report was rendered once more after the run ended: its final status and end time, every step's outcome.
    markdown = (out / "reports" / "report.md").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert f"| Run status | {manifest['status']} |" in markdown, markdown[-3000:]
    assert manifest["status"] != "running" and "| Ended | n/a |" not in markdown
    # Rebuild the reports from the files alone; the verdict is the same.
    (out / "reports" / "report.json").unlink()
    rebuilt = run_py("--workflow", "reports", "--output-dir", str(out), timeout=300)
    assert rebuilt.returncode == result.returncode, rebuilt.stdout[-2000:] + rebuilt.stderr[-2000:]
    assert json.loads((out / "reports" / "report.json").read_text())["verdict"]["result"] == verdict
