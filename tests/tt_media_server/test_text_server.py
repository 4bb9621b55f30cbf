"""The text APIs on a real media server (uvicorn + worker process) with the slot loop's mock backend.

The mock backend is a named fake (no model): each prompt's token stream is a pure function of the
prompt (``expected_tokens``), so these tests can check routing (no cross-talk), joining between
decode steps, slot release on disconnect and exact stop cuts through the whole HTTP path. The
real model is exercised in test_text_model.py.
"""
from __future__ import annotations

import concurrent.futures
import json
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.tt_media_server.conftest import start_media_server

MEDIA_ROOT = Path(__file__).resolve().parents[2] / "tt-media-server"
if str(MEDIA_ROOT) not in sys.path:
    sys.path.insert(0, str(MEDIA_ROOT))

from media_server.runners.text_backend_mock import MockTokenizer, expected_tokens  # noqa: E402

pytestmark = pytest.mark.integration
STEP_MS = 20
SLOTS = 8
TOK = MockTokenizer()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    handle = start_media_server({"MODEL_RUNNER": "text-slots", "TEXT_BACKEND": "mock",
                                 "MAX_USER_SLOTS": str(SLOTS), "TEXT_MOCK_STEP_MS": str(STEP_MS),
                                 "MAX_QUEUE_SIZE": "64"},
                                tmp_path_factory.mktemp("text") / "server.log")
    yield handle
    handle.stop()


def _mock_text(prompt: str, count: int) -> str:
    return TOK.decode(expected_tokens(TOK.encode(prompt), count))


class Stream:
    """One streaming /v1/completions request read on its own thread, with arrival times."""

    def __init__(self, server, prompt: str, max_tokens: int, **extra):
        self.server, self.prompt, self.max_tokens, self.extra = server, prompt, max_tokens, extra
        self.text, self.chunk_times, self.finish, self.usage = "", [], None, None
        self.error: BaseException | None = None
        self.stop_reading = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Stream":
        self.started = time.monotonic()
        self.thread.start()
        return self

    def _run(self) -> None:
        body = {"prompt": self.prompt, "max_tokens": self.max_tokens, "stream": True,
                "temperature": 0.0, "stream_options": {"include_usage": True}, **self.extra}
        try:
            with httpx.Client(base_url=self.server.base_url, headers=self.server.headers,
                              timeout=60) as client:
                with client.stream("POST", "/v1/completions", json=body) as response:
                    assert response.status_code == 200, response.read()
                    for line in response.iter_lines():
                        if self.stop_reading.is_set():
                            return  # leaving the with-block closes the connection mid-stream
                        if not line.startswith("data: ") or line == "data: [DONE]":
                            continue
                        event = json.loads(line[6:])
                        if event.get("usage"):
                            self.usage = event["usage"]
                        for choice in event.get("choices", []):
                            if choice.get("text"):
                                self.text += choice["text"]
                                self.chunk_times.append(time.monotonic())
                            if choice.get("finish_reason"):
                                self.finish = choice["finish_reason"]
                                self.finished_at = time.monotonic()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def wait_first_chunk(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.chunk_times and time.monotonic() < deadline and self.error is None:
            time.sleep(0.005)
        assert self.chunk_times, f"no chunk within {timeout} s for {self.prompt!r} ({self.error})"

    def join(self, timeout: float = 60) -> "Stream":
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"stream {self.prompt!r} did not end within {timeout} s"
        assert self.error is None, self.error
        return self


def test_newcomer_streams_while_seven_others_decode(server):
    # 400 decode steps (8 s) for the others against the newcomer's 5: the newcomer can only finish
    # after them if it had to wait for their slots, not because its HTTP request was slow.
    long = [Stream(server, f"long user {i}", 400).start() for i in range(SLOTS - 1)]
    for stream in long:
        stream.wait_first_chunk(30)
    newcomer = Stream(server, "newcomer", 5).start().join(30)
    assert newcomer.text == _mock_text("newcomer", 5)
    running = [s for s in long if s.finish is None]
    assert len(running) == SLOTS - 1, "the newcomer had to wait for the others to finish"
    for stream in long:
        stream.join(60)
        assert stream.finish == "length"
        assert newcomer.finished_at < stream.finished_at


def test_sixteen_concurrent_streams_each_get_exactly_their_own_tokens(server):
    specs = [(f"user {i} says {'x' * i}", 10 + 3 * i, {"temperature": 0.8, "seed": i} if i % 2 else {})
             for i in range(16)]
    streams = [Stream(server, prompt, n, **extra) for prompt, n, extra in specs]
    for stream in streams:
        stream.start()
    for (prompt, n, _), stream in zip(specs, streams):
        stream.join(60)
        assert stream.text == _mock_text(prompt, n), f"cross-talk or loss for {prompt!r}"
        assert stream.usage == {"prompt_tokens": len(TOK.encode(prompt)), "completion_tokens": n,
                                "total_tokens": len(TOK.encode(prompt)) + n}


def test_disconnect_frees_the_slot_for_a_queued_request(server):
    # Holders would decode for 3000 steps (60 s): a slot not freed on disconnect keeps the queued
    # request waiting about a minute, a freed one lets it start within a few steps. The holders
    # all disconnect at the end, so the long streams cost no test time.
    holders = [Stream(server, f"holder {i}", 3000).start() for i in range(SLOTS)]
    for stream in holders:
        stream.wait_first_chunk(30)
    queued = Stream(server, "queued", 3).start()
    time.sleep(10 * STEP_MS / 1000)
    assert not queued.chunk_times, "a ninth request started while all slots were busy"
    holders[0].stop_reading.set()
    left = time.monotonic()
    queued.join(30)
    assert queued.text == _mock_text("queued", 3)
    # Freed within a few decode steps (plus HTTP and scheduling), far before the holders' end (~60 s).
    assert queued.chunk_times[0] - left < 15.0, queued.chunk_times[0] - left
    for stream in holders[1:]:
        stream.stop_reading.set()
    for stream in holders:
        stream.thread.join(30)
    server.wait_until(lambda live: all(w["inflight"] == 0 for m in live["models"] for w in m["workers"]),
                      10, "every slot to be free after the clients left")


def test_stop_sequences_cut_exactly_through_the_api(server):
    with server.client() as client:
        full = client.post("/v1/completions", json={"prompt": "stop test", "max_tokens": 12,
                                                    "temperature": 0}).json()["choices"][0]["text"]
        words = full.split(" ")
        stop = words[3][1:] + " " + words[4][:2]         # spans a token boundary
        cut = client.post("/v1/completions", json={"prompt": "stop test", "max_tokens": 12,
                                                   "temperature": 0, "stop": ["zzz", stop]}).json()
        assert cut["choices"][0]["text"] == full[:full.index(stop)]
        assert cut["choices"][0]["finish_reason"] == "stop"
        legacy = client.post("/inference", json={"text": "stop test", "max_tokens": 12, "temperature": 0,
                                                 "stop_sequence": stop})
        assert legacy.status_code == 200
        assert legacy.text == full[:full.index(stop)]


def test_chat_stream_usage_and_non_streaming_shapes(server):
    messages = [{"role": "user", "content": "hello"}]
    with server.client() as client:
        lines = []
        with client.stream("POST", "/v1/chat/completions", json={
                "messages": messages, "max_tokens": 4, "stream": True,
                "stream_options": {"include_usage": True}}) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            lines = [line for line in response.iter_lines() if line.startswith("data: ")]
        assert lines[-1] == "data: [DONE]"
        events = [json.loads(line[6:]) for line in lines[:-1]]
        assert events[0]["choices"][0]["delta"]["role"] == "assistant"
        assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 4
        assert events[-2]["choices"][0]["finish_reason"] == "length"
        whole = client.post("/v1/chat/completions", json={"messages": messages, "max_tokens": 4}).json()
        streamed = "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-1])
        assert whole["choices"][0]["message"]["content"] == streamed
        assert whole["usage"]["completion_tokens"] == 4
        eos = client.post("/v1/completions", json={"prompt": "<mock-eos-after=3>", "max_tokens": 10}).json()
        assert eos["choices"][0]["finish_reason"] == "stop" and eos["usage"]["completion_tokens"] == 4
        ignored = client.post("/v1/completions", json={"prompt": "<mock-eos-after=3>", "max_tokens": 10,
                                                       "ignore_eos": True}).json()
        assert ignored["choices"][0]["finish_reason"] == "length"
        assert ignored["usage"]["completion_tokens"] == 10


@pytest.mark.parametrize("path, body, message", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]},
     "tools"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "response_format": {"type": "json_object"}}, "response_format"),
    ("/v1/completions", {"prompt": "x", "n": 2}, "n: only n=1"),
    ("/v1/completions", {"prompt": "x", "top_p": 0}, "top_p"),
    ("/v1/completions", {"prompt": "x" * 9000, "max_tokens": 10}, "context"),
    ("/v1/chat/completions", {"messages": []}, "messages"),
])
def test_openai_routes_refuse_what_they_cannot_serve(server, path, body, message):
    with server.client() as client:
        for stream in (False, True):
            response = client.post(path, json={**body, "stream": stream})
            assert response.status_code == 400, response.text
            assert message in response.json()["error"]["message"]


