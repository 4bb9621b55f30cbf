"""Wait until a server can really answer: one loop over a list of probes.

Why stages: ``/health`` answers as soon as the HTTP layer is up; ``/v1/models`` proves the model is
registered; but vLLM's CPU build can pass both and die on the first request (an unsupported
attention config only fails at the first forward pass). Only a real request proves the server can
serve: a 1-token completion for an LLM server (``llm_probes``), one item of the model's kind for a
media server (``workflows.media_readiness``). Connection refused and connection reset (docker-proxy
accepts and then resets while the app in the container is not listening yet) both mean "not yet".

``wait_for`` runs the probes in order, each until it passes, through ``contracts.retry``; the server's death is
noticed at once, 401/403 is final (``AuthRejected``), and when the deadline passes one line names
the URL, the stage it was stuck in, the last thing the server said and how long it has been silent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import requests

from contracts.openai_http import bearer_headers, one_token
from contracts.retry import GaveUp, NotYet, retry
from workflows.servers.base import ServerHandle, ServerStartError
from workflows.servers.probe import AuthRejected, check_auth

# Transient: the server is not up yet (or restarting its HTTP layer).
_NOT_YET = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)

__all__ = ["AuthRejected", "Probe", "ProbeResult", "ReadinessTimeout", "ReadyInfo", "llm_probes", "models_probe",
           "wait_for", "wait_until_ready"]


class ReadinessTimeout(ServerStartError):
    """The server was still not ready after the spec's timeout."""


@dataclass
class ReadyInfo:
    elapsed_s: float
    models: list[str]
    stages_s: dict[str, float] = field(default_factory=dict)  # seconds since start when each stage passed


@dataclass
class ProbeResult:
    """One attempt of a probe: whether it passed, what the server said, and whether it answered at all."""

    passed: bool
    note: str
    answered: bool = True  # an HTTP answer of any kind came back (silence is measured from the last one)
    models: list[str] | None = None  # the served model list, for the probe that reads it


@dataclass
class Probe:
    """A named stage of readiness. ``check(per_request_s)`` returns a ProbeResult; it raises
    ServerStartError (AuthRejected included) for an answer that waiting will not change."""

    name: str
    check: Callable[[float], ProbeResult]
    cap_s: float = 30.0  # longest single request of this probe (a first image may take minutes)


@dataclass
class _Progress:
    """What the wait has seen so far: the basis of the one-line timeout message."""

    start: float
    last_note: str = ""
    last_answer_at: float | None = None  # monotonic time of the last HTTP answer of any kind

    def saw(self, result: ProbeResult) -> None:
        self.last_note = result.note
        if result.answered:
            self.last_answer_at = time.monotonic()

    def silence(self) -> str:
        if self.last_answer_at is None:
            return "no HTTP answer at all"
        return f"last HTTP answer {time.monotonic() - self.last_answer_at:.0f} s ago"


def wait_for(handle: ServerHandle, probes: list[Probe], *, timeout_s: float, poll_interval_s: float = 1.0,
             what: str = "server", progress: Callable[[str], None] | None = None) -> ReadyInfo:
    """Run ``probes`` in order, each until it passes; ReadyInfo when the last one passed.

    Raises ServerDied (exit code + last log lines) as soon as the process/container exits,
    AuthRejected on 401/403, ReadinessTimeout after ``timeout_s``.
    """
    base = handle.base_url
    start = time.monotonic()
    seen = _Progress(start)
    stages: dict[str, float] = {}
    models: list[str] = []
    next_progress = start
    pending = list(probes)

    def advance(_remaining_s: float) -> ReadyInfo:
        """Run the pending probes in order; NotYet at the first that does not pass yet."""
        nonlocal models, next_progress
        while pending:
            if not handle.is_alive():
                raise handle.died(f"the {handle.kind} {what}")
            left = timeout_s - (time.monotonic() - start)
            if left <= 0:
                raise NotYet(pending[0].name)
            try:
                result = pending[0].check(max(1.0, min(pending[0].cap_s, left)))
            except requests.ConnectionError:
                result = ProbeResult(False, "not accepting connections yet (refused/reset)", answered=False)
            except _NOT_YET as exc:
                result = ProbeResult(False, type(exc).__name__, answered=False)
            except ValueError:
                result = ProbeResult(False, "non-JSON answer")
            seen.saw(result)
            if result.models is not None:
                models = result.models
            if not result.passed:
                if progress and time.monotonic() >= next_progress:
                    progress(f"waiting for {base} ({time.monotonic() - start:.0f}s; {seen.last_note or 'starting'})")
                    next_progress = time.monotonic() + 10.0
                raise NotYet(result.note)
            stages[pending.pop(0).name] = time.monotonic() - start
        return ReadyInfo(elapsed_s=time.monotonic() - start, models=models, stages_s=stages)

    try:
        return retry(f"{base} to be ready", advance, deadline_s=timeout_s, delay_s=poll_interval_s)
    except GaveUp:
        raise ReadinessTimeout(
            f"wait_ready: {base} not ready after {timeout_s:g} s (stage {pending[0].name}: "
            f"{seen.last_note or 'no answer'}; {seen.silence()}); log: {handle.log_path}") from None


def health_probe(base: str, bearer: str | None, path: str = "/health") -> Probe:
    def check(per_request_s: float) -> ProbeResult:
        resp = requests.get(f"{base}{path}", headers=bearer_headers(bearer), timeout=per_request_s)
        return ProbeResult(resp.status_code == 200, f"{path} HTTP {resp.status_code}")

    return Probe("health", check)


def models_probe(base: str, bearer: str | None, served_model_name: str, what: str = "server") -> Probe:
    """``/v1/models`` answers and lists the served name (a different list is final: wrong server)."""

    def check(per_request_s: float) -> ProbeResult:
        url = f"{base}/v1/models"
        resp = requests.get(url, headers=bearer_headers(bearer), timeout=per_request_s)
        check_auth(resp.status_code, url, bearer)
        if resp.status_code != 200:
            return ProbeResult(False, f"/v1/models HTTP {resp.status_code}")
        models = [m.get("id") for m in resp.json().get("data", [])]
        if served_model_name not in models:
            raise ServerStartError(f"the {what} at {base} serves {models}, not {served_model_name!r}")
        return ProbeResult(True, "/v1/models HTTP 200", models=models)

    return Probe("models", check)


def completion_probe(base: str, bearer: str | None, served_model_name: str) -> Probe:
    def check(per_request_s: float) -> ProbeResult:
        answer = one_token(base, served_model_name, bearer, per_request_s)
        if answer.status is None:
            return ProbeResult(False, f"1-token completion: {answer.text}", answered=False)
        check_auth(answer.status, answer.url, bearer)
        return ProbeResult(answer.ok, f"1-token completion HTTP {answer.status}: {answer.text[:200]}")

    return Probe("completion", check)


def llm_probes(handle: ServerHandle, bearer: str | None) -> list[Probe]:
    """An OpenAI-compatible LLM server: health, the model listed, one real 1-token completion."""
    return [health_probe(handle.base_url, bearer), models_probe(handle.base_url, bearer, handle.served_model_name),
            completion_probe(handle.base_url, bearer, handle.served_model_name)]


def wait_until_ready(handle: ServerHandle, *, bearer: str | None, timeout_s: float, poll_interval_s: float = 1.0,
                     progress: Callable[[str], None] | None = None) -> ReadyInfo:
    """Poll health -> models -> one real completion until all pass (``wait_for``'s rules)."""
    return wait_for(handle, llm_probes(handle, bearer), timeout_s=timeout_s, poll_interval_s=poll_interval_s,
                    progress=progress)
