"""The OpenAI-compatible HTTP basics every client shares: the bearer header and the 1-token probe.

Why here: the orchestrator (readiness), the evals preflight and the start-up measurement script
all ask the same question — "does this server answer a real 1-token completion?" — and all send
the same ``Authorization`` header. One definition, stdlib only (``urllib``), so it works from
every venv.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any


def bearer_headers(token: str | None) -> dict[str, str]:
    """``{"Authorization": "Bearer <token>"}``, or ``{}`` when no token is used."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def one_token_request(model: str, *, chat: bool = False) -> tuple[str, dict[str, Any]]:
    """(path, body) of the smallest real request: a greedy completion of one token."""
    body: dict[str, Any] = {"model": model, "max_tokens": 1, "temperature": 0.0}
    if chat:
        return "/v1/chat/completions", {**body, "messages": [{"role": "user", "content": "Hello"}]}
    return "/v1/completions", {**body, "prompt": "Hello"}


@dataclass
class ProbeAnswer:
    """What one probe request got back. ``status`` is None when no HTTP answer arrived at all."""

    url: str
    status: int | None
    body: Any = None          # the decoded JSON answer (None when not JSON or no answer)
    text: str = ""            # the first 300 characters of the answer, or why there was none
    silent: bool = False      # the server accepted the connection but said nothing within the timeout

    @property
    def ok(self) -> bool:
        """HTTP 200 with at least one choice: the server really generated."""
        return self.status == 200 and isinstance(self.body, dict) and bool(self.body.get("choices"))


def post_json(url: str, body: dict[str, Any], bearer: str | None, timeout: float) -> ProbeAnswer:
    """POST ``body``; every outcome (answer, HTTP error, refused, silence) comes back as a ProbeAnswer."""
    headers = {"Content-Type": "application/json", **bearer_headers(bearer)}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read(300)
    except (socket.timeout, TimeoutError):
        return ProbeAnswer(url, None, text=f"no answer within {timeout:g} s", silent=True)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return ProbeAnswer(url, None, text=f"no answer within {timeout:g} s", silent=True)
        return ProbeAnswer(url, None, text=f"cannot connect: {reason}")
    text = raw[:300].decode("utf-8", "replace")
    try:
        decoded = json.loads(raw)
    except ValueError:
        decoded = None
    return ProbeAnswer(url, status, decoded, text)


def one_token(base_url: str, model: str, bearer: str | None, timeout: float, *, chat: bool = False) -> ProbeAnswer:
    """Send the 1-token request to ``base_url`` (without ``/v1``) and return what came back."""
    path, body = one_token_request(model, chat=chat)
    return post_json(base_url.rstrip("/") + path, body, bearer, timeout)
