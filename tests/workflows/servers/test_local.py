"""``--local-server``: the session's real vLLM CPU server (SmolLM2), plus failure paths with fakes.

The real server (tests/conftest.py) is started through the backend registry exactly as the pipeline does
(host setup -> start_server("local") -> wait_until_ready) and checked over HTTP: auth enforced,
/v1/models, completions with echo+logprobs (what lm-eval needs), chat, streaming with usage.
Failure paths use *fake engines* (tiny shell scripts standing in for the engine python).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest
import requests

from contracts import REPO_ROOT
from contracts.model_spec import ModelSpec
from contracts.openai_http import bearer_headers
from tests.helpers import free_port
from workflows.readiness import ReadinessTimeout, wait_until_ready
from workflows.servers import ServerDied, ServerLaunch, ServerStartError, start_server

CPU_SPEC_ID = "id_vllm-cpu_SmolLM2-135M-Instruct_cpu"


def cpu_spec() -> ModelSpec:
    """The catalog's real CPU spec (a copy: tests may change it)."""
    import copy

    from workflows.catalog import load_catalog

    return copy.deepcopy(load_catalog().specs[CPU_SPEC_ID])


def make_launch(tmp: Path, spec: ModelSpec, **kw) -> ServerLaunch:
    tmp.mkdir(parents=True, exist_ok=True)
    spec_path = spec.write(tmp / "model_spec.json")
    return ServerLaunch(spec=spec, spec_json_path=spec_path, run_dir=tmp, service_port=kw.pop("port", free_port()),
                        **kw)


def group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) members of a process group."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) != pgid:
                    continue
                stat = (entry / "stat").read_text()
                if stat[stat.rindex(")") + 2] != "Z":
                    pids.append(int(entry.name))
            except (OSError, ValueError):
                pass
    return pids


# ------------------------------------------------------------------------------ the real server


@pytest.fixture(scope="module")
def real_server(real_cpu_server):
    """The session's real server (tests/conftest.py), which is this backend's real path: host setup ->
    start_server("local") with a bearer key -> wait_until_ready. One vLLM start for every test that only
    talks to it; the tests that must own a server (failures, detach, orchestrator killed) start their own."""
    from workflows.host_setup import prepare_host

    return real_cpu_server.handle, real_cpu_server.api_key, prepare_host(cpu_spec())


def _post(handle, key, path, body, **kw):
    return requests.post(handle.base_url + path, json=body, headers=bearer_headers(key),
                         timeout=120, **kw)


@pytest.mark.integration
@pytest.mark.slow
def test_auth_enforced_and_models(real_server):
    handle, key, _ = real_server
    assert handle.base_url.startswith("http://127.0.0.1:")
    assert requests.get(handle.base_url + "/health", timeout=10).status_code == 200
    assert requests.get(handle.base_url + "/v1/models", timeout=10).status_code == 401
    assert requests.get(handle.base_url + "/v1/models", headers=bearer_headers("wrong"),
                        timeout=10).status_code == 401
    no_bearer = requests.post(handle.base_url + "/v1/completions", json={"model": handle.served_model_name,
                                                                         "prompt": "hi", "max_tokens": 1}, timeout=30)
    assert no_bearer.status_code == 401
    models = requests.get(handle.base_url + "/v1/models", headers=bearer_headers(key), timeout=10)
    assert [m["id"] for m in models.json()["data"]] == ["SmolLM2-135M-Instruct"]


@pytest.mark.integration
@pytest.mark.slow
def test_completion_echo_logprobs(real_server):
    handle, key, _ = real_server
    resp = _post(handle, key, "/v1/completions", {"model": handle.served_model_name,
                                                  "prompt": "The capital of France is", "max_tokens": 1,
                                                  "temperature": 0, "echo": True, "logprobs": 1})
    assert resp.status_code == 200, resp.text
    choice = resp.json()["choices"][0]
    lp = choice["logprobs"]
    assert lp["token_logprobs"][0] is None and len(lp["tokens"]) >= 6  # prompt tokens + 1 generated
    assert choice["text"].startswith("The capital of France is")


