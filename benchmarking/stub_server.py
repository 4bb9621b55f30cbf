"""Delay-programmed OpenAI-compatible stub server: a named test tool for the benchmark client.

Why it exists: to certify the client's timing we need a server whose TTFT and inter-chunk gaps
are known exactly, and to measure the client's capacity we need a server far cheaper than the
client. So this is a bare asyncio HTTP/1.1 protocol (no framework) that streams pre-rendered SSE
chunks: chunk k of a request is written at ``t_received + ttft + k * itl``, scheduled on absolute
deadlines (no drift). The timing loop uses a select()-based selector (microsecond timeouts; epoll
rounds up to whole milliseconds) with timer slack lowered; lateness of every write is recorded
and served at ``GET /stub/stats`` together with the stub's own CPU time.

Misbehaviour on request, for error-classification tests: ``fault`` = http:<code>, reset (RST after
two chunks), malformed (a broken JSON event), stall (headers + one chunk, then silence),
error_event (an ``{"error": ...}`` event mid-stream), short (fewer tokens than max_tokens).
Faults are chosen per request by ``--fault MODE:EVERY`` (every EVERY-th request, 1-based) or by a
``"stub": {...}`` object in the request body (also ttft_ms / itl_ms / tokens overrides).

Counters at ``GET /metrics``: its own ``stub_*_total`` (counted on receipt) and vLLM's names counted as vLLM
counts them, when a request finishes (``vllm:request_success_total``, ``vllm:prompt_tokens_total``,
``vllm:generation_tokens_total``), so a benchmark point's reconciliation of server and client counts
(``records.reconciliation``) runs against the stub as against vLLM. ``--request-log PATH`` appends one JSON line
per request received and finished (wall-clock ``t``, request id, the client's User-Agent): the server's own
record of who sent what when.

Run: ``python -m benchmarking.stub_server --port 0 --ttft-ms 20 --itl-ms 5`` (prints
``STUB_LISTENING <port>``).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import selectors
import socket
import struct
import sys
import time
from dataclasses import dataclass, field

from benchmarking.fake_answers import CHUNKED_END, frame, framed_stream, sse_event
from contracts.intervals import percentile


@dataclass
class StubConfig:
    """Programmed behaviour; per-request ``stub`` body fields override ttft_ms/itl_ms/tokens/fault."""

    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    # request k's TTFT is ttft_ms + ttft_spread_ms * frac(k * golden ratio): known, evenly spread over
    # [ttft_ms, ttft_ms + ttft_spread_ms] (mean ttft_ms + spread / 2), so a target's interval can hold it
    ttft_spread_ms: float = 0.0
    token_text: str = " tok"
    faults: list[tuple[str, int]] = field(default_factory=list)  # (mode, every_n)
    short_by: int = 1            # tokens missing in the `short` fault
    stall_s: float = 600.0       # how long a stalled stream stays open
    model: str = "stub-model"


class _Renderer:
    """Pre-renders framed SSE chunks per (endpoint, tokens, prompt_tokens, usage) so serving is a write."""

    def __init__(self, cfg: StubConfig):
        self.cfg = cfg
        self._cache: dict[tuple, tuple[list[bytes], bytes]] = {}

    def render(self, chat: bool, n: int, prompt_tokens: int, usage: bool) -> tuple[list[bytes], bytes]:
        key = (chat, n, prompt_tokens, usage)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        chunks, tail = framed_stream(chat, n, self.cfg.token_text, self.cfg.model, prompt_tokens, usage, "cmpl-stub")
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[key] = (chunks, tail)
        return chunks, tail


class StubState:
    """Counters shared by all connections (served at /metrics and /stub/stats)."""

    def __init__(self, cfg: StubConfig):
        self.cfg = cfg
        self.renderer = _Renderer(cfg)
        self.requests = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.lateness: list[float] = []
        # request id -> [receipt time, write time of each chunk], CLOCK_MONOTONIC (same clock as the
        # client's perf_counter on Linux): lets a certification separate client error from stub lateness
        self.writes: dict[str, list[float]] = {}
        self.finished = 0              # vLLM's counts: requests finished, their prompt and generated tokens
        self.finished_prompt_tokens = 0
        self.finished_generation_tokens = 0
        self.log = None                # --request-log: an open file, one JSON line per event

    def note(self, event: str, rid: str, agent: str, **extra) -> None:
        if self.log is not None:
            self.log.write(json.dumps({"t": time.time(), "event": event, "request_id": rid, "user_agent": agent,
                                       **extra}) + "\n")
            self.log.flush()

    def finish(self, rid: str, agent: str, prompt_tokens: int, tokens: int) -> None:
        """A request answered to its end: counted as vLLM counts a finished request, and logged."""
        self.finished += 1
        self.finished_prompt_tokens += prompt_tokens
        self.finished_generation_tokens += tokens
        self.note("finished", rid, agent, prompt_tokens=prompt_tokens, generation_tokens=tokens)

    def metrics_text(self) -> str:
        model = self.cfg.model
        return (f"# TYPE stub_requests_total counter\nstub_requests_total {self.requests}\n"
                f"stub_prompt_tokens_total {self.prompt_tokens}\n"
                f"stub_generation_tokens_total {self.generation_tokens}\n"
                "# TYPE vllm:request_success_total counter\n"
                f'vllm:request_success_total{{finished_reason="length",model_name="{model}"}} {self.finished}\n'
                "# TYPE vllm:prompt_tokens_total counter\n"
                f'vllm:prompt_tokens_total{{model_name="{model}"}} {self.finished_prompt_tokens}\n'
                "# TYPE vllm:generation_tokens_total counter\n"
                f'vllm:generation_tokens_total{{model_name="{model}"}} {self.finished_generation_tokens}\n')

    def pick_fault(self, number: int) -> str | None:
        for mode, every in self.cfg.faults:
            if every > 0 and number % every == 0:
                return mode
        return None

    def stats(self) -> dict:
        lat = sorted(self.lateness)

        def pct(p: float) -> float:
            return percentile(lat, p) * 1e6 if lat else 0.0
        return {"requests": self.requests, "cpu_s": time.process_time(),
                "lateness_us": {"count": len(lat), "p50": pct(50), "p99": pct(99),
                                "max": lat[-1] * 1e6 if lat else 0.0}}


def _count_prompt_tokens(body: dict) -> int:
    """Whitespace words for text (token ids when a list of ints) -- the stub has no tokenizer."""
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        return len(prompt) if prompt and isinstance(prompt[0], int) else sum(len(str(p).split()) for p in prompt)
    if isinstance(prompt, str):
        return len(prompt.split())
    total = 0
    for msg in body.get("messages") or []:
        content = msg.get("content")
        total += len(content.split()) if isinstance(content, str) else 0
    return total


class StubProtocol(asyncio.Protocol):
    """One keep-alive connection; requests are served one at a time in arrival order."""

    def __init__(self, state: StubState):
        self.state = state
        self.loop = asyncio.get_running_loop()
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.closed = False
        self.timers: list[asyncio.TimerHandle] = []
        self.rid = ""
        self.finishing: tuple | None = None

    def connection_made(self, transport):
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc):
        self.closed = True
        for t in self.timers:
            t.cancel()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.busy:
            self._try_request()

    def _try_request(self) -> None:
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.buf[:end].decode("latin-1").split("\r\n")
        headers = {}
        for line in head[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        length = int(headers.get("content-length") or 0)
        if len(self.buf) < end + 4 + length:
            return
        t_recv = self.loop.time()
        body = self.buf[end + 4:end + 4 + length]
        self.buf = self.buf[end + 4 + length:]
        method, path = (head[0].split(" ") + ["", ""])[:2]
        self.busy = True
        self._route(method, path.split("?", 1)[0], headers, body, t_recv)

    def _done(self) -> None:
        self.busy = False
        if self.buf and not self.closed:
            self._try_request()

    def _simple(self, status: int, payload: bytes, ctype: str = "application/json") -> None:
        reason = {200: "OK", 404: "Not Found", 400: "Bad Request"}.get(status, "Error")
        self.transport.write(b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
                             % (status, reason.encode(), ctype.encode(), len(payload), payload))
        self._done()

    def _route(self, method: str, path: str, headers: dict, body: bytes, t_recv: float) -> None:
        st = self.state
        if method == "GET" and path in ("/health", "/ping"):
            return self._simple(200, b"")
        if method == "GET" and path == "/v1/models":
            return self._simple(200, json.dumps({"object": "list", "data": [
                {"id": st.cfg.model, "object": "model", "max_model_len": 1 << 20}]}).encode())
        if method == "GET" and path == "/metrics":
            return self._simple(200, st.metrics_text().encode(), "text/plain; version=0.0.4")
        if path == "/stub/writes":
            return self._simple(200, json.dumps(st.writes).encode())
        if path == "/stub/stats":
            if method == "POST":
                st.lateness.clear()
                st.writes.clear()
            return self._simple(200, json.dumps(st.stats()).encode())
        if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            try:
                req = json.loads(body)
            except ValueError:
                return self._simple(400, b'{"error":"bad json"}')
            return self._completion(req, path.endswith("chat/completions"), headers, t_recv)
        return self._simple(404, b'{"error":"not found"}')

    def _completion(self, req: dict, chat: bool, headers: dict, t_recv: float) -> None:
        st = self.state
        cfg = st.cfg
        st.requests += 1
        over = req.get("stub") or {}
        fault = over.get("fault", st.pick_fault(st.requests))
        n = int(over.get("tokens") or req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        if fault == "short":
            n = max(1, n - cfg.short_by)
        spread = cfg.ttft_spread_ms * ((st.requests * 0.6180339887) % 1.0)
        ttft = (float(over.get("ttft_ms", cfg.ttft_ms)) + spread) / 1000.0
        itl = float(over.get("itl_ms", cfg.itl_ms)) / 1000.0
        prompt_tokens = _count_prompt_tokens(req)
        rid = headers.get("x-request-id") or f"stub-{st.requests}"
        agent = headers.get("user-agent", "")
        st.note("received", rid, agent)
        if fault and fault.startswith("http:"):
            code = int(fault.split(":", 1)[1])
            payload = json.dumps({"error": {"message": "stub fault", "code": code}}).encode()
            self.transport.write(b"HTTP/1.1 %d Stub Fault\r\nContent-Type: application/json\r\n"
                                 b"x-request-id: %s\r\nContent-Length: %d\r\n\r\n%s"
                                 % (code, rid.encode(), len(payload), payload))
            return self._done()
        st.prompt_tokens += prompt_tokens
        st.generation_tokens += n
        if not req.get("stream"):
            text = cfg.token_text * n
            choice = ({"index": 0, "message": {"role": "assistant", "content": text}} if chat
                      else {"index": 0, "text": text})
            payload = json.dumps({"id": "cmpl-stub", "model": cfg.model, "choices": [choice], "usage": {
                "prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}}).encode()
            st.finish(rid, agent, prompt_tokens, n)
            return self._simple(200, payload)
        usage = bool((req.get("stream_options") or {}).get("include_usage"))
        chunks, tail = st.renderer.render(chat, n, prompt_tokens, usage)
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                b"x-request-id: %s\r\n\r\n" % rid.encode())
        if fault == "malformed":
            chunks = chunks[:1] + [frame(b'data: {"choices":[{"text":" tok\n\n')] + chunks[1:]
        elif fault == "error_event":
            chunks = chunks[:1] + [sse_event({"error": {"message": "stub error event", "code": 500}})]
            tail = sse_event("[DONE]") + CHUNKED_END
        counted = fault in (None, "short", "malformed")  # answered to its end, as vLLM would count it
        self.finishing = (rid, agent, prompt_tokens, n) if counted else None
        if ttft <= 0 and itl <= 0 and fault not in ("reset", "stall"):
            self.transport.write(head + b"".join(chunks) + tail)
            self._finished()
            return self._done()
        self.transport.write(head)
        self.rid = rid
        st.writes[rid] = [t_recv]
        self._schedule(chunks, tail, t_recv, ttft, itl, fault, 0)

    def _finished(self) -> None:
        if self.finishing is not None:
            self.state.finish(*self.finishing)
            self.finishing = None

    def _schedule(self, chunks, tail, t0, ttft, itl, fault, k) -> None:
        deadline = t0 + ttft + k * itl
        self.timers = [self.loop.call_at(deadline, self._emit, chunks, tail, t0, ttft, itl, fault, k, deadline)]

    def _emit(self, chunks, tail, t0, ttft, itl, fault, k, deadline) -> None:
        if self.closed:
            return
        self.state.lateness.append(self.loop.time() - deadline)
        if fault == "reset" and k == 2:
            sock = self.transport.get_extra_info("socket")
            if sock is not None:  # linger 0 -> the kernel sends RST instead of FIN
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.transport.abort()
            return
        last = k == len(chunks) - 1
        self.transport.write(chunks[k] + (tail if last else b""))
        rec = self.state.writes.get(self.rid)
        if rec is not None:
            rec.append(time.perf_counter())
        if fault == "stall" and k == 0:
            self.timers = [self.loop.call_later(self.state.cfg.stall_s, self.transport.abort)]
            return
        if last:
            self._finished()
            self._done()
        else:
            self._schedule(chunks, tail, t0, ttft, itl, fault, k + 1)


def _lower_timer_slack() -> None:
    """Ask Linux for 1 ns timer slack so timed writes are not batched by the default 50 us slack."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK
    except Exception:
        pass


