"""The gateway's ASGI app: verify the JWT, then stream the upstream's answer through as it comes.

Why a plain ASGI app and not a framework route: the proxy must not buffer. Each upstream read
(an SSE event, a chunk of a chunked body, a token of the legacy text API) is forwarded to the
client as its own ``http.response.body`` message the moment it arrives, headers first, so the
client's time to first token is the upstream's plus one local hop. The request body is streamed
upstream the same way.

Rules:
- Paths in ``open_paths`` (probes: /health, /tt-liveness, /ping) pass without a token.
- Any other request needs ``Authorization: Bearer <JWT>`` valid under the ``TokenPolicy``;
  otherwise 401 ``{"error": {"message", "type": "authentication_error", "code": 401}}`` with
  ``WWW-Authenticate: Bearer error="invalid_token"``, and nothing reaches the upstream.
- Upstream auth: with ``upstream_authorization`` set, the client's header is replaced by it
  (the upstream's own key never leaves the host); otherwise the client's header is forwarded.
- A client that disconnects mid-stream closes the upstream connection at once, so the upstream
  cancels the request (the media server frees the user's slot).
- Upstream unreachable: 502; upstream silent past ``read_timeout_s``: 504; both JSON.
- Overload: an upstream's own refusals (429 queue full, 503 not ready) are relayed as they are. The
  gateway holds at most ``max_in_flight`` forwarded requests; one more is answered at once with
  its own 503 ``{"error": {"type": "overloaded"}}`` and ``Retry-After: 1``, before its body is read
  or an upstream connection is taken. So under any overload the gateway's sockets, memory and
  latency stay bounded and it never makes a 5xx of its own other than that 503
  (``scripts/bench_gateway_overload.py`` measures it at 10x the upstream's capacity).
- The upstream hop is ``gateway.upstream`` (raw asyncio streams, keep-alive pool), not a general
  HTTP client: it keeps the added first-byte latency to about one local hop
  (``scripts/bench_gateway.py``).
"""
from __future__ import annotations

import asyncio
import json
import logging

from gateway.tokens import TokenPolicy, TokenRejected, bearer_token, verify
from gateway.upstream import UpstreamError, UpstreamPool, UpstreamResponse, UpstreamTimeout

log = logging.getLogger("gateway")
HOP_BY_HOP = {b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
              b"trailer", b"transfer-encoding", b"upgrade", b"host", b"content-length"}
DEFAULT_OPEN_PATHS = ("/health", "/tt-liveness", "/ping")
BUFFERED_BODY_LIMIT = 1 << 20  # request bodies up to this size are read whole (replayable)