@pytest.mark.integration
@pytest.mark.slow
def test_chat_completion_uses_chat_template(real_server):
    handle, key, _ = real_server
    resp = _post(handle, key, "/v1/chat/completions", {
        "model": handle.served_model_name, "max_tokens": 12, "temperature": 0,
        "messages": [{"role": "user", "content": "What is the capital of France?"}]})
    assert resp.status_code == 200, resp.text
    assert "Paris" in resp.json()["choices"][0]["message"]["content"]


@pytest.mark.integration
@pytest.mark.slow
def test_streaming_with_usage_and_tokenizer_info(real_server):
    handle, key, _ = real_server
    body = {"model": handle.served_model_name, "prompt": "Count: 1, 2, 3,", "max_tokens": 5, "ignore_eos": True,
            "min_tokens": 5, "stream": True, "stream_options": {"include_usage": True}}
    chunks = []
    with _post(handle, key, "/v1/completions", body, stream=True) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                chunks.append(json.loads(line[6:]))
    assert chunks[-1]["usage"]["completion_tokens"] == 5
    info = requests.get(handle.base_url + "/tokenizer_info", headers=bearer_headers(key), timeout=10)
    assert info.status_code == 200


@pytest.mark.integration
@pytest.mark.slow
def test_key_never_in_argv_or_log(real_server):
    handle, key, _ = real_server
    for pid in group_pids(handle.pgid):
        assert key.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    log = handle.log_path.read_text()
    assert key not in log and "--host 127.0.0.1" in log and "auth enforced" in log
    text = handle.describe_how_to_reach(key)
    assert f"Bearer: {key}" in text and f"Server URL: {handle.base_url}" in text and f"-{handle.pgid}" in text


@pytest.mark.integration
@pytest.mark.slow
def test_warmup_and_external_attach_against_real_server(real_server):
    from benchmarking.client import ClientConfig
    from benchmarking.prompts import LocalTokenizer
    from benchmarking.trace_capture import warm_up
    from workflows.servers import attach_external

    handle, key, host = real_server
    lines = []
    tokenizer = LocalTokenizer(str(host.tokenizer_dir))
    config = ClientConfig(base_url=handle.base_url, model=handle.served_model_name, api_key=key, stall_timeout_s=60)
    outcomes = warm_up(config, [(16, 2), (16, 2)], tokenizer, log=lines.append)
    assert [(o.isl, o.osl, o.success) for o in outcomes] == [(16, 2, True)], lines
    assert lines[-1].startswith("warm-up isl=16 osl=2: ttft ")
    ext = attach_external(handle.base_url, handle.served_model_name, key)
    ext.stop()  # never stops someone else's server
    assert requests.get(handle.base_url + "/health", timeout=10).status_code == 200
    with pytest.raises(ServerStartError, match="not 'other-model'"):
        attach_external(handle.base_url, "other-model", key)


# ------------------------------------------------------------------------------ failure paths (fakes)


def fake_engine(tmp_path: Path, body: str) -> str:
    """A fake engine 'python': a shell script that ignores its arguments (the launcher path)."""
    path = tmp_path / "fake_engine.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_port_already_taken_is_one_line_and_starts_nothing(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        launch = make_launch(tmp_path, cpu_spec(), port=port,
                             extra_env={"TT_ENGINE_PYTHON": fake_engine(tmp_path, "exit 0\n")})
        with pytest.raises(ServerStartError) as exc:
            start_server("local", launch)
    assert f"port {port} on 127.0.0.1 is already in use" in str(exc.value) and "\n" not in str(exc.value)
    assert not launch.server_log_path.exists()


