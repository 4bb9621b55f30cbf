"""End-to-end through ``run.py`` with the real CPU vLLM server (the CLI contract, not internals).

Contract used here:
- ``--workflow server`` prints ``Server URL: <url>``, ``Bearer: <token>`` and, as its last line,
  ``Run directory: <abs path>``; the server stays up and answers ``curl`` with that bearer;
  ``RUN_DIR/server.pid.json`` names its process group (``Stop it: kill -TERM -- -<pgid>``).
- Killing ``run.py`` mid-benchmark (SIGTERM, as a CI timeout or ``kill`` would) leaves no process
  of the run behind: every descendant ever seen is gone and the port is free again.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.helpers import free_port, port_free, proc_stats

REPO = Path(__file__).resolve().parents[1]
RUN_PY = REPO / "run.py"

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def proc_table() -> dict[int, tuple[int, str, str]]:
    """pid -> (ppid, start time, state) for every process."""
    return {pid: (int(rest[1]), rest[19], rest[0]) for pid, rest in proc_stats().items()}


def descendants(root: int, table) -> set[tuple[int, str]]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add((child, table[child][1]))
            todo.append(child)
    return out


def alive(seen: set[tuple[int, str]]) -> list[int]:
    table = proc_table()
    return [pid for pid, start in seen if pid in table and table[pid][1] == start and table[pid][2] != "Z"]


def run_py(*args: str) -> list[str]:
    return [sys.executable, str(RUN_PY), "--model", "SmolLM2-135M-Instruct", "--device", "cpu", *args]


def test_workflow_server_leaves_a_server_that_answers_curl(tmp_path):
    port = free_port()
    proc = subprocess.run(run_py("--workflow", "server", "--local-server", "--service-port", str(port)),
                          cwd=REPO, capture_output=True, text=True, timeout=1200, stdin=subprocess.DEVNULL)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[-1].startswith("Run directory: ")
    run_dir = Path(lines[-1].split(": ", 1)[1])
    url = re.search(r"^Server URL: (\S+)$", out, re.M).group(1)
    bearer = re.search(r"^Bearer: (\S+)$", out, re.M).group(1)
    pid_info = json.loads((run_dir / "server.pid.json").read_text())
    try:
        assert url == f"http://127.0.0.1:{port}"
        curl = subprocess.run(["curl", "-s", "-H", f"Authorization: Bearer {bearer}", f"{url}/v1/models"],
                              capture_output=True, text=True, timeout=30)
        assert json.loads(curl.stdout)["data"][0]["id"] == "SmolLM2-135M-Instruct"
        assert requests.get(f"{url}/v1/models", timeout=10).status_code == 401
        assert f"kill -TERM -- -{pid_info['pgid']}" in out
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["workflow"] == "server"
        assert bearer not in (run_dir / "run.log").read_text()
        _a_later_local_run_reuses_it_as_a_standby(url, pid_info, bearer)
    finally:
        try:
            os.killpg(pid_info["pgid"], signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not port_free(port):
            time.sleep(0.5)
        try:
            os.killpg(pid_info["pgid"], signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert port_free(port)


def _a_later_local_run_reuses_it_as_a_standby(url: str, pid_info: dict, bearer: str) -> None:
    """A --local-server run of the same spec attaches to the server --workflow server left (no start of its own),
    says so, passes, and leaves it running; its record is readable by this user only (it holds the key)."""
    records = list(Path(os.environ["TT_STANDBY_DIR"]).glob("*.json"))
    assert len(records) == 1 and records[0].stat().st_mode & 0o777 == 0o600, records
    proc = subprocess.run(run_py("--workflow", "tests", "--local-server", "--service-port", str(free_port()),
                                 "--workflow-args", "test_name=unknown_model"),
                          cwd=REPO, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"reusing the standby server at {url} (pid {pid_info['pid']}" in proc.stdout
    run_dir = Path(proc.stdout.strip().splitlines()[-1].split(": ", 1)[1])
    assert json.loads((run_dir / "server.pid.json").read_text())["standby"] is True
    assert bearer not in (run_dir / "run.log").read_text()
    assert requests.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {bearer}"}, timeout=10).ok


def kill_mid_benchmark(tmp_path: Path, server_args: list[str], sig: int,
                       env: dict | None = None) -> tuple[int, list[int], int]:
    """Start a benchmarks run, signal run.py once the benchmark client runs; return (exit code, leftovers, port)."""
    port = free_port()
    log = open(tmp_path / "run_py.out", "w")
    proc = subprocess.Popen(run_py("--workflow", "benchmarks", *server_args, "--service-port", str(port)),
                            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, env=env)
    seen: set[tuple[int, str]] = set()
    bench_seen = False
    deadline = time.monotonic() + 1500
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            seen |= descendants(proc.pid, proc_table())
            for pid, _ in seen:
                try:
                    if b"benchmarking.run_benchmarks" in Path(f"/proc/{pid}/cmdline").read_bytes():
                        bench_seen = True
                except OSError:
                    pass
            if bench_seen:
                break
            time.sleep(0.2)
        assert bench_seen, "the benchmark never started: " + (tmp_path / "run_py.out").read_text()[-3000:]
        time.sleep(2.0)
        seen |= descendants(proc.pid, proc_table())
        proc.send_signal(sig)
        code = proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    deadline = time.monotonic() + 10
    while alive(seen) and time.monotonic() < deadline:
        time.sleep(0.2)
    leftovers = alive(seen)
    for pid in leftovers:  # never leave them to the next test, but still fail
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return code, leftovers, port


@pytest.mark.parametrize("sig", [signal.SIGTERM])
def test_killing_run_py_mid_benchmark_leaves_nothing(tmp_path, sig):
    code, leftovers, port = kill_mid_benchmark(tmp_path, ["--local-server"], sig)
    assert code != 0
    assert leftovers == [], f"processes of the run left behind: {leftovers}"
    assert port_free(port)


@pytest.mark.docker
def test_killing_run_py_mid_benchmark_removes_the_container(tmp_path):
    """Same through --docker-server: the container (of a test image built with no registry, under its own
    tag so the image build test beside it keeps the real one) must not survive SIGINT."""
    import importlib.util

    try:
        import docker

        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001
        if os.environ.get("REQUIRE_DOCKER") == "1":
            pytest.fail(f"REQUIRE_DOCKER=1 but no Docker engine is reachable: {exc}")
        pytest.skip("no Docker engine reachable")
    from workflows.catalog import load_catalog
    from workflows.venvs import ensure_venv

    spec = [s for s in load_catalog().for_model("SmolLM2-135M-Instruct") if s.device_type.value == "cpu"][0]
    mod_spec = importlib.util.spec_from_file_location("build_test_image", REPO / "scripts/ci/build_test_image.py")
    builder = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(builder)
    venv = Path(ensure_venv("engine-vllm-cpu").path)
    image = spec.docker_image.rsplit(":", 1)[0] + ":0.0.0-kill-test"
    builder.build_image(client, image, venv)
    mounts = ",".join(f"{src}:{dst}:ro" for src, dst, _ in builder.runtime_mounts(venv))
    env = dict(os.environ, TT_DOCKER_EXTRA_MOUNTS=mounts)
    try:
        code, leftovers, port = kill_mid_benchmark(tmp_path, ["--docker-server", "--override-docker-image", image],
                                                   signal.SIGINT, env)
        assert code != 0 and leftovers == []
        name = f"tt-inference-server-smollm2-135m-instruct-{port}"
        assert client.containers.list(all=True, filters={"name": name}) == []
        assert port_free(port)
    finally:
        client.images.remove(image, force=True)
