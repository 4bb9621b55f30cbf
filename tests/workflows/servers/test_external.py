"""External servers: nothing started or stopped; model name checked; one clear error otherwise.

Uses the fake OpenAI server of test_readiness.py (stdlib HTTP, named as a fake). The same checks
against the real vLLM server are in test_local.py::test_warmup_and_external_attach_against_real_server.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import requests

from tests.helpers import free_port

from workflows.readiness import wait_until_ready
from workflows.servers import ServerStartError, attach_external
from workflows.servers.external import normalize_url


def _load_fakes():
    path = Path(__file__).resolve().parents[1] / "test_readiness.py"
    spec = importlib.util.spec_from_file_location("readiness_fakes", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


fakes = _load_fakes()


@pytest.fixture
def fake_server():
    srv = fakes.FakeOpenAIServer(bearer="ext-token-1", models=("org/Model-A",))
    yield srv
    srv.close()


def test_attach_checks_model_and_never_stops(fake_server):
    handle = attach_external(fake_server.url, "org/Model-A", "ext-token-1")
    assert handle.kind == "external" and handle.base_url == fake_server.url and handle.is_alive()
    info = wait_until_ready(handle, bearer="ext-token-1", timeout_s=10, poll_interval_s=0.1)
    assert info.models == ["org/Model-A"]
    handle.stop()
    handle.stop()
    assert requests.get(fake_server.url + "/health", timeout=5).status_code == 200
    assert "did not start it" in handle.describe_how_to_reach("ext-token-1")


def test_wrong_model_name_is_one_clear_error(fake_server):
    with pytest.raises(ServerStartError) as exc:
        attach_external(fake_server.url, "org/Model-B", "ext-token-1")
    assert str(exc.value) == (f"the server at {fake_server.url} serves ['org/Model-A'], not 'org/Model-B': "
                              f"point --server-url at a server for this model")


def test_unreachable_url_is_one_clear_error():
    port = free_port()  # free a moment ago: nothing listens there
    with pytest.raises(ServerStartError) as exc:
        attach_external("127.0.0.1", "org/Model-A", None, port=port)
    assert f"cannot reach the server at http://127.0.0.1:{port}" in str(exc.value) and "\n" not in str(exc.value)


def test_missing_or_wrong_bearer(fake_server):
    with pytest.raises(ServerStartError, match="401: no bearer was sent"):
        attach_external(fake_server.url, "org/Model-A", None)
    with pytest.raises(ServerStartError, match="401: the bearer does not match"):
        attach_external(fake_server.url, "org/Model-A", "nope")


def test_not_an_openai_server():
    srv = fakes.FakeOpenAIServer()
    try:
        with pytest.raises(ServerStartError, match="HTTP 404"):
            attach_external(srv.url + "/nothing-here", "m", None)
    finally:
        srv.close()


@pytest.mark.parametrize("url,port,expected", [
    ("127.0.0.1", 8000, "http://127.0.0.1:8000"),
    ("http://host:9000/v1/", 8000, "http://host:9000"),
    ("https://api.example.com", None, "https://api.example.com"),
    ("http://[::1]", 8001, "http://[::1]:8001"),
])
def test_normalize_url(url, port, expected):
    assert normalize_url(url, port) == expected
