"""media_clients.invariance against a FAKE media server (named so: it stands for a server whose
batching is broken, which cannot be made from a real model on purpose). Each case must pass on a
server whose answers ignore what else is in flight, and fail, naming the input, on one whose
answers change with it; the real models' runs are in test_media_clients_live.py."""
from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from media_clients import data, invariance
from media_clients.transport import MediaHttp

HOLD_S = 0.15  # long enough that 8 requests sent at once overlap on the fake server


class FakeMediaServer(ThreadingHTTPServer):
    """FAKE: embeddings, transcripts and top-5 classes made from the request bytes; with
    ``batch_variant`` every answer shifts when more than one request (or input) is in flight."""

    daemon_threads = True

    def __init__(self, batch_variant: bool) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.batch_variant = batch_variant
        self.in_flight = 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


def _vector(text: str, shifted: bool) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    vec = [b / 255.0 - 0.5 for b in digest]
    if shifted:
        vec[0] += 0.05   # a small change in direction: cosine ~0.999, below MIN_COSINE
    return vec


class _Handler(BaseHTTPRequestHandler):
    server: FakeMediaServer

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.server.lock:
            self.server.in_flight += 1
        time.sleep(HOLD_S)
        with self.server.lock:
            crowded = self.server.in_flight > 1
            self.server.in_flight -= 1
        variant = self.server.batch_variant
        if self.path.endswith("/embeddings"):
            inputs = json.loads(body)["input"]
            shifted = variant and (crowded or len(inputs) > 1)
            answer = {"data": [{"index": i, "embedding": _vector(t, shifted)} for i, t in enumerate(inputs)]}
        elif self.path.endswith("/transcriptions"):
            answer = {"text": "the quick brown fox" + (" jumps" if variant and crowded else "")}
        else:
            labels = ["tabby", "tiger cat", "egyptian cat", "lynx", "cougar"]
            if variant and crowded:
                labels[1], labels[2] = labels[2], labels[1]
            answer = {"image_data": [{"label": label, "score": 0.1} for label in labels]}
        payload = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def fake_inputs(monkeypatch):
    """Speech clips and photos stand-ins: the fake server never decodes them."""
    monkeypatch.setattr(data, "speech_clips", lambda: [data.Clip("c0", "the quick brown fox", b"RIFF", 1.0)])
    monkeypatch.setattr(data, "photos", lambda: [data.Photo(f"p{i}", bytes([i]) * 8, ("tabby",)) for i in range(4)])


def _serve(batch_variant: bool):
    server = FakeMediaServer(batch_variant)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("kind", ["embedding", "speech", "cnn"])
def test_each_case_passes_when_answers_ignore_the_batch_and_fails_when_they_do_not(kind, fake_inputs):
    (name, _, case), = invariance.INVARIANCE_CASES[kind]
    steady, variant = _serve(False), _serve(True)
    compared = {"embedding": 16, "speech": 4, "cnn": 4}[kind]  # 8 sentences twice, 4 transcripts, 4 photos
    try:
        assert case(MediaHttp(steady.url, None), "fake") == invariance.Divergence(0, compared)
        with pytest.raises(invariance.Diverged, match="alone") as failure:
            case(MediaHttp(variant.url, None), "fake")
        tolerated = case(MediaHttp(variant.url, None), "fake", 1.0)  # every answer may change: counted, not raised
    finally:
        steady.shutdown()
        variant.shutdown()
    assert name == f"{kind}/batch_invariance" and "vs" in str(failure.value)
    found = failure.value.divergence
    assert found.compared == compared and found.divergent >= 1
    assert f"of {compared} answers changed" in str(failure.value)
    assert tolerated.compared == compared and tolerated.divergent >= 1


def test_the_embedding_threshold_separates_a_changed_direction_from_float_noise():
    a = _vector("x", False)
    noise = [v * (1 + 1e-7) for v in a]
    assert invariance._cosine(a, noise) >= invariance.MIN_COSINE
    assert invariance._cosine(a, _vector("x", True)) < invariance.MIN_COSINE
    assert math.isclose(invariance._cosine(a, a), 1.0)