def test_a_second_cards_server_on_a_taken_port_is_told_which_port_to_take(tmp_path):
    """run.py's multi-card example: one server per --device-id; the second on the first's port is refused with
    one line that names a port of its own (never two servers of one model behind one port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        launch = make_launch(tmp_path, cpu_spec(), port=port, device_ids=[1],
                             extra_env={"TT_ENGINE_PYTHON": fake_engine(tmp_path, "exit 0\n")})
        with pytest.raises(ServerStartError) as exc:
            start_server("local", launch)
    message = str(exc.value)
    assert "already in use" in message and f"--device-id 1 beside another card's needs its own port: " \
        f"--service-port {port + 2}" in message and "\n" not in message


def test_server_exits_during_startup_shows_log_tail_and_code(tmp_path):
    script = ('for i in $(seq 1 50); do echo "fake engine loading $i"; done\n'
              'echo "fatal: fake engine crashed" >&2\nexit 3\n')
    launch = make_launch(tmp_path, cpu_spec(), extra_env={"TT_ENGINE_PYTHON": fake_engine(tmp_path, script)})
    handle = start_server("local", launch)
    try:
        with pytest.raises(ServerDied) as exc:
            wait_until_ready(handle, bearer="k", timeout_s=60, poll_interval_s=0.1)
    finally:
        handle.stop(timeout=2)
    assert exc.value.exit_code == 3
    message = str(exc.value)
    assert "exited with code 3" in message and "fatal: fake engine crashed" in message
    assert "fake engine loading 12\n" in message and "fake engine loading 11\n" not in message  # last 40 lines


def test_readiness_timeout_then_stop_kills_whole_group(tmp_path):
    """A fake engine that never listens, ignores SIGTERM and has a child: stop() must still leave nothing."""
    script = "trap '' TERM\nsleep 300 &\necho fake engine hanging\nwhile true; do sleep 1; done\n"
    launch = make_launch(tmp_path, cpu_spec(), extra_env={"TT_ENGINE_PYTHON": fake_engine(tmp_path, script)})
    handle = start_server("local", launch)
    try:
        with pytest.raises(ReadinessTimeout, match="not ready after 1.5 s"):
            wait_until_ready(handle, bearer=None, timeout_s=1.5, poll_interval_s=0.2)
        assert len(group_pids(handle.pgid)) >= 2
    finally:
        t0 = time.monotonic()
        handle.stop(timeout=1.0)
    assert group_pids(handle.pgid) == [] and time.monotonic() - t0 < 8
    assert handle.exit_code() == -signal.SIGKILL


def test_detach_leaves_server_running(tmp_path):
    launch = make_launch(tmp_path, cpu_spec(), extra_env={"TT_ENGINE_PYTHON": fake_engine(tmp_path, "sleep 30\n")})
    handle = start_server("local", launch)
    try:
        handle.detach().stop()
        assert handle.is_alive()
        assert json.loads((tmp_path / "server.pid.json").read_text())["pgid"] == handle.pgid
    finally:
        os.killpg(handle.pgid, signal.SIGKILL)
        handle.proc.wait()


def _start_from_doomed_parent(tmp_path: Path, outlive: bool) -> int:
    """Start a fake-engine server from a child process that is then SIGKILLed; return the server pid."""
    import subprocess
    import sys
    import textwrap

    engine = fake_engine(tmp_path, "sleep 60\n")
    code = textwrap.dedent(f"""
        import json, sys, time
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from pathlib import Path
        from workflows.servers import ServerLaunch, start_server
        from contracts.model_spec import ModelSpec
        launch = ServerLaunch(spec=ModelSpec.read(Path({str(tmp_path / 'spec.json')!r})),
                              spec_json_path=Path({str(tmp_path / 'spec.json')!r}), run_dir=Path({str(tmp_path)!r}),
                              service_port={free_port()}, extra_env={{"TT_ENGINE_PYTHON": {engine!r}}},
                              outlive_orchestrator={outlive})
        handle = start_server("local", launch)
        print(handle.pid, flush=True)
        time.sleep(120)
    """)
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pid = int(parent.stdout.readline())
    parent.kill()  # SIGKILL: no teardown code can run
    parent.wait()
    return pid


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            if Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z":
                return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.05)
    return False


def test_server_dies_with_a_sigkilled_orchestrator(tmp_path):
    cpu_spec().write(tmp_path / "spec.json")
    pid = _start_from_doomed_parent(tmp_path, outlive=False)
    assert _gone_within(pid, 10), "the server outlived a SIGKILLed run.py"


def test_workflow_server_outlives_its_orchestrator(tmp_path):
    cpu_spec().write(tmp_path / "spec.json")
    pid = _start_from_doomed_parent(tmp_path, outlive=True)
    try:
        assert not _gone_within(pid, 1.0)
    finally:
        os.killpg(pid, signal.SIGKILL)
