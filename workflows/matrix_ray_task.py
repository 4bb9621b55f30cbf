"""What runs on the Ray nodes for ``release_matrix.py --executor ray``: one spec's ``run.py``, whose run
directory travels home to the collector on the driver's node (``workflows.matrix_collector``).

Why the run directory is sent home while it is written (a snapshot every few seconds, when it changed) and
not only at the end: a node that dies mid-spec takes its disk with it, and the first attempt's partial run
must still be kept (marked interrupted) next to the retry's. The collector is an actor pinned to the
driver's node, so what it receives lands in the driver's ``--out`` directly.

The task is a plain ``run.py --local-server`` (the same command ``--executor local`` runs), started in its
own process group and asked to die with the task's worker (``PR_SET_PDEATHSIG``), so a cancelled or killed
task leaves no run.py, and so no server (run.py's own children die with it), behind on its node.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from contracts import REPO_ROOT
from workflows.matrix_collector import pack

#: Seconds between snapshots of a running spec's run directory.
SNAPSHOT_S = 2.0
#: How long the task waits for the collector to take its last snapshot.
COLLECT_TIMEOUT_S = 120.0


def _signature(run_dir: Path) -> tuple:
    try:
        return tuple(sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in run_dir.rglob("*")
                            if p.is_file()))
    except OSError:
        return ()


def node_env(scratch: Path) -> dict[str, str]:
    """run.py's environment on the node: its own throwaway history (the driver indexes every run into the one
    history), and the venvs and model cache kept outside the shipped code, which Ray unpacks anew per job."""
    env = dict(os.environ, TT_HISTORY_URL=f"sqlite:///{scratch / 'history.sqlite3'}")
    env.pop("TT_INFERENCE_ORCHESTRATOR", None)
    cache = Path.home() / ".cache" / "tt-inference-server"
    env.setdefault("TT_WORKFLOW_VENVS_DIR", str(cache / "workflow_venvs"))
    return env


def _interruptible():
    """Let Ray's cancel reach the task: it interrupts the worker's main thread as SIGINT would, which Python
    ignores while SIGINT is ignored (as a worker started under ``ray start`` may inherit); the previous handler
    (None off the main thread, where nothing can be changed)."""
    try:
        return signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:
        return None


def run_spec(collector, attempt: str, spec, tier, workflow_args: dict[str, str], compare_to: str | None,
             run_id: str, entry_timeout_s: float, stop_grace_s: float) -> dict:
    """The task: check this node can run the spec, run it, send its run directory home; a dict for the driver.
    Ctrl-C on the driver reaches the task through the collector (``should_stop``, asked every snapshot period)
    or as Ray's cancel (KeyboardInterrupt): run.py gets SIGINT and writes its report, and the last snapshot
    goes home before the task ends (``cancelled`` in the dict)."""
    import ray

    from workflows.processes import die_with_parent, stop_process_group
    from workflows.release_matrix import entry_command, why_not_here

    node_id = ray.get_runtime_context().get_node_id()
    if ray.get(collector.should_stop.remote(), timeout=COLLECT_TIMEOUT_S):
        return {"node_id": node_id, "cancelled": True}
    reason = why_not_here(spec)
    if reason:
        return {"node_id": node_id, "not_run": reason}
    scratch = Path(tempfile.mkdtemp(prefix="tt-matrix-"))
    run_dir = scratch / run_id
    cmd = entry_command(spec, tier, workflow_args, run_dir, compare_to)
    ray.get(collector.started.remote(attempt, node_id, run_id), timeout=COLLECT_TIMEOUT_S)
    console = open(scratch / "console.log", "wb")
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=node_env(scratch), stdin=subprocess.DEVNULL, stdout=console,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=die_with_parent(signal.SIGTERM))  # noqa: PLW1509 - the only way to prctl
    console.close()
    sent, last = (), 0.0
    deadline = time.monotonic() + entry_timeout_s
    previous = _interruptible()
    try:
        while proc.poll() is None:
            if time.monotonic() > deadline:
                stop_process_group(proc, stop_grace_s)
                break
            if time.monotonic() - last >= SNAPSHOT_S:
                last = time.monotonic()
                if ray.get(collector.should_stop.remote(), timeout=COLLECT_TIMEOUT_S):
                    raise KeyboardInterrupt  # the driver was interrupted: stop as Ctrl-C would
                if _signature(run_dir) != sent:
                    sent = _signature(run_dir)
                    collector.files.remote(attempt, run_id, pack(run_dir))  # fire and forget: the last is waited
            time.sleep(0.2)
    except KeyboardInterrupt:
        stop_process_group(proc, stop_grace_s, signal.SIGINT)
        ray.get(collector.files.remote(attempt, run_id, pack(run_dir)), timeout=COLLECT_TIMEOUT_S)
        shutil.rmtree(scratch, ignore_errors=True)
        return {"node_id": node_id, "exit_code": proc.returncode, "cancelled": True}
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    ray.get(collector.files.remote(attempt, run_id, pack(run_dir)), timeout=COLLECT_TIMEOUT_S)
    tail = (scratch / "console.log").read_text(errors="replace")[-2000:]
    shutil.rmtree(scratch, ignore_errors=True)
    return {"node_id": node_id, "exit_code": proc.returncode, "timed_out": time.monotonic() > deadline,
            "console_tail": tail}
