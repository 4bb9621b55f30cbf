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
    """ASGI middleware: 413 when Content-Length or the streamed body exceeds MAX_PAYLOAD_BYTES.

    path_limits: routes whose own limit governs instead ({path: (bytes, the 413 message)}): the
    audio routes take uploads up to MAX_AUDIO_SIZE_BYTES (50 MiB), more than the general 20 MiB.
    """

    def __init__(self, app, max_bytes: int, path_limits: dict[str, tuple[int, str]] | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.path_limits = path_limits or {}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit, too_large = self.path_limits.get(
            scope.get("path", ""), (self.max_bytes, f"request body exceeds MAX_PAYLOAD_BYTES={self.max_bytes}"))
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    too_big = int(value) > limit
                except ValueError:
                    too_big = False
                if too_big:
                    return await PayloadTooLarge(too_large).response()(scope, receive, send)
        seen = 0

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise PayloadTooLarge(too_large)
            return message

        await self.app(scope, limited_receive, send)