@pytest.mark.parametrize("raw, field", [
    (b'{"text": "hi",', "malformed JSON"),
    (b'{"text": "hi", "max_tokens": 0}', "max_tokens"),
    (b'{"text": "hi", "max_tokens": 2049}', "max_tokens"),
    (b'{"text": "hi", "top_k": 0}', "top_k"),
    (b'{"text": "hi", "top_k": 1001}', "top_k"),
    (b'{"text": "hi", "top_p": 0.001}', "top_p"),
    (b'{"text": "hi", "temperature": 11}', "temperature"),
    (b'{"text": "hi", "temperature": "hot"}', "temperature"),
    (b'{"text": ""}', "text"),
    (b'{"text": "hi", "bogus": 1}', "bogus"),
])
def test_legacy_api_answers_400_with_its_own_shape(server, raw, field):
    response = httpx.post(server.base_url + "/inference", content=raw, headers=server.headers, timeout=30)
    assert response.status_code == 400
    body = response.json()
    assert set(body) == {"status_code", "message"} and body["status_code"] == 400
    assert field in body["message"]


def test_legacy_api_streams_raw_text_chunked(server):
    with httpx.Client(base_url=server.base_url, headers=server.headers, timeout=30) as client:
        with client.stream("POST", "/inference", json={"text": "legacy", "max_tokens": 6,
                                                       "temperature": 0}) as response:
            assert response.status_code == 200
            assert response.headers.get("transfer-encoding") == "chunked"
            chunks = list(response.iter_raw())
    assert len(chunks) >= 2, "the text came in one piece, not streamed"
    assert b"".join(chunks).decode() == _mock_text("legacy", 6)


def test_concurrent_requests_beyond_queue_and_slots_all_complete(server):
    with concurrent.futures.ThreadPoolExecutor(24) as pool:
        def one(i: int) -> str:
            return httpx.post(server.base_url + "/inference", headers=server.headers, timeout=60,
                              json={"text": f"burst {i}", "max_tokens": 3, "temperature": 0}).text
        results = list(pool.map(one, range(24)))
    assert results == [_mock_text(f"burst {i}", 3) for i in range(24)]
