"""Media clients send one X-Request-ID per request and keep it in the point's per-request rows.

A stdlib HTTP server on loopback stands in for the media server (a fake, named as one): it answers
embeddings-shaped bodies and records the X-Request-ID of every request it saw.
"""
from __future__ import annotations

import http.server
import json
import threading
import types

from media_clients.load import run_point
from media_clients.transport import MediaHttp
from media_clients.workloads import EmbeddingWorkload


class FakeEmbeddingServer(http.server.ThreadingHTTPServer):
    def __init__(self):
        self.seen: list[str] = []
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.seen.append(self.headers.get("X-Request-ID"))
        status = 400 if "fail" in json.dumps(body) else 200
        payload = json.dumps({"data": [{"embedding": [0.1]} for _ in body["input"]]}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def test_each_request_has_its_own_id_and_the_point_keeps_them(tmp_path):
    server = FakeEmbeddingServer()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        http_client = MediaHttp(f"http://127.0.0.1:{server.server_address[1]}", None, timeout_s=10)
        run = types.SimpleNamespace(stop=threading.Event(), http=http_client, served_model_name="m", model_id="m",
                                    run_dir=tmp_path)
        point = run_point(run, EmbeddingWorkload({"batch_items": 2}), 3, 9, "sweep")
        failed = http_client.post_json("/v1/embeddings", {"input": ["fail"]})
    finally:
        server.shutdown()
    ids = [row["request_id"] for row in point.requests]
    assert len(ids) == 9 and len(set(ids)) == 9 and sorted(ids) == sorted(server.seen[:9])
    assert all(row["status"] == 200 and row["error_class"] is None and row["ms"] >= 0 for row in point.requests)
    assert failed.status == 400 and failed.request_id == server.seen[-1] and failed.request_id not in ids
