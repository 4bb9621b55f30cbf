"""Readiness against fake servers (stdlib HTTP, named as fakes) and fake processes."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.helpers import free_port

from workflows.readiness import AuthRejected, ReadinessTimeout, wait_until_ready
from workflows.servers.base import ServerDied, ServerHandle

MODEL = "fake-model"


class FakeOpenAIServer:
    """A tiny OpenAI-ish server: health after ``health_after`` s, optional bearer check, records requests."""

    def __init__(self, health_after=0.0, bearer=None, models=(MODEL,), completion_status=200, port=0,
                 completion_silence_s=0.0):
        self.start = time.monotonic()
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, body, ctype="application/json"):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self):
                return bearer is None or self.headers.get("Authorization") == f"Bearer {bearer}"

            def do_GET(self):
                if self.path == "/health":
                    ok = time.monotonic() - outer.start >= health_after
                    return self._send(200 if ok else 503, {})
                if not self._authorized():
                    return self._send(401, {"error": "Unauthorized"})
                if self.path == "/v1/models":
                    return self._send(200, {"data": [{"id": m} for m in models]})
                self._send(404, {})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                if not self._authorized():
                    return self._send(401, {"error": "Unauthorized"})
                if body.get("stream"):
                    chunks = [{"choices": [{"text": "x"}]} for _ in range(body["max_tokens"])]
                    chunks.append({"choices": [],
                                   "usage": {"prompt_tokens": 5, "completion_tokens": body["max_tokens"]}})
                    data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
                    return self._send(200, data, "text/event-stream")
                if completion_silence_s:  # headers never come: the server accepted and says nothing
                    time.sleep(completion_silence_s)
                    return
                self._send(completion_status,
                           {"choices": [{"text": "x"}]} if completion_status == 200 else {"error": "boom"})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeHandle(ServerHandle):
    kind = "fake"

    def __init__(self, url, proc=None, log_path=None):
        super().__init__(url, MODEL, log_path)
        self.proc = proc

    def is_alive(self):
        return self.proc is None or self.proc.poll() is None

    def exit_code(self):
        return None if self.proc is None else self.proc.poll()

    def stop(self, timeout=15):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def describe_how_to_reach(self, bearer=None):
        return self.base_url


@pytest.fixture
def fake_server():
    servers = []

    def make(**kw):
        servers.append(FakeOpenAIServer(**kw))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def test_ready_after_health_models_and_one_token(fake_server):
    srv = fake_server(health_after=0.5, bearer="tok-123456")
    info = wait_until_ready(FakeHandle(srv.url), bearer="tok-123456", timeout_s=20, poll_interval_s=0.1)
    assert info.models == [MODEL] and list(info.stages_s) == ["health", "models", "completion"]
    assert info.stages_s["health"] >= 0.4  # the fake turns healthy 0.5 s after it was created
    assert srv.requests[-1] == {"model": MODEL, "prompt": "Hello", "max_tokens": 1, "temperature": 0.0}


def test_failing_first_completion_is_not_ready(fake_server):
    srv = fake_server(completion_status=500)
    with pytest.raises(ReadinessTimeout, match="1-token completion HTTP 500"):
        wait_until_ready(FakeHandle(srv.url), bearer=None, timeout_s=1.5, poll_interval_s=0.1)


def test_wrong_bearer_is_one_clear_error(fake_server):
    srv = fake_server(bearer="right-token")
    with pytest.raises(AuthRejected, match="401.*does not match"):
        wait_until_ready(FakeHandle(srv.url), bearer="wrong-token", timeout_s=10, poll_interval_s=0.1)


def test_timeout_when_nothing_listens():
    port = free_port()  # free a moment ago: nothing listens there
    t0 = time.monotonic()
    with pytest.raises(ReadinessTimeout, match="not ready after 1.5 s"):
        wait_until_ready(FakeHandle(f"http://127.0.0.1:{port}"), bearer=None, timeout_s=1.5, poll_interval_s=0.1)
    # Refused connections cost nothing: the wait ends at its 1.5 s deadline. 15 s is ten deadlines,
    # so only a wait that ignores its deadline crosses it.
    assert time.monotonic() - t0 < 15


def test_connection_reset_means_not_yet(fake_server):
    """Like docker-proxy before the app listens: accept, then RST; later the real server answers."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    port = lsock.getsockname()[1]
    stop = threading.Event()

    def resetter():
        lsock.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = lsock.accept()
            except OSError:
                continue
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()  # RST

    threading.Thread(target=resetter, daemon=True).start()
    handle = FakeHandle(f"http://127.0.0.1:{port}")

    def switch():  # after 1 s "the app is up": the real (fake) server takes over the same port
        time.sleep(1.0)
        stop.set()
        time.sleep(0.2)
        lsock.close()
        fake_server(port=port)

    threading.Thread(target=switch, daemon=True).start()
    info = wait_until_ready(handle, bearer=None, timeout_s=15, poll_interval_s=0.1)
    assert info.stages_s["health"] >= 0.9


def test_process_exit_stops_waiting_with_log_tail_and_code(tmp_path):
    log = tmp_path / "server.log"
    script = "import sys\nfor i in range(60): print(f'line {i}')\nprint('FATAL: fake engine crashed')\nsys.exit(7)"
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=fh, stderr=subprocess.STDOUT)
    handle = FakeHandle("http://127.0.0.1:9", proc=proc, log_path=log)
    t0 = time.monotonic()
    with pytest.raises(ServerDied) as exc:
        wait_until_ready(handle, bearer=None, timeout_s=60, poll_interval_s=0.1)
    # The exit is seen at the next poll (the fake exits at once); a wait that noticed it only at its
    # 60 s deadline would cross half of it.
    assert time.monotonic() - t0 < 30
    assert exc.value.exit_code == 7
    assert "FATAL: fake engine crashed" in str(exc.value) and "exited with code 7" in str(exc.value)
    tail = exc.value.log_tail.splitlines()
    assert len(tail) == 40 and tail[0] == "line 21"


def test_timeout_line_names_url_stage_and_silence(fake_server):
    """A server that accepts the 1-token request and never answers: one line says where it is stuck."""
    srv = fake_server(completion_silence_s=30)
    t0 = time.monotonic()
    with pytest.raises(ReadinessTimeout) as exc:
        wait_until_ready(FakeHandle(srv.url), bearer=None, timeout_s=2, poll_interval_s=0.1)
    # The silent request's own timeout is cut to what is left of the 2 s deadline; one that waited
    # out the server's 30 s silence (or the 30 s per-request cap) would cross 15 s.
    assert time.monotonic() - t0 < 15
    message = str(exc.value)
    assert "\n" not in message
    assert message.startswith(f"wait_ready: {srv.url} not ready after 2 s (stage completion: ")
    assert "1-token completion: no answer within" in message and "last HTTP answer" in message
