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
"""
from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx

from gateway.tokens import TokenPolicy, TokenRejected, bearer_token, verify

log = logging.getLogger("gateway")
HOP_BY_HOP = {b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
              b"trailer", b"transfer-encoding", b"upgrade", b"host", b"content-length"}
DEFAULT_OPEN_PATHS = ("/health", "/tt-liveness", "/ping")


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
                 read_timeout_s: float = 600.0, max_connections: int = 1024):
        self.upstream = upstream.rstrip("/")
        self.policy = policy
        self.open_paths = frozenset(open_paths)
        self.upstream_authorization = upstream_authorization
        self._timeout = httpx.Timeout(connect=connect_timeout_s, read=read_timeout_s,
                                      write=read_timeout_s, pool=connect_timeout_s)
        self._limits = httpx.Limits(max_connections=max_connections,
                                    max_keepalive_connections=max_connections)
        self._client: httpx.AsyncClient | None = None
        self.rejected = 0
        self.forwarded = 0

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout, limits=self._limits,
                                             follow_redirects=False, trust_env=False)
        return self._client

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
        await self._forward(scope, receive, send, headers)

    async def _lifespan(self, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.client()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._client is not None:
                    await self._client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _upstream_headers(self, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        # Content-Length is kept so the body streams upstream with the client's framing (httpx
        # then sends it as is, not re-chunked: some servers do not read chunked request bodies).
        out = [(k, v) for k, v in headers if (k not in HOP_BY_HOP or k == b"content-length")
               and not (k == b"authorization" and self.upstream_authorization is not None)]
        if self.upstream_authorization is not None:
            out.append((b"authorization", self.upstream_authorization.encode("latin-1")))
        return out

    async def _forward(self, scope: dict, receive, send, headers) -> None:
        query = scope.get("query_string", b"")
        url = self.upstream + scope.get("raw_path", scope["path"].encode()).decode("latin-1").split("?")[0]
        if query:
            url += "?" + query.decode("latin-1")
        body_done = asyncio.Event()
        has_body = any(k in (b"content-length", b"transfer-encoding") for k, _ in headers)

        async def request_body():
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

        content: Any = request_body() if has_body else None
        if content is None:
            body_done.set()
        request = self.client().build_request(scope["method"], url, headers=self._upstream_headers(headers),
                                              content=content)
        try:
            response = await self.client().send(request, stream=True)
        except ClientGone:
            return
        except httpx.TimeoutException:
            await self._send_error(send, 504, "upstream did not answer in time", "upstream_timeout")
            return
        except httpx.HTTPError as exc:
            await self._send_error(send, 502, f"upstream {self.upstream} unreachable: "
                                              f"{type(exc).__name__}", "bad_gateway")
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
            await response.aclose()  # a gone client closes the upstream connection: it cancels

    async def _relay(self, response: httpx.Response, send) -> None:
        out_headers = [(k, v) for k, v in response.headers.raw if k.lower() not in HOP_BY_HOP]
        length = response.headers.get("content-length")
        if length is not None:
            out_headers.append((b"content-length", length.encode()))
        await send({"type": "http.response.start", "status": response.status_code, "headers": out_headers})
        try:
            async for chunk in response.aiter_raw():
                if chunk:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except httpx.HTTPError as exc:
            log.warning("upstream stream broke: %s", type(exc).__name__)
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
