"""Streaming HTTP client for OpenAI-compatible servers: the measuring instrument.

Why not a general-purpose HTTP library in the hot path: aiohttp costs about 380 us of CPU per
streamed request on this machine class (measured against the stub), which would make the client,
not the server, the bottleneck at high concurrency, and it stamps a chunk only when its coroutine
resumes, after every other stream's work in the same loop turn. This client is a small HTTP/1.1
protocol on asyncio (uvloop when installed): the send time is taken right before the request bytes
are written, and each read is stamped first thing in ``data_received``; nothing else happens per
chunk except de-chunking. Parsing is deferred to ``sse.finish_record`` after the response ended.

Timeouts are enforced by one watchdog per transport instead of a timer per chunk: a request that
runs longer than ``request_timeout_s`` fails as ``timeout``; one that receives nothing for
``stall_timeout_s`` (no headers, or no chunk since the last one) fails as ``stall``, with the URL
and the silence in its error text.
"""
from __future__ import annotations

import asyncio
import os
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from benchmarking.metrics import RequestRecord
from benchmarking.sse import finish_record
from contracts.openai_http import bearer_headers

_perf = time.perf_counter


class RequestFailed(Exception):
    """A request that ended without a usable response; `cls` is the error class."""

    def __init__(self, cls: str, msg: str):
        super().__init__(msg)
        self.cls = cls


@dataclass
class ClientConfig:
    """Where and how requests go; `tokenizer` (encode(text)->ids) re-counts output without usage."""

    base_url: str
    endpoint: str = "/v1/completions"
    model: str = ""
    api_key: str | None = None
    request_timeout_s: float = 1800.0
    stall_timeout_s: float = 300.0
    connect_timeout_s: float = 30.0
    tokenizer: object | None = None
    keep_text: bool = False

    @property
    def chat(self) -> bool:
        return self.endpoint.endswith("chat/completions")


