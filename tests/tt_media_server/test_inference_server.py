"""``POST /inference`` on a real media server (mock text backend) with the documented request as written."""

from __future__ import annotations

import httpx
import pytest

from tests.tt_media_server.conftest import start_media_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    handle = start_media_server({"MODEL_RUNNER": "text-slots", "TEXT_BACKEND": "mock"},
                                tmp_path_factory.mktemp("inference") / "server.log")
    yield handle
    handle.stop()


def test_the_documented_request_with_numbers_as_strings_streams_text(server):
    body = {"text": "What is the capital of France?", "temperature": "1", "max_tokens": "32", "top_k": "40",
            "top_p": "0.9"}
    response = httpx.post(server.base_url + "/inference", json=body, headers=server.headers, timeout=60)
    assert response.status_code == 200, response.text
    assert response.headers.get("transfer-encoding") == "chunked" and response.text


@pytest.mark.parametrize("fields, message", [
    ({"temperature": "10"}, None),
    ({"temperature": "warm"}, "temperature: expected a number, got 'warm'"),
    ({"max_tokens": "many"}, "max_tokens: expected an integer, got 'many'"),
])
def test_temperature_up_to_10_and_non_numbers_name_the_field(server, fields, message):
    response = httpx.post(server.base_url + "/inference", json={"text": "hi", "max_tokens": "4", **fields},
                          headers=server.headers, timeout=60)
    if message is None:
        assert response.status_code == 200, response.text
    else:
        assert response.status_code == 400 and response.json() == {"status_code": 400, "message": message}
