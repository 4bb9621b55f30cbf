"""A small stdlib HTTP client for the media endpoints: JSON and multipart bodies, timed.

Why stdlib: the media clients' venv carries only the photo set; requests are few and large
(an image, a clip), so a thread per in-flight request is plenty. A failed request is never a
number: it comes back with ``error_class`` set (http_4xx/http_5xx/timeout/connection/...) and is
counted by the caller.
"""
from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any


@dataclass
class Answer:
    """One HTTP exchange: status (None when no answer came), body, and its wall time."""

    url: str
    status: int | None
    body: bytes
    elapsed_s: float
    error_class: str | None = None
    error: str | None = None
    request_id: str = ""  # the X-Request-ID sent (the server logs it on every line of the request)

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.error_class is None

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))

    def text(self, limit: int = 300) -> str:
        return self.body[:limit].decode("utf-8", "replace")


def new_request_id() -> str:
    """A fresh X-Request-ID: one per request, so a slow one can be found in the server log."""
    return f"media-{uuid.uuid4().hex}"


def classify_status(status: int) -> str:
    return {401: "http_401", 404: "http_404", 413: "http_413", 429: "http_429", 503: "http_503",
            504: "http_504"}.get(status, "http_4xx" if 400 <= status < 500 else "http_5xx")


def multipart(fields: dict[str, str], files: dict[str, tuple[str, bytes, str]]) -> tuple[bytes, str]:
    """(body, content type) of a multipart/form-data request."""
    boundary = uuid.uuid4().hex
    parts: list[bytes] = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    for name, (filename, data, content_type) in files.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                     f"Content-Type: {content_type}\r\n\r\n".encode() + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class MediaHttp:
    """Requests to one server with one bearer key (None: no Authorization header)."""

    def __init__(self, base_url: str, api_key: str | None, timeout_s: float = 120.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout_s = timeout_s

    def headers(self, extra: dict[str, str] | None = None, auth: bool = True) -> dict[str, str]:
        out = {"Authorization": f"Bearer {self.api_key}"} if (auth and self.api_key) else {}
        out.update(extra or {})
        return out

    def request(self, method: str, path: str, body: bytes | None = None, content_type: str | None = None,
                auth: bool = True, timeout_s: float | None = None) -> Answer:
        url = f"{self.base_url}{path}"
        request_id = new_request_id()
        extra = {"X-Request-ID": request_id, **({"Content-Type": content_type} if content_type else {})}
        headers = self.headers(extra, auth=auth)
        req = urllib.request.Request(url, data=body, method=method, headers=headers)
        started = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=timeout_s or self.timeout_s) as resp:
                data = resp.read()
                return Answer(url, resp.status, data, time.monotonic() - started, request_id=request_id)
        except urllib.error.HTTPError as exc:
            data = exc.read() if exc.fp else b""
            return Answer(url, exc.code, data, time.monotonic() - started, classify_status(exc.code),
                          data[:300].decode("utf-8", "replace"), request_id=request_id)
        except (socket.timeout, TimeoutError) as exc:
            return Answer(url, None, b"", time.monotonic() - started, "timeout", str(exc), request_id=request_id)
        except urllib.error.URLError as exc:
            reason = exc.reason
            cls = "timeout" if isinstance(reason, (socket.timeout, TimeoutError)) else "connection"
            return Answer(url, None, b"", time.monotonic() - started, cls, str(reason), request_id=request_id)
        except (ConnectionError, OSError) as exc:
            return Answer(url, None, b"", time.monotonic() - started, "connection", f"{type(exc).__name__}: {exc}",
                          request_id=request_id)

    def get(self, path: str, auth: bool = True, timeout_s: float | None = None) -> Answer:
        return self.request("GET", path, auth=auth, timeout_s=timeout_s)

    def post_json(self, path: str, payload: Any, auth: bool = True, timeout_s: float | None = None) -> Answer:
        return self.request("POST", path, json.dumps(payload).encode(), "application/json", auth=auth,
                            timeout_s=timeout_s)

    def post_form(self, path: str, fields: dict[str, str], files: dict[str, tuple[str, bytes, str]],
                  auth: bool = True, timeout_s: float | None = None) -> Answer:
        body, content_type = multipart(fields, files)
        return self.request("POST", path, body, content_type, auth=auth, timeout_s=timeout_s)