class _Conn(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; parses status/headers and de-chunks the body as it arrives."""

    __slots__ = ("transport", "fut", "parts", "stamps", "status", "headers", "_hdr", "_mode", "_left",
                 "_pending", "_skip", "reusable", "last_activity", "t_send", "closed")

    def __init__(self):
        self.transport = None
        self.fut: asyncio.Future | None = None
        self.closed = False
        self.reusable = True
        self.last_activity = 0.0
        self.t_send = 0.0
        self._reset()

    def _reset(self):
        self.parts: list[bytes] = []
        self.stamps: list[float] = []
        self.status = 0
        self.headers: dict[str, str] = {}
        self._hdr = b""
        self._mode = "head"   # head | chunked | length | close | done
        self._left = 0
        self._pending = b""
        self._skip = 0

    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        self.closed = True
        self.reusable = False
        fut = self.fut
        if fut is not None and not fut.done():
            if self._mode == "close":
                fut.set_result(None)
            else:
                fut.set_exception(RequestFailed("connection_reset", f"connection lost mid-response: {exc!r}"))

    def fail(self, cls: str, msg: str) -> None:
        if self.fut is not None and not self.fut.done():
            self.fut.set_exception(RequestFailed(cls, msg))
        self.reusable = False
        if self.transport is not None:
            self.transport.abort()

    def send(self, data: bytes) -> asyncio.Future:
        self._reset()
        self.fut = asyncio.get_running_loop().create_future()
        self.t_send = self.last_activity = _perf()
        self.transport.write(data)
        return self.fut

    def data_received(self, data: bytes) -> None:
        t = _perf()
        self.last_activity = t
        if self._mode == "head":
            self._hdr += data
            end = self._hdr.find(b"\r\n\r\n")
            if end < 0:
                return
            data = self._hdr[end + 4:]
            self._parse_head(self._hdr[:end])
            self._hdr = b""
        if self._mode == "chunked":
            payload = self._dechunk(data)
        elif self._mode == "length":
            payload = data[:self._left]
            self._left -= len(payload)
            if self._left <= 0:
                self._mode = "done"
        elif self._mode == "close":
            payload = data
        else:
            return
        if payload:
            self.parts.append(payload)
            self.stamps.append(t)
        if self._mode == "done" and self.fut is not None and not self.fut.done():
            self.fut.set_result(None)

    def _parse_head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        try:
            self.status = int(lines[0].split(" ", 2)[1])
        except (IndexError, ValueError):
            self.fail("malformed_http", f"bad status line {lines[0][:80]!r}")
            return
        hdrs = self.headers
        for line in lines[1:]:
            k, _, v = line.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        if hdrs.get("connection", "").lower() == "close":
            self.reusable = False
        if "chunked" in hdrs.get("transfer-encoding", "").lower():
            self._mode = "chunked"
        elif "content-length" in hdrs:
            self._left = int(hdrs["content-length"])
            self._mode = "length" if self._left > 0 else "done"
        else:
            self._mode = "close"
            self.reusable = False

    def _dechunk(self, data: bytes) -> bytes:
        """Payload bytes of the chunked-encoded `data`; partial frames carry over to the next read."""
        if self._pending:
            data = self._pending + data
            self._pending = b""
        n = len(data)
        pos = 0
        out = []
        if self._skip:  # CRLF that closes the previous chunk
            pos = min(self._skip, n)
            self._skip -= pos
        if self._left:  # rest of a chunk started in an earlier read
            take = min(self._left, n - pos)
            out.append(data[pos:pos + take])
            self._left -= take
            pos += take
            if self._left:
                return out[0]
            skip = min(2, n - pos)
            pos += skip
            self._skip = 2 - skip
        find = data.find
        while pos < n:
            eol = find(b"\r\n", pos)
            if eol < 0:
                self._pending = data[pos:]
                break
            try:
                size = int(data[pos:eol], 16)
            except ValueError:
                size = int(data[pos:eol].split(b";", 1)[0], 16)
            if size == 0:  # last chunk; trailers are ignored
                self._mode = "done"
                break
            start = eol + 2
            end = start + size
            if end + 2 <= n:
                out.append(data[start:end])
                pos = end + 2
            else:
                out.append(data[start:end])
                if end > n:  # payload continues in the next read; its CRLF is skipped after it
                    self._left, self._skip = end - n, 0
                else:  # payload complete, closing CRLF (partly) in the next read
                    self._left, self._skip = 0, 2 - (n - end)
                break
        return out[0] if len(out) == 1 else b"".join(out)


class RawTransport:
    """Pooled keep-alive connections to one server plus the timeout watchdog."""

    def __init__(self, cfg: ClientConfig):
        self.cfg = cfg
        u = urlsplit(cfg.base_url)
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.ssl = ssl.create_default_context() if u.scheme == "https" else None
        self.prefix = u.path.rstrip("/")
        self.host_header = u.netloc
        # the User-Agent names this client process: a server's log tells one run's requests from another's
        self.header_lines = "".join(f"{k}: {v}\r\n" for k, v in bearer_headers(cfg.api_key).items()) + \
            f"User-Agent: tt-bench/{os.getpid()}\r\n"
        self.url = f"{cfg.base_url.rstrip('/')}{cfg.endpoint}"
        self.idle: list[_Conn] = []
        self.active: set[_Conn] = set()
        self._watchdog: asyncio.Task | None = None
        self.last_answer = 0.0  # perf_counter of the last chunk of the last request that completed

    def request_bytes(self, path: str, body: bytes, request_id: str) -> bytes:
        return (f"POST {self.prefix}{path} HTTP/1.1\r\nHost: {self.host_header}\r\n"
                f"Content-Type: application/json\r\nAccept: text/event-stream\r\n{self.header_lines}"
                f"x-request-id: {request_id}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body

    async def _acquire(self) -> _Conn:
        while self.idle:
            conn = self.idle.pop()
            if not conn.closed:
                return conn
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(_Conn, self.host, self.port, ssl=self.ssl), self.cfg.connect_timeout_s)
        except (OSError, asyncio.TimeoutError) as exc:
            raise RequestFailed("connect_error", f"cannot connect to {self.host}:{self.port}: {exc!r}") from None
        return conn

    def _start_watchdog(self) -> None:
        if self._watchdog is None or self._watchdog.done():
            self._watchdog = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        cfg = self.cfg
        tick = max(0.01, min(1.0, cfg.stall_timeout_s / 4, cfg.request_timeout_s / 4))
        while True:
            await asyncio.sleep(tick)
            now = _perf()
            for conn in list(self.active):
                if now - conn.t_send > cfg.request_timeout_s:
                    conn.fail("timeout", f"request exceeded {cfg.request_timeout_s:g} s")
                elif now - conn.last_activity > cfg.stall_timeout_s:
                    got = "after its headers" if conn.status else "before any response"
                    conn.fail("stall", f"no data for {cfg.stall_timeout_s:g} s {got} from {self.url}")

    def server_silent(self) -> bool:
        """No payload arrived on any connection, and no request completed, for a whole stall timeout."""
        recent = max([self.last_answer] + [c.stamps[-1] for c in list(self.active) if c.stamps])
        return _perf() - recent >= self.cfg.stall_timeout_s

    def abort_all(self, cls: str, msg: str) -> None:
        """Fail every in-flight request (used when a point's time budget runs out)."""
        for conn in list(self.active):
            conn.fail(cls, msg)

    async def send(self, rec: RequestRecord, body: bytes) -> None:
        """Send one streaming request and fill `rec` (never raises for request-level failures)."""
        self._start_watchdog()
        conn = None
        try:
            conn = await self._acquire()
            self.active.add(conn)
            fut = conn.send(self.request_bytes(self.cfg.endpoint, body, rec.request_id))
            rec.send_time = conn.t_send
            await fut
        except RequestFailed as exc:
            rec.success, rec.error_class, rec.error = False, exc.cls, str(exc)
            if conn is not None:
                rec.status = conn.status or None
            return
        finally:
            if conn is not None:
                self.active.discard(conn)
        rec.status = conn.status
        rec.server_request_id = conn.headers.get("x-request-id")
        parts, stamps = conn.parts, conn.stamps
        if stamps:
            self.last_answer = max(self.last_answer, stamps[-1])
        if conn.reusable and not conn.closed:
            self.idle.append(conn)
        else:
            conn.transport.close()
        if rec.status != 200:
            rec.success = False
            rec.error_class = "http_4xx" if 400 <= rec.status < 500 else "http_5xx" if rec.status >= 500 else "other"
            rec.error = f"HTTP {rec.status}: {b''.join(parts)[:300].decode('utf-8', 'replace')}"
            return
        finish_record(rec, parts, stamps, chat=self.cfg.chat, tokenizer=self.cfg.tokenizer,
                      keep_text=self.cfg.keep_text)

    async def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        for conn in self.idle + list(self.active):
            if conn.transport is not None:
                conn.transport.close()
        self.idle.clear()
