"""FAKE OpenAI-compatible server that misbehaves on purpose: the fault-injection tool for run.py tests.

Why it exists: a release decision relies on what run.py does when a server is broken, and real
engines cannot be made to fail on cue. This fake answers the same endpoints a vLLM server does
(``/health``, ``/v1/models``, streaming and non-streaming ``/v1/completions`` and
``/v1/chat/completions``, including the echo+logprobs requests lm-eval sends for loglikelihood),
with made-up text and log-probabilities, and injects the named faults below. It is not a model:
its answers are fixed words, unless ``--answer-key DIR`` names JSONL files of questions (fields
``question`` and ``answer``, or ``choices`` + ``label``, as in ``evals/tasks/``): then a prompt that
contains a known question gets its answer, and a loglikelihood request scores the right choice
highest, so an eval run against the fake passes when no fault hits it. Its word-level tokenizer
is served at ``/tokenizer_info``, ``/tokenize`` and ``/detokenize`` (vLLM's names), so lm-eval can
tokenize loglikelihood requests without a local tokenizer. The answers: benchmarking/fake_answers.py.

Faults (``--fault NAME[=VALUE]``, repeatable; or ``TT_FAULT_SERVER_FAULTS="NAME=VALUE,NAME"``):

    http_500=F         fraction F of completion requests answered HTTP 500 (spread evenly: request
                       k fails when floor(k*F) > floor((k-1)*F), so the first ones succeed)
    http_500_sticky=F  fraction F of distinct prompts always answered HTTP 500 (chosen by a hash of
                       the prompt, so a client's retries of the same request fail again)
    http_500_nth=K     the K-th non-streaming completion request is answered HTTP 500 (once; a
                       readiness check sends the first, an evals preflight the second)
    malformed_sse=F    fraction F of streams carry a broken event: invalid JSON, or (every other
                       one) a content event without its ``data:`` field
    reset=F            fraction F of streams are reset (TCP RST) after two content chunks
    silence            every stream sends its headers and then nothing, from the first request
    stall_after=N      the first N streams are served; later ones send one chunk, then silence
    die_after=N        N completion requests are served; during the next one the process exits
                       (a stream after two chunks, a non-streaming request before its answer)
    unavailable_s=S    completion requests get HTTP 503 for S seconds from the first stream
    zero_tokens        streams end normally but carry no content chunk (usage and [DONE] only)
    spare_first=N      the first N completion requests get no fault of the kinds above except
                       die_after and http_500_nth (a readiness check, a warm-up and a preflight pass)

Every completion request is appended to ``--request-log`` (JSON lines: time, ordinal, path,
stream, fault) so a test can see what reached the server and when; ``GET /fault/stats`` returns
the counters. Run: ``python -m benchmarking.fault_server --port 0 --fault reset=0.3`` prints
``FAULT_SERVER_LISTENING <port>``.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import socket
import struct
import sys
import time
from dataclasses import dataclass, field

from benchmarking.fake_answers import (
    EOS,
    AnswerKey,
    WordTokenizer,
    completion_body,
    malformed_event,
    stream_events,
)

FAULTS: dict[str, str] = {
    "http_500": "fraction of completion requests answered HTTP 500",
    "http_500_sticky": "fraction of distinct prompts always answered HTTP 500",
    "http_500_nth": "the K-th non-streaming completion request is answered HTTP 500",
    "malformed_sse": "fraction of streams with an invalid-JSON or data:-less event",
    "reset": "fraction of streams reset (RST) after two chunks",
    "silence": "streams send headers, then nothing, from the first request",
    "stall_after": "after N streams, each stream sends one chunk, then nothing",
    "die_after": "after N completion requests the process exits mid-request",
    "unavailable_s": "HTTP 503 for S seconds from the first stream",
    "zero_tokens": "streams carry no content chunk",
    "spare_first": "the first N completion requests are served normally",
}
_FRACTION = ("http_500", "http_500_sticky", "malformed_sse", "reset")
_COUNT = ("http_500_nth", "stall_after", "die_after", "spare_first")
_FLAG = ("silence", "zero_tokens")
LISTENING = "FAULT_SERVER_LISTENING"
EXIT_DIED = 3  # exit code of the die_after fault


@dataclass
class FaultConfig:
    """What the fake serves and which faults it injects (parsed from --fault / the env)."""

    model: str = "fake-model"
    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    word: str = " tok"
    faults: dict[str, float] = field(default_factory=dict)
    nth_500: set[int] = field(default_factory=set)
    request_log: str | None = None
    silence_s: float = 3600.0  # how long a silent stream is held open
    answer_key: str | None = None  # directory of *.jsonl questions with their answers


def parse_faults(items: list[str]) -> tuple[dict[str, float], set[int]]:
    """``["reset=0.3", "silence"]`` -> ({"reset": 0.3, "silence": 1.0}, set()); ValueError names the valid faults."""
    faults: dict[str, float] = {}
    nth: set[int] = set()
    for item in (i.strip() for i in items):
        if not item:
            continue
        name, _, value = item.partition("=")
        if name not in FAULTS:
            raise ValueError(f"unknown fault {name!r}; known: {', '.join(sorted(FAULTS))}")
        if name in _FLAG:
            faults[name] = 1.0
            continue
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"fault {name} needs a number: {name}=VALUE") from None
        if name in _FRACTION and not 0.0 <= number <= 1.0:
            raise ValueError(f"fault {name}={value}: a fraction in [0, 1]")
        if name in _COUNT and (number < 0 or number != int(number)):
            raise ValueError(f"fault {name}={value}: a whole number >= 0")
        if name == "http_500_nth":
            nth.add(int(number))
        faults[name] = number
    return faults, nth


def _hits(fraction: float, k: int) -> bool:
    """Whether the k-th eligible request (1-based) is one of an evenly spread `fraction`."""
    return fraction > 0 and math.floor(k * fraction + 1e-9) > math.floor((k - 1) * fraction + 1e-9)


class FaultState:
    """Counters shared by every connection, and the decision which fault a request gets."""

    def __init__(self, cfg: FaultConfig):
        self.cfg = cfg
        self.started = time.monotonic()
        self.completions = 0      # every completion request
        self.non_stream = 0
        self.streams = 0
        self.by_fault: dict[str, int] = {}
        self.first_stream_at: float | None = None
        self._eligible: dict[str, int] = {}

    def _count(self, name: str) -> int:
        self._eligible[name] = self._eligible.get(name, 0) + 1
        return self._eligible[name]

    def decide(self, stream: bool, prompt_hash: int = 0) -> str | None:
        """Count one completion request and pick its fault (None = serve it normally)."""
        f = self.cfg.faults
        self.completions += 1
        if stream:
            self.streams += 1
            if self.first_stream_at is None:
                self.first_stream_at = time.monotonic()
        else:
            self.non_stream += 1
        fault = self._pick(f, stream, prompt_hash)
        if fault:
            self.by_fault[fault] = self.by_fault.get(fault, 0) + 1
        return fault

    def _pick(self, f: dict[str, float], stream: bool, prompt_hash: int) -> str | None:
        if "die_after" in f and self.completions > f["die_after"]:
            return "die_after"
        if "unavailable_s" in f and self.first_stream_at is not None \
                and time.monotonic() - self.first_stream_at < f["unavailable_s"]:
            return "unavailable_s"
        if not stream and self.non_stream in self.cfg.nth_500:
            return "http_500_nth"
        if self.completions <= f.get("spare_first", 0):
            return None
        if "http_500" in f and _hits(f["http_500"], self._count("http_500")):
            return "http_500"
        if "http_500_sticky" in f and prompt_hash % 1000 < f["http_500_sticky"] * 1000:
            return "http_500_sticky"
        if not stream:
            return None
        if "silence" in f:
            return "silence"
        if "stall_after" in f and self.streams > f["stall_after"]:
            return "stall_after"
        if "zero_tokens" in f:
            return "zero_tokens"
        for name in ("malformed_sse", "reset"):
            if name in f and _hits(f[name], self._count(name)):
                return name
        return None

    def log(self, path: str, stream: bool, fault: str | None) -> None:
        if not self.cfg.request_log:
            return
        row = {"t": time.time(), "n": self.completions, "path": path, "stream": stream, "fault": fault}
        with open(self.cfg.request_log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")

    def stats(self) -> dict:
        return {"completions": self.completions, "streams": self.streams, "non_stream": self.non_stream,
                "faults": dict(self.by_fault), "uptime_s": time.monotonic() - self.started}


# ------------------------------------------------------------------------------- HTTP


class FaultServer:
    """One asyncio server; each connection serves keep-alive HTTP/1.1 requests in order."""

    def __init__(self, cfg: FaultConfig):
        self.cfg = cfg
        self.state = FaultState(cfg)
        self.malformed_count = 0
        self.tokenizer = WordTokenizer()
        self.answer_key = AnswerKey(cfg.answer_key)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path = (lines[0].split(" ") + ["", ""])[:2]
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                body = await reader.readexactly(int(headers.get("content-length") or 0))
                keep = await self.route(method, path.split("?", 1)[0], body, writer)
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            if not writer.is_closing():
                writer.close()

    async def _send(self, writer, status: int, payload: bytes, ctype: str = "application/json",
                    extra: bytes = b"") -> bool:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error",
                  503: "Service Unavailable"}.get(status, "Error")
        writer.write(b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n%s"
                     % (status, reason.encode(), ctype.encode(), len(payload), extra, payload))
        await writer.drain()
        return True

    async def route(self, method: str, path: str, body: bytes, writer) -> bool:
        st = self.state
        if method == "GET" and path in ("/health", "/ping"):
            return await self._send(writer, 200, b"")
        if method == "GET" and path == "/v1/models":
            return await self._send(writer, 200, json.dumps({"object": "list", "data": [
                {"id": self.cfg.model, "object": "model", "max_model_len": 8192}]}).encode())
        if method == "GET" and path == "/fault/stats":
            return await self._send(writer, 200, json.dumps(st.stats()).encode())
        if method == "GET" and path == "/tokenizer_info":
            return await self._send(writer, 200, json.dumps({"eos_token": EOS, "bos_token": None, "pad_token": EOS,
                                                             "model_max_length": 8192}).encode())
        if method == "POST" and path in ("/tokenize", "/detokenize"):
            try:
                req = json.loads(body or b"{}")
                if path == "/tokenize":
                    ids = self.tokenizer.encode(str(req.get("prompt", "")))
                    answer = {"tokens": ids, "count": len(ids), "max_model_len": 8192}
                else:
                    answer = {"prompt": self.tokenizer.decode([int(t) for t in req.get("tokens") or []])}
            except (ValueError, TypeError):
                return await self._send(writer, 400, b'{"error":{"message":"bad tokenize request"}}')
            return await self._send(writer, 200, json.dumps(answer).encode())
        if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            try:
                req = json.loads(body or b"{}")
            except ValueError:
                return await self._send(writer, 400, b'{"error":{"message":"body is not JSON"}}')
            return await self.completion(req, path, writer)
        return await self._send(writer, 404, b'{"error":{"message":"not found"}}')

    async def completion(self, req: dict, path: str, writer) -> bool:
        st, cfg = self.state, self.cfg
        chat = path.endswith("chat/completions")
        stream = bool(req.get("stream"))
        prompt = json.dumps(req.get("prompt", req.get("messages")), sort_keys=True).encode()
        fault = st.decide(stream, int.from_bytes(hashlib.sha1(prompt).digest()[:4], "big"))
        st.log(path, stream, fault)
        if fault == "die_after" and not stream:
            os._exit(EXIT_DIED)
        if fault in ("http_500", "http_500_sticky", "http_500_nth"):
            return await self._send(writer, 500, b'{"error":{"message":"fault server: injected HTTP 500","code":500}}')
        if fault == "unavailable_s":
            return await self._send(writer, 503, b'{"error":{"message":"fault server: unavailable","code":503}}',
                                    extra=b"Retry-After: 1\r\n")
        if not stream:
            if cfg.ttft_ms:
                await asyncio.sleep(cfg.ttft_ms / 1000)
            answer = completion_body(req, chat, cfg.word, cfg.model, self.tokenizer, self.answer_key)
            return await self._send(writer, 200, json.dumps(answer).encode())
        events, tail = stream_events(req, chat, cfg.word, cfg.model, content=fault != "zero_tokens")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        await writer.drain()
        if fault == "silence":
            await asyncio.sleep(cfg.silence_s)
            return False
        if fault == "malformed_sse" and events:
            events.insert(min(1, len(events)), malformed_event(self.malformed_count % 2, chat))
            self.malformed_count += 1
        await asyncio.sleep(cfg.ttft_ms / 1000)
        for k, event in enumerate(events):
            if k == 2 and fault in ("reset", "die_after"):
                return self._break(writer, fault)
            if k and cfg.itl_ms:
                await asyncio.sleep(cfg.itl_ms / 1000)
            writer.write(event)
            await writer.drain()
            if fault == "stall_after":
                await asyncio.sleep(cfg.silence_s)
                return False
        writer.write(tail)
        await writer.drain()
        return True

    def _break(self, writer, fault: str) -> bool:
        if fault == "die_after":
            os._exit(EXIT_DIED)
        sock = writer.get_extra_info("socket")
        if sock is not None:  # linger 0: the kernel answers with RST instead of FIN
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
        return False


async def serve(cfg: FaultConfig, host: str = "127.0.0.1", port: int = 0, ready=None) -> None:
    """Serve until cancelled; ``ready(port)`` is called once listening."""
    fs = FaultServer(cfg)
    server = await asyncio.start_server(fs.handle, host, port, backlog=256)
    if ready:
        ready(server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="FAKE OpenAI-compatible server that injects named faults")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--model", default="fake-model", help="the model name /v1/models lists")
    ap.add_argument("--ttft-ms", type=float, default=0.0, help="delay before the first chunk / the answer")
    ap.add_argument("--itl-ms", type=float, default=0.0, help="delay between chunks")
    ap.add_argument("--fault", action="append", default=[],
                    help="NAME[=VALUE], repeatable: " + "; ".join(f"{k}: {v}" for k, v in FAULTS.items()))
    ap.add_argument("--request-log", default=None, help="append one JSON line per completion request here")
    ap.add_argument("--answer-key", default=None, help="directory of *.jsonl questions the fake answers right")
    a = ap.parse_args(argv)
    items = a.fault + os.environ.get("TT_FAULT_SERVER_FAULTS", "").split(",")
    try:
        faults, nth = parse_faults(items)
    except ValueError as exc:
        print(f"fault_server: error: {exc}", file=sys.stderr)
        return 2
    cfg = FaultConfig(model=a.model, ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, faults=faults, nth_500=nth,
                      request_log=a.request_log, answer_key=a.answer_key)

    def ready(port: int) -> None:
        print(f"{LISTENING} {port}", flush=True)
    try:
        asyncio.run(serve(cfg, a.host, a.port, ready))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
