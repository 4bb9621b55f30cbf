"""Standby servers: a record names its process by pid and start time, a fingerprint covers what is served,
and a run attaches only to a live, matching server that answers for the model (workflows/servers/standby.py).

The server here is the fake OpenAI server of test_readiness.py (stdlib HTTP in this process, named as a fake), so
the record's process is this test process. The whole path through run.py against the real CPU server is in
tests/test_run_e2e_servers.py::test_workflow_server_leaves_a_server_that_answers_curl.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.workflows.servers.test_external import fakes
from tests.workflows.servers.test_local import cpu_spec, make_launch
from workflows.processes import process_start_time
from workflows.resume import stop_orphans
from workflows.servers.standby import (
    StandbyRecord,
    StandbyServerHandle,
    attach_standby,
    fingerprint,
    key_identity,
    read_standby,
)


@pytest.fixture(autouse=True)
def standby_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "standby"
    monkeypatch.setenv("TT_STANDBY_DIR", str(folder))
    return folder


def _record(fp: str, url: str, pid: int | None = None, **kw) -> StandbyRecord:
    pid = os.getpid() if pid is None else pid
    fields = dict(fingerprint=fp, pid=pid, pgid=pid, start_time=process_start_time(pid), base_url=url,
                  served_model_name="org/Model-A", log_path="/nowhere/server.log", run_id="run-1", bearer="key-1")
    fields.update(kw)
    return StandbyRecord(**fields)


def test_fingerprint_ignores_the_command_line_and_port_but_not_what_is_served(tmp_path):
    spec = cpu_spec()
    first = fingerprint(make_launch(tmp_path / "a", spec, port=8001), None, "generated")
    spec.cli_args = {"workflow": "release", "service_port": "9000"}
    assert fingerprint(make_launch(tmp_path / "b", spec, port=9000), None, "generated") == first
    assert fingerprint(make_launch(tmp_path / "c", spec), None, "API_KEY:abc") != first
    assert fingerprint(make_launch(tmp_path / "d", spec, bind_host="0.0.0.0"), None, "generated") != first
    spec.device_model_spec.vllm_args["max_num_seqs"] = "8"
    assert fingerprint(make_launch(tmp_path / "e", spec), None, "generated") != first


def test_key_identity_keeps_a_chosen_key_apart_and_never_holds_it():
    assert key_identity("generated", "k" * 40) == "generated" and key_identity("none", None) == "none"
    chosen = key_identity("API_KEY", "my-secret-key-123")
    assert chosen.startswith("API_KEY:") and "my-secret-key-123" not in chosen
    assert chosen != key_identity("API_KEY", "another-key-4567")


def test_a_record_is_private_and_read_back_only_while_its_process_lives(standby_dir):
    live = _record("f" * 16, "http://127.0.0.1:1")
    path = live.write()
    assert path.stat().st_mode & 0o777 == 0o600 and read_standby("f" * 16) == live
    gone = _record("e" * 16, "http://127.0.0.1:1", pid=os.getpid(), start_time="1")  # the pid, another process
    gone.write()
    assert read_standby("e" * 16) is None and not gone.path().exists()
    (standby_dir / ("d" * 16 + ".json")).write_text("{not json")
    assert read_standby("d" * 16) is None and not (standby_dir / ("d" * 16 + ".json")).exists()
    assert read_standby("c" * 16) is None


def test_attach_needs_a_matching_live_server_that_serves_the_model(tmp_path):
    server = fakes.FakeOpenAIServer(bearer="key-1", models=("org/Model-A",))
    logged: list[str] = []
    try:
        launch = make_launch(tmp_path / "run", cpu_spec())
        assert attach_standby(launch, None, "generated", logged.append) is None  # nothing recorded
        _record(fingerprint(launch, None, "generated"), server.url).write()
        handle = attach_standby(launch, None, "generated", logged.append)
        assert isinstance(handle, StandbyServerHandle) and handle.base_url == server.url and handle.is_alive()
        handle.stop()  # never stopped: the user's
        assert handle.is_alive() and "reusing the standby server" in handle.reuse_line()
        _record(fingerprint(launch, None, "generated"), server.url, bearer="wrong-key").write()
        assert attach_standby(launch, None, "generated", logged.append) is None
        assert logged and "did not answer as expected" in logged[-1]
    finally:
        server.close()


def test_resuming_a_killed_run_never_stops_the_standby_it_reused(tmp_path):
    handle = StandbyServerHandle(_record("a" * 16, "http://127.0.0.1:1"))
    handle.write_pidfile(tmp_path)
    assert json.loads((tmp_path / "server.pid.json").read_text())["standby"] is True
    assert stop_orphans(tmp_path, timeout=1) == []  # this very process, untouched


def test_the_pairs_a_run_warmed_are_kept_in_the_record_for_the_next_run(standby_dir):
    record = _record("b" * 16, "http://127.0.0.1:1", warmed=[[128, 32]])  # as JSON gives them back
    record.write()
    assert read_standby("b" * 16).warmed == ((128, 32),)
    handle = StandbyServerHandle(read_standby("b" * 16))
    assert handle.not_yet_warmed([(16, 8), (128, 32)]) == [(16, 8)]
    handle.mark_warmed([(16, 8)])
    again = StandbyServerHandle(read_standby("b" * 16))
    assert again.record.warmed == ((16, 8), (128, 32)) and again.not_yet_warmed([(16, 8), (128, 32)]) == []