def make_loop(kind: str) -> asyncio.AbstractEventLoop:
    """'select' = precise timers (timing runs); 'uvloop' = cheapest I/O (capacity runs, untimed)."""
    if kind == "uvloop":
        import uvloop
        return uvloop.new_event_loop()
    _lower_timer_slack()
    return asyncio.SelectorEventLoop(selectors.SelectSelector())


async def serve(cfg: StubConfig, host: str = "127.0.0.1", port: int = 0, ready=None, log=None) -> None:
    """Serve until cancelled; `ready(port)` is called once listening; ``log``: an open file for the request log."""
    state = StubState(cfg)
    state.log = log
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: StubProtocol(state), host, port, backlog=1024)
    bound = server.sockets[0].getsockname()[1]
    if ready:
        ready(bound)
    async with server:
        await server.serve_forever()


def _parse_faults(items: list[str]) -> list[tuple[str, int]]:
    out = []
    for item in items:
        mode, _, every = item.rpartition(":")
        if not mode or not every.isdigit():
            raise SystemExit(f"--fault {item!r}: expected MODE:EVERY, e.g. http:500:5 or reset:7")
        out.append((mode, int(every)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ttft-ms", type=float, default=0.0)
    ap.add_argument("--itl-ms", type=float, default=0.0)
    ap.add_argument("--ttft-spread-ms", type=float, default=0.0,
                    help="spread TTFTs evenly over [ttft, ttft + spread] (deterministic, per request number)")
    ap.add_argument("--fault", action="append", default=[], help="MODE:EVERY, e.g. http:503:4, reset:5, stall:9")
    ap.add_argument("--stall-s", type=float, default=600.0)
    ap.add_argument("--model", default="stub-model")
    ap.add_argument("--loop", choices=("select", "uvloop"), default="select")
    ap.add_argument("--cpu", type=int, default=None, help="pin the stub to this CPU")
    ap.add_argument("--request-log", default=None, help="append one JSON line per request received and finished")
    a = ap.parse_args(argv)
    if a.cpu is not None:
        os.sched_setaffinity(0, {a.cpu})
    cfg = StubConfig(ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, ttft_spread_ms=a.ttft_spread_ms, faults=_parse_faults(a.fault),
                     stall_s=a.stall_s, model=a.model)
    loop = make_loop(a.loop)
    asyncio.set_event_loop(loop)

    def ready(port: int) -> None:
        print(f"STUB_LISTENING {port}", flush=True)
    log = open(a.request_log, "a", encoding="utf-8") if a.request_log else None  # noqa: SIM115 - lives as long as the stub
    try:
        loop.run_until_complete(serve(cfg, a.host, a.port, ready, log))
    except KeyboardInterrupt:
        pass
    finally:
        if log is not None:
            log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