def _json_response(status: int, message: str, error_type: str, extra_headers=()) -> tuple[dict, dict]:
    body = json.dumps({"error": {"message": message, "type": error_type, "code": status}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               *extra_headers]
    return ({"type": "http.response.start", "status": status, "headers": headers},
            {"type": "http.response.body", "body": body, "more_body": False})


class Gateway:
    """ASGI callable; one instance per process."""

    def __init__(self, upstream: str, policy: TokenPolicy, open_paths=DEFAULT_OPEN_PATHS,
                 upstream_authorization: str | None = None, connect_timeout_s: float = 10.0,
                 read_timeout_s: float = 600.0, max_connections: int = 1024, max_in_flight: int = 512):
        self.upstream = upstream.rstrip("/")
        self.policy = policy
        self.open_paths = frozenset(open_paths)
        self.upstream_authorization = upstream_authorization
        self._pool_args = (connect_timeout_s, read_timeout_s, max_connections)
        self._pool: UpstreamPool | None = None
        self.max_in_flight = max_in_flight
        self.in_flight = 0
        self.rejected = 0
        self.forwarded = 0
        self.overloaded = 0  # requests answered with the gateway's own 503

    def pool(self) -> UpstreamPool:
        if self._pool is None:
            connect, read, idle = self._pool_args
            self._pool = UpstreamPool(self.upstream, connect, read, max_idle=idle)
        return self._pool

    async def __call__(self, scope: dict, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers = scope.get("headers", [])
        if scope["path"] not in self.open_paths:
            authorization = next((v.decode("latin-1") for k, v in headers if k == b"authorization"), None)
            try:
                claims = verify(bearer_token(authorization), self.policy)
            except TokenRejected as exc:
                self.rejected += 1
                start, body = _json_response(
                    401, str(exc), "authentication_error",
                    [(b"www-authenticate", b'Bearer error="invalid_token"')])
                await send(start)
                await send(body)
                return
            del claims
        if self.in_flight >= self.max_in_flight:
            self.overloaded += 1
            start, body = _json_response(
                503, f"the gateway holds its limit of {self.max_in_flight} requests in flight; retry shortly",
                "overloaded", [(b"retry-after", b"1")])
            await send(start)
            await send(body)
            return
        self.in_flight += 1
        try:
            await self._forward(scope, receive, send, headers)
        finally:
            self.in_flight -= 1

    async def _lifespan(self, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.pool()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._pool is not None:
                    self._pool.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _upstream_headers(self, headers: list[tuple[bytes, bytes]], chunked_body: bool) -> list[tuple[bytes, bytes]]:
        # Content-Length is kept so the body goes upstream with the client's framing; a body of
        # unknown length is re-chunked (Transfer-Encoding is hop-by-hop).
        out = [(k, v) for k, v in headers if (k not in HOP_BY_HOP or k == b"content-length")
               and not (k == b"authorization" and self.upstream_authorization is not None)]
        if self.upstream_authorization is not None:
            out.append((b"authorization", self.upstream_authorization.encode("latin-1")))
        if chunked_body:
            out.append((b"transfer-encoding", b"chunked"))
        return out

    async def _forward(self, scope: dict, receive, send, headers) -> None:
        target = scope.get("raw_path") or scope["path"].encode()
        target = target.split(b"?", 1)[0].decode("latin-1")
        query = scope.get("query_string", b"")
        if query:
            target += "?" + query.decode("latin-1")
        body_done = asyncio.Event()
        length = next((v for k, v in headers if k == b"content-length"), None)
        chunked_body = length is None and any(k == b"transfer-encoding" for k, _ in headers)
        try:
            body = await self._request_body(receive, length, chunked_body, body_done)
        except ClientGone:
            return
        head = self.pool().head(scope["method"], target, self._upstream_headers(headers, chunked_body))
        try:
            response = await self.pool().request(head, body, chunked_body)
        except ClientGone:
            return
        except UpstreamTimeout:
            await self._send_error(send, 504, "upstream did not answer in time", "upstream_timeout")
            return
        except UpstreamError as exc:
            await self._send_error(send, 502, f"upstream {self.upstream} unreachable: {exc}", "bad_gateway")
            return
        self.forwarded += 1
        watcher = asyncio.ensure_future(self._wait_disconnect(receive, body_done))
        relay = asyncio.ensure_future(self._relay(response, send))
        try:
            await asyncio.wait({watcher, relay}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (watcher, relay):
                if not task.done():
                    task.cancel()
            await asyncio.gather(watcher, relay, return_exceptions=True)
            response.close()  # unless read to its end: a gone client closes the upstream connection

    async def _request_body(self, receive, length: bytes | None, chunked_body: bool, body_done: asyncio.Event):
        """The request body: bytes when small and of known length (replayable), else a stream."""
        if length is None and not chunked_body:
            body_done.set()
            return None
        if length is not None and int(length) <= BUFFERED_BODY_LIMIT:
            parts = []
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone()
                parts.append(message.get("body", b""))
                if not message.get("more_body", False):
                    body_done.set()
                    return b"".join(parts)

        async def stream():
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone()
                chunk = message.get("body", b"")
                if chunk:
                    yield chunk
                if not message.get("more_body", False):
                    body_done.set()
                    return

        return stream()

    async def _relay(self, response: UpstreamResponse, send) -> None:
        out_headers = [(k, v) for k, v in response.headers if k not in HOP_BY_HOP]
        if response.length is not None:
            out_headers.append((b"content-length", str(response.length).encode()))
        await send({"type": "http.response.start", "status": response.status, "headers": out_headers})
        try:
            async for chunk in response.body():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except UpstreamError as exc:
            log.warning("upstream stream broke: %s", exc)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    @staticmethod
    async def _wait_disconnect(receive, body_done: asyncio.Event) -> None:
        await body_done.wait()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return

    @staticmethod
    async def _send_error(send, status: int, message: str, error_type: str) -> None:
        start, body = _json_response(status, message, error_type)
        await send(start)
        await send(body)


class ClientGone(Exception):
    """The client disconnected while its request body was being sent upstream."""
