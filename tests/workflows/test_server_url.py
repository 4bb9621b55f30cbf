"""--server-url rules (workflows.server_url): base paths kept, /v1 dropped once, bad schemes and credentials refused."""

from __future__ import annotations

import pytest

from tests.helpers import PLANTED_PASSWORD, closed_port
from workflows.server_url import ServerUrlError, mask_credentials, parse_server_url


@pytest.mark.parametrize("text, port, base", [
    ("127.0.0.1", 8000, "http://127.0.0.1:8000"),
    ("localhost:9000", 8000, "http://localhost:9000"),
    ("http://gw.example/llm", 8000, "http://gw.example:8000/llm"),
    ("http://gw.example:81/llm/v1/", 8000, "http://gw.example:81/llm"),
    ("https://api.example.com/v1", 8000, "https://api.example.com"),
    ("HTTP://[::1]:8001/a/b", 8000, "http://[::1]:8001/a/b"),
    ("http://h//llm//v1", 8000, "http://h:8000/llm"),
])
def test_base_url_keeps_the_base_path(text, port, base):
    assert parse_server_url(text, port).base == base


@pytest.mark.parametrize("text, words", [
    ("file:///etc/passwd", "scheme 'file' is not supported"),
    ("ftp://h/x", "scheme 'ftp' is not supported"),
    ("mailto:a@b", "scheme 'mailto' is not supported"),
    ("", "is empty"),
    ("http://", "names no host"),
    ("http://h:99999", "port must be an integer in 1..65535"),
    ("http://h:0", "port must be an integer in 1..65535"),
    ("http://h/?q=1", "no query string or fragment"),
    ("http://h/a/../b", "'..' segments"),
    ("http://h /x", "whitespace or control characters"),
    ("http://a;b/", "not a host name"),
    (f"http://me:{PLANTED_PASSWORD}@h:1/v1", "carries credentials"),
])
def test_malformed_urls_are_refused_in_one_line(text, words):
    with pytest.raises(ServerUrlError) as info:
        parse_server_url(text, 8000)
    message = str(info.value)
    assert words in message and "\n" not in message and PLANTED_PASSWORD not in message


def test_credentials_are_masked_wherever_they_appear():
    assert mask_credentials(f"see https://u:{PLANTED_PASSWORD}@h/x now") == "see https://***@h/x now"


def test_unreachable_host_is_named_with_its_base_path():
    from workflows.servers import ServerStartError, attach_external

    port = closed_port()
    with pytest.raises(ServerStartError) as info:
        attach_external(f"http://127.0.0.1:{port}/llm/v1", "m", None, port=8000, timeout=5)
    assert f"cannot reach the server at http://127.0.0.1:{port}/llm: connection refused" in str(info.value)
