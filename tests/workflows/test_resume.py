"""Recognising a run whose run.py was killed, and stopping what it left running."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from workflows.processes import process_start_time
from workflows.resume import (
    CLIENT_FILE,
    OWNER_FILE,
    RunInProgress,
    find_killed_run,
    killed_run_at,
    mark_client,
    mark_owner,
    release_client,
    release_owner,
    stop_orphans,
)

ARGS = {"model": "m", "workflow": "benchmarks", "workflow_args": "mode=smoke"}


def _dead_identity() -> dict:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    start = process_start_time(proc.pid)
    proc.wait()
    return {"pid": proc.pid, "start_time": start}


def _run(root, name, *, status="running", owner=None, args=ARGS, model="m", workflow="benchmarks"):
    path = root / name
    path.mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps({"run_id": name, "model_id": model, "workflow": workflow,
                                                    "status": status}))
    (path / "cli_args.json").write_text(json.dumps(args))
    if owner is not None:
        (path / OWNER_FILE).write_text(json.dumps(owner))
    return path


def test_the_newest_run_killed_with_the_same_arguments_is_resumed(tmp_path):
    _run(tmp_path, "2026-11-24_10-00-00_m_benchmarks", status="passed")
    killed = _run(tmp_path, "2026-11-24_11-00-00_m_benchmarks", owner=_dead_identity())
    _run(tmp_path, "2026-11-24_12-00-00_x_benchmarks", owner=_dead_identity(), model="x")  # another model
    found = find_killed_run(tmp_path, "m", "benchmarks", ARGS)
    assert found is not None and found.path == killed and found.run_id == killed.name


def test_a_live_owner_other_arguments_or_a_newer_finished_run_start_afresh(tmp_path):
    live = {"pid": os.getpid(), "start_time": process_start_time(os.getpid())}
    _run(tmp_path, "2026-11-24_11-00-00_m_benchmarks", owner=live)
    assert find_killed_run(tmp_path, "m", "benchmarks", ARGS) is None  # still running elsewhere
    other = tmp_path / "other"
    _run(other, "2026-11-24_11-00-00_m_benchmarks", owner=_dead_identity(), args={**ARGS, "workflow_args": "x=1"})
    assert find_killed_run(other, "m", "benchmarks", ARGS) is None
    newer = tmp_path / "newer"
    _run(newer, "2026-11-24_11-00-00_m_benchmarks", owner=_dead_identity())
    _run(newer, "2026-11-24_12-00-00_m_benchmarks", status="passed")
    assert find_killed_run(newer, "m", "benchmarks", ARGS) is None
    ended = tmp_path / "ended"
    path = _run(ended, "2026-11-24_11-00-00_m_benchmarks")
    mark_owner(path)
    release_owner(path)  # a run that ended as run.py saw it leaves no owner file
    assert find_killed_run(ended, "m", "benchmarks", ARGS) is None
    assert find_killed_run(tmp_path / "missing", "m", "benchmarks", ARGS) is None


def test_an_output_dir_holding_a_killed_run_is_resumed_and_one_in_progress_is_refused(tmp_path):
    killed = _run(tmp_path, "mine", owner=_dead_identity())
    found = killed_run_at(killed, "m", "benchmarks", ARGS)
    assert found is not None and found.path == killed and found.run_id == "mine"
    assert killed_run_at(killed, "m", "benchmarks", {**ARGS, "workflow_args": "x=1"}) is None  # another command
    assert killed_run_at(killed, "x", "benchmarks", ARGS) is None and killed_run_at(tmp_path / "no", "m", "b", ARGS) \
        is None
    busy = _run(tmp_path, "busy", owner={"pid": os.getpid(), "start_time": process_start_time(os.getpid())})
    with pytest.raises(RunInProgress, match=f"--output-dir {busy} belongs to a run that is still going"):
        killed_run_at(busy, "m", "benchmarks", ARGS)
    assert killed_run_at(_run(tmp_path, "done", status="passed", owner=_dead_identity()), "m", "benchmarks",
                         ARGS) is None


def test_a_reused_pid_is_not_the_owner(tmp_path):
    reused = {"pid": os.getpid(), "start_time": "1"}  # this pid, but another process's start time
    path = _run(tmp_path, "2026-11-24_11-00-00_m_benchmarks", owner=reused)
    assert find_killed_run(tmp_path, "m", "benchmarks", ARGS).path == path


def test_the_killed_runs_client_is_stopped_by_pid_and_start_time(tmp_path):
    client = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        mark_client(tmp_path, client.pid, "benchmarks")
        lines = stop_orphans(tmp_path, timeout=10)
        assert client.wait(timeout=10) is not None
        assert lines == [(f"stopped the killed run's client workflow benchmarks (process group {client.pid}): "
                          f"ended on SIGTERM")]
        assert not (tmp_path / CLIENT_FILE).exists()
    finally:
        client.kill()


def test_a_pid_file_naming_another_process_stops_nothing(tmp_path):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        (tmp_path / CLIENT_FILE).write_text(json.dumps({"pid": bystander.pid, "start_time": "1"}))
        (tmp_path / "server.pid.json").write_text(json.dumps({"kind": "local", "pid": bystander.pid,
                                                              "pgid": bystander.pid}))  # no start time
        assert stop_orphans(tmp_path, timeout=1) == []
        assert bystander.poll() is None
        # the killed run's records are handled: none is left for the rerun's own client records to pile onto
        assert not (tmp_path / CLIENT_FILE).exists() and not (tmp_path / "server.pid.json").exists()
    finally:
        bystander.kill()
        bystander.wait()


def test_two_clients_side_by_side_are_both_recorded_and_both_stopped(tmp_path):
    """A release runs evals and tests at once: client.pid.json names both until each ends, and a rerun
    after kill -9 stops every one it names."""
    evals, tests = (subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
                    for _ in range(2))
    try:
        mark_client(tmp_path, evals.pid, "evals")
        mark_client(tmp_path, tests.pid, "tests")
        assert [c["workflow"] for c in json.loads((tmp_path / CLIENT_FILE).read_text())["clients"]] == \
            ["evals", "tests"]
        release_client(tmp_path, evals.pid)  # evals ended first
        assert [c["workflow"] for c in json.loads((tmp_path / CLIENT_FILE).read_text())["clients"]] == ["tests"]
        mark_client(tmp_path, evals.pid, "evals")
        assert stop_orphans(tmp_path, timeout=10) == [
            f"stopped the killed run's client workflow {name} (process group {proc.pid}): ended on SIGTERM"
            for name, proc in (("tests", tests), ("evals", evals))]
        assert evals.wait(timeout=10) is not None and tests.wait(timeout=10) is not None
        assert not (tmp_path / CLIENT_FILE).exists()
        release_client(tmp_path, tests.pid)  # nothing left to release: no file, no error
    finally:
        evals.kill()
        tests.kill()
