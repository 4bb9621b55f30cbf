"""Wait until a server can really answer.

Why three stages: ``/health`` answers as soon as the HTTP layer is up; ``/v1/models`` proves the
model is registered; but vLLM's CPU build can pass both and die on the first request (an
unsupported attention config only fails at the first forward pass). Only a real 1-token completion
proves the server can serve. Connection refused and connection reset (docker-proxy accepts and then
resets while the app in the container is not listening yet) both mean "not yet".

Every wait has a deadline; when it passes, one line names the URL, the stage it was stuck in, the
last thing the server said and how long it has been silent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import requests

from contracts.openai_http import bearer_headers, one_token
from workflows.servers.base import ServerHandle, ServerStartError
from workflows.servers.probe import AuthRejected, check_auth

# Transient: the server is not up yet (or restarting its HTTP layer).
_NOT_YET = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)

__all__ = ["AuthRejected", "ReadinessTimeout", "ReadyInfo", "wait_until_ready"]


class ReadinessTimeout(ServerStartError):
    """The server was still not ready after the spec's timeout."""


@dataclass
class ReadyInfo:
    elapsed_s: float
    models: list[str]
    stages_s: dict[str, float] = field(default_factory=dict)  # seconds since start when each stage passed


@dataclass
class _Progress:
    """What the wait has seen so far: the basis of the one-line timeout message."""

    start: float
    last_note: str = ""
    last_answer_at: float | None = None  # monotonic time of the last HTTP answer of any kind

    def answered(self, note: str) -> None:
        self.last_note, self.last_answer_at = note, time.monotonic()

    def silent(self, note: str) -> None:
        self.last_note = note

    def silence(self) -> str:
        if self.last_answer_at is None:
            return "no HTTP answer at all"
        return f"last HTTP answer {time.monotonic() - self.last_answer_at:.0f} s ago"


def _stage_name(stages: dict[str, float]) -> str:
    return next(s for s in ("health", "models", "completion") if s not in stages)


def wait_until_ready(handle: ServerHandle, *, bearer: str | None, timeout_s: float, poll_interval_s: float = 1.0,
                     progress: Callable[[str], None] | None = None) -> ReadyInfo:
    """Poll health -> models -> one real completion until all pass.

    Raises ServerDied (exit code + last 40 log lines) as soon as the process/container exits,
    AuthRejected on 401/403, ReadinessTimeout after ``timeout_s``.
    """
    base = handle.base_url
    start = time.monotonic()
    seen = _Progress(start)
    stages: dict[str, float] = {}
    models: list[str] = []
    next_progress = start

    while True:
        if not handle.is_alive():
            raise handle.died(f"the {handle.kind} server")
        now = time.monotonic()
        if now - start > timeout_s:
            raise ReadinessTimeout(
                f"wait_ready: {base} not ready after {timeout_s:g} s (stage {_stage_name(stages)}: "
                f"{seen.last_note or 'no answer'}; {seen.silence()}); log: {handle.log_path}")
        per_request = max(1.0, min(30.0, timeout_s - (now - start)))
        try:
            if "health" not in stages:
                resp = requests.get(f"{base}/health", headers=bearer_headers(bearer), timeout=per_request)
                seen.answered(f"/health HTTP {resp.status_code}")
                if resp.status_code == 200:
                    stages["health"] = time.monotonic() - start
                    continue
            elif "models" not in stages:
                url = f"{base}/v1/models"
                resp = requests.get(url, headers=bearer_headers(bearer), timeout=per_request)
                seen.answered(f"/v1/models HTTP {resp.status_code}")
                check_auth(resp.status_code, url, bearer)
                if resp.status_code == 200:
                    models = [m.get("id") for m in resp.json().get("data", [])]
                    if handle.served_model_name not in models:
                        raise ServerStartError(f"the server at {base} serves {models}, "
                                               f"not {handle.served_model_name!r}")
                    stages["models"] = time.monotonic() - start
                    continue
            else:
                answer = one_token(base, handle.served_model_name, bearer, per_request)
                if answer.status is None:
                    seen.silent(f"1-token completion: {answer.text}")
                else:
                    seen.answered(f"1-token completion HTTP {answer.status}: {answer.text[:200]}")
                    check_auth(answer.status, answer.url, bearer)
                if answer.ok:
                    stages["completion"] = time.monotonic() - start
                    return ReadyInfo(elapsed_s=stages["completion"], models=models, stages_s=stages)
        except requests.ConnectionError:
            seen.silent("not accepting connections yet (refused/reset)")
        except _NOT_YET as exc:
            seen.silent(f"{type(exc).__name__}")
        except ValueError:
            seen.answered("non-JSON answer")
        if progress and time.monotonic() >= next_progress:
            progress(f"waiting for {base} ({time.monotonic() - start:.0f}s; {seen.last_note or 'starting'})")
            next_progress = time.monotonic() + 10.0
        time.sleep(poll_interval_s)
