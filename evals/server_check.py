"""Is the server there and answering? One tiny request, retried with backoff, under one deadline.

Used before the first task (the preflight) and between tasks (no task is started against a server
that is already gone). Transient answers (HTTP 5xx/408/429, refused or reset connections,
timeouts) are retried with exponential backoff; answers that retrying cannot fix (401, 404, a
wrong model name) end the check at once. The message is one line that names the URL and the
cause, without timings, so the same fault reads the same on every run.

Stdlib only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from contracts.openai_http import one_token
from contracts.retry import GaveUp, NotYet, retry
from evals.lm_eval_command import api_root

#: Retries of the probe: attempts, first backoff (doubles each time), and the overall deadline.
ATTEMPTS = 4
FIRST_BACKOFF_S = 1.0
DEADLINE_S = 180.0
REQUEST_TIMEOUT_S = 60.0
_TRANSIENT_HTTP = {408, 425, 429}


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    detail: str  # one line; empty when ok
    transient: bool = False


def _one_line(text: str, limit: int = 200) -> str:
    return " ".join(text.split())[:limit]


def probe_once(root: str, model: str, bearer: str | None, use_chat: bool, timeout_s: float) -> ProbeResult:
    """One 1-token request (``contracts.openai_http.one_token``), judged: ok, transient or final."""
    answer = one_token(root, model, bearer, timeout_s, chat=use_chat)
    if answer.ok:
        return ProbeResult(True, "")
    if answer.silent:
        return ProbeResult(False, f"no answer from {answer.url} within {timeout_s:.0f} s", True)
    if answer.status is None:
        reason = _one_line(answer.text.removeprefix("cannot connect: "))
        return ProbeResult(False, f"cannot connect to {root}: {reason}", True)
    detail = f"server answered HTTP {answer.status} to a 1-token request at {answer.url}: {_one_line(answer.text)}"
    if answer.status == 200:
        return ProbeResult(False, f"server at {answer.url} answered a 1-token request without a choice: "
                                  f"{_one_line(answer.text)}")
    return ProbeResult(False, detail, answer.status >= 500 or answer.status in _TRANSIENT_HTTP)


def check_server(
    server_url: str,
    model: str,
    bearer: str | None,
    use_chat: bool,
    *,
    attempts: int = ATTEMPTS,
    first_backoff_s: float = FIRST_BACKOFF_S,
    deadline_s: float = DEADLINE_S,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    log: Callable[[str], None] = lambda _msg: None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> str | None:
    """None when a 1-token request is answered; else one line saying why not (after retries)."""
    root = api_root(server_url)

    def attempt(remaining_s: float) -> ProbeResult:
        result = probe_once(root, model, bearer, use_chat, min(request_timeout_s, remaining_s))
        if result.transient:
            raise NotYet(result.detail)
        return result  # ok, or an answer retrying cannot fix

    try:
        result = retry(f"{root} to answer a 1-token request", attempt, deadline_s=deadline_s,
                       delay_s=first_backoff_s, backoff=2.0, max_delay_s=deadline_s, attempts=attempts,
                       log=log, sleep=sleep, clock=clock)
    except GaveUp as exc:
        return f"{exc.reason} (gave up after {exc.attempts} attempts)"
    return None if result.ok else result.detail
