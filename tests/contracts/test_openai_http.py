"""The shared bearer header and 1-token probe (stdlib HTTP fakes, named as fakes)."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from contracts.openai_http import bearer_headers, one_token, one_token_request
from tests.helpers import free_port


def test_bearer_headers() -> None:
    assert bearer_headers("tok") == {"Authorization": "Bearer tok"}
    assert bearer_headers(None) == {} and bearer_headers("") == {}


def test_one_token_request_shapes() -> None:
    assert one_token_request("m") == ("/v1/completions", {"model": "m", "max_tokens": 1, "temperature": 0.0,
                                                          "prompt": "Hello"})
    path, body = one_token_request("m", chat=True)
    assert path == "/v1/chat/completions" and body["messages"] == [{"role": "user", "content": "Hello"}]


def test_one_token_answers_refusal_and_silence() -> None:
    seen: list[dict] = []

    class FakeHandler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            seen.append({"auth": self.headers.get("Authorization"),
                         "body": json.loads(self.rfile.read(int(self.headers["Content-Length"])))})
            data = json.dumps({"choices": [{"text": "x"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts (in the backlog) and never answers
    try:
        ok = one_token(f"http://127.0.0.1:{httpd.server_address[1]}/", "m", "tok", 5)
        assert ok.ok and ok.status == 200 and seen[0]["auth"] == "Bearer tok" and seen[0]["body"]["max_tokens"] == 1
        refused = one_token(f"http://127.0.0.1:{free_port()}", "m", None, 5)
        assert refused.status is None and not refused.silent and refused.text.startswith("cannot connect")
        quiet = one_token(f"http://127.0.0.1:{silent.getsockname()[1]}", "m", None, 0.5)
        assert quiet.status is None and quiet.silent and quiet.text == "no answer within 0.5 s"
    finally:
        httpd.shutdown()
        httpd.server_close()
        silent.close()
