"""Bearer API key check (constant-time) and the request-body size limit.

Routes that serve models depend on ``require_api_key``; liveness, health, metrics and the docs
stay open so probes work without the key. ``NO_AUTH=1`` turns the check off.
"""
from __future__ import annotations

import secrets

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from media_server.errors import PayloadTooLarge, Unauthorized

_bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer <API_KEY>")


async def require_api_key(request: Request,
                          credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> None:
    settings = request.app.state.settings
    if settings.no_auth:
        return
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthorized("missing bearer token: send 'Authorization: Bearer <API_KEY>'")
    if not secrets.compare_digest(credentials.credentials.encode(), settings.api_key.encode()):
        raise Unauthorized("invalid API key")


class BodySizeLimit:
    """ASGI middleware: 413 when Content-Length or the streamed body exceeds MAX_PAYLOAD_BYTES."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    too_big = int(value) > self.max_bytes
                except ValueError:
                    too_big = False
                if too_big:
                    return await self._reject(scope, receive, send)
        seen = 0
        limit = self.max_bytes

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise PayloadTooLarge(f"request body exceeds MAX_PAYLOAD_BYTES={limit}")
            return message

        await self.app(scope, limited_receive, send)

    async def _reject(self, scope, receive, send):
        response = PayloadTooLarge(f"request body exceeds MAX_PAYLOAD_BYTES={self.max_bytes}").response()
        await response(scope, receive, send)
