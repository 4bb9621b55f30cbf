"""The vision kind's cases, eval checks and workload (media_clients/vision.py, VisionWorkload), judged
against a FAKE vision chat server: a stdlib HTTP server on loopback that counts image tokens the way
Qwen-VL does (16 px patches merged 2x2, plus a start/end pair per image) and can misbehave on purpose,
so each check is shown to pass on a server that does it right and to fail, naming what is wrong, on
one that does not. The real server runs the same cases in tests/test_run_e2e_vision.py.
"""
from __future__ import annotations

import base64
import binascii
import http.server
import json
import re
import struct
import threading
import types

import pytest

from media_clients import vision
from media_clients.load import run_point
from media_clients.probe import tiny_png
from media_clients.transport import MediaHttp
from media_clients.workloads import VisionWorkload

MODEL = "fake-vl"


class FakeVisionServer(http.server.ThreadingHTTPServer):
    """FAKE: /v1/chat/completions with image_url parts. ``faults``: the misbehaviours switched on."""

    def __init__(self, faults: set[str]):
        self.faults = faults
        self.calls = 0
        super().__init__(("127.0.0.1", 0), _Handler)


def _side(url: str) -> int | str:
    """The PNG's width, or why the part is refused (the real server's 400 wording)."""
    if not url.startswith("data:"):
        return "fetching is off (ALLOW_REMOTE_IMAGES=0)"
    header, _, data = url.partition(",")
    if not header.startswith("data:image/"):
        return "content type is not image/*"
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return "bad base64"
    if not raw.startswith(b"\x89PNG"):
        return "not a decodable image"
    return struct.unpack(">I", raw[16:20])[0]


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _answer(self, status: int, payload: dict | bytes, content_type: str = "application/json") -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        faults, server = self.server.faults, self.server
        server.calls += 1
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body["model"] != MODEL:
            return self._answer(404, {"error": {"message": f"model {body['model']} is not served"}})
        parts = body["messages"][0]["content"]
        image_tokens = images = 0
        for index, part in enumerate(parts):
            if part["type"] != "image_url":
                continue
            side = _side(part["image_url"]["url"])
            if isinstance(side, str):
                where = "the image" if "unnamed_400" in faults else f"messages[0].content[{index}].image_url"
                if "accepts_anything" not in faults:
                    return self._answer(400, {"error": {"message": f"{where}: {side}"}})
                side = 64
            images += 1
            image_tokens += 0 if "no_image_tokens" in faults else (max(side // 32, 1) ** 2 if
                                                                    "same_tokens_any_size" not in faults else 4)
        prompt = 10 + image_tokens + 2 * images
        details = {"image_tokens": image_tokens, "images": images if "miscounts_images" not in faults else 1}
        usage = {"prompt_tokens": prompt, "completion_tokens": 2, "total_tokens": prompt + 2,
                 "prompt_tokens_details": details}
        text = f"answer {server.calls}" if "random_answers" in faults else "same answer"
        if body.get("stream"):
            chunks = [{"choices": [{"delta": {"content": text}}]}]
            if "stream_without_usage" not in faults:
                chunks.append({"choices": [], "usage": usage})
            lines = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            return self._answer(200, lines.encode(), "text/event-stream")
        self._answer(200, {"choices": [{"message": {"role": "assistant", "content": text}}], "usage": usage})


@pytest.fixture
def fake_server():
    servers = []

    def start(*faults: str) -> MediaHttp:
        server = FakeVisionServer(set(faults))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return MediaHttp(f"http://127.0.0.1:{server.server_address[1]}", None, timeout_s=10)

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_every_case_and_eval_check_passes_on_a_server_that_does_it_right(fake_server):
    http = fake_server()
    for name, markers, check in vision.VISION_CASES:
        check(http, MODEL)  # raises VisionCheckFailed naming what is wrong
    assert [item["passed"] for item in vision.eval_checks(http, MODEL)] == [True] * len(vision.EVAL_CHECKS)
    smoke = {name for name, markers, _ in vision.VISION_CASES if "smoke" in markers}
    assert smoke == {"vision/image_tokens_counted", "vision/stream_with_image", "vision/loopback_url_400"}


@pytest.mark.parametrize("fault, check, words", [
    ("no_image_tokens", vision.check_image_tokens_counted, "the image's tokens are not counted"),
    ("miscounts_images", vision.check_two_images_twice_the_tokens, "two same images gave"),
    ("same_tokens_any_size", vision.check_bigger_image_more_tokens, "not more than 64 px's"),
    ("random_answers", vision.check_greedy_repeats, "greedy decoding of one request gave two answers"),
    ("stream_without_usage", vision.check_streaming_with_image, "the usage chunk counts no image tokens"),
    ("accepts_anything", dict((n, c) for n, _, c in vision.VISION_CASES)["vision/loopback_url_400"],
     "expected HTTP 400, got HTTP 200"),
    ("unnamed_400", dict((n, c) for n, _, c in vision.VISION_CASES)["vision/bad_base64_400"],
     "does not name messages[0].content[0].image_url"),
])
def test_each_check_fails_naming_what_the_server_got_wrong(fake_server, fault, check, words):
    with pytest.raises(vision.VisionCheckFailed, match=re.escape(words)):
        check(fake_server(fault), MODEL)


def test_eval_items_say_which_check_failed_and_why(fake_server):
    items = {item["check"]: item for item in vision.eval_checks(fake_server("random_answers"), MODEL)}
    assert items["greedy decoding repeats itself"]["passed"] is False
    assert "two answers" in items["greedy decoding repeats itself"]["error"]
    assert all(item["passed"] and item["error"] is None for name, item in items.items()
               if name != "greedy decoding repeats itself")


def test_bodies_and_usage_fields():
    body = vision.chat_body(MODEL, [vision.data_url(tiny_png(8))] * 2, max_tokens=3)
    parts = body["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["image_url", "image_url", "text"] and body["temperature"] == 0
    assert parts[0]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
    assert vision.image_tokens({"prompt_tokens": 3}) == 0
    assert vision.image_tokens({"prompt_tokens_details": {"image_tokens": 7}}) == 7


def test_the_workload_measures_images_and_image_tokens_per_request(fake_server, tmp_path):
    http = fake_server()
    run = types.SimpleNamespace(stop=threading.Event(), http=http, served_model_name=MODEL, model_id="m",
                                run_dir=tmp_path)
    point = run_point(run, VisionWorkload({"images_per_request": 2, "image_side": 64}), 2, 6, "sweep")
    assert point.completed == 6 and point.failed == 0
    # 64 px -> (64 // 32)^2 = 4 image tokens per image in the fake; prompt = 10 + 2 images x (4 + 2)
    assert point.figures["images_per_request"] == 2 and point.figures["prompt_tokens_per_image"] == 4
    assert point.figures["prompt_tokens_per_request"] == 22 and point.figures["images_per_s"] > 0
    # a server that counts no image tokens answers 200, yet the requests are failures, never numbers
    uncounted = run_point(types.SimpleNamespace(**{**vars(run), "http": fake_server("no_image_tokens")}),
                          VisionWorkload({}), 1, 2, "sweep")
    assert uncounted.completed == 0 and uncounted.failed == 2 and uncounted.figures["images_per_request"] is None
