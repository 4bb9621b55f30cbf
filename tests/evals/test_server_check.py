"""The evals server check: transient errors are retried with backoff under one deadline, others are not.

A tiny stdlib HTTP server plays the OpenAI endpoint (named as a fake); the retry schedule is driven
with a fake clock so the test takes no real backoff time.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evals import server_check
from evals.server_check import check_server
from tests.helpers import free_port


class FakeOpenAI(BaseHTTPRequestHandler):
    """FAKE completions endpoint: answers the statuses queued in ``server.statuses``, then 200."""

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.seen.append(self.path)
        status = self.server.statuses.pop(0) if self.server.statuses else 200
        body = json.dumps({"choices": [{"text": "x"}]} if status == 200 else {"error": "boom"}).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    httpd.statuses, httpd.seen = [], []
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _url(httpd) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}"


def test_one_500_is_retried_and_passes(fake_server):
    fake_server.statuses = [500]
    sleeps, lines = [], []
    assert check_server(_url(fake_server), "m", None, False, sleep=sleeps.append, log=lines.append) is None
    assert fake_server.seen == ["/v1/completions", "/v1/completions"] and sleeps == [1.0]
    assert "HTTP 500" in lines[0] and "retrying" in lines[0]


def test_backoff_doubles_and_gives_up_naming_the_status(fake_server):
    fake_server.statuses = [503] * 10
    sleeps = []
    msg = check_server(_url(fake_server) + "/v1", "m", None, True, sleep=sleeps.append)
    assert sleeps == [1.0, 2.0, 4.0] and len(fake_server.seen) == 4
    assert fake_server.seen[0] == "/v1/chat/completions"
    assert msg.startswith(f"server answered HTTP 503 to a 1-token request at {_url(fake_server)}/v1/chat/completions")
    assert msg.endswith("(gave up after 4 attempts)")


def test_client_errors_are_not_retried(fake_server):
    fake_server.statuses = [401]
    sleeps = []
    msg = check_server(_url(fake_server), "m", "bearer", False, sleep=sleeps.append)
    assert "HTTP 401" in msg and sleeps == [] and len(fake_server.seen) == 1


def test_refused_connection_says_cannot_connect_and_is_stable():
    url = f"http://127.0.0.1:{free_port()}"
    first = check_server(url, "m", None, False, sleep=lambda s: None)
    again = check_server(url, "m", None, False, sleep=lambda s: None)
    assert first.startswith(f"cannot connect to {url}") and first == again


def test_overall_deadline_bounds_the_retries(monkeypatch):
    now = [0.0]
    calls = []

    def probe(root, model, bearer, use_chat, timeout_s):
        calls.append(timeout_s)
        now[0] += timeout_s  # every attempt waits out its whole timeout
        return server_check.ProbeResult(False, f"no answer from {root} within {timeout_s:.0f} s", True)

    monkeypatch.setattr(server_check, "probe_once", probe)
    msg = check_server("http://x:1", "m", None, False, deadline_s=100, request_timeout_s=60,
                       clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert calls == [60, 39]  # the second attempt only gets what is left of the 100 s
    assert now[0] <= 100 and "gave up after 2 attempts" in msg
