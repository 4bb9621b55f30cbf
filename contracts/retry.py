"""The one retry loop: call an attempt until it succeeds, with backoff, under one deadline (stdlib only).

Every wait in the repository that tries something again (a server coming up, a port opening, a
probe that met a 5xx) goes through ``retry``, so each one has a deadline, names what it waits for,
and says why it gave up. The attempt decides what is worth another try:

* it returns a value: done, ``retry`` returns it;
* it raises ``NotYet(reason)``: try again after the current delay (the delay grows by ``backoff``
  up to ``max_delay_s`` and never sleeps past the deadline); ``reason`` is kept for the message;
* it raises anything else: what retrying cannot fix (the process died, HTTP 401) ends the wait
  at once, the exception propagating as is.

When the deadline or ``attempts`` runs out, ``GaveUp`` carries what was awaited, the last reason
and the attempt count; callers turn it into their own error (exit 2, a failed case, a message).
The first attempt is always made; a later one only while time is left, and it is told how much
(``attempt(remaining_s)``) so a request's own timeout can stay inside the deadline.

Why not tenacity: it is not in every venv that retries (the orchestrator, the media clients, the
scripts), and contracts/ is imported by all of them as is, with the standard library only.
The media server's benchmarks and tests import it from the repository root too; the server package
itself (tt-media-server/media_server, shipped alone in its image) waits on nothing by retrying, so
it needs no copy (its gateway's one replay of a request on a stale keep-alive connection is not a wait).
"""
from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class NotYet(Exception):
    """Raised by an attempt that may succeed later; the text says why it did not this time."""


class GaveUp(RuntimeError):
    """The deadline or the attempt limit ran out before an attempt succeeded."""

    def __init__(self, waiting_for: str, reason: str, attempts: int, elapsed_s: float):
        self.waiting_for, self.reason, self.attempts, self.elapsed_s = waiting_for, reason, attempts, elapsed_s
        super().__init__(f"gave up waiting for {waiting_for} after {attempts} attempt(s) in {elapsed_s:.0f} s: "
                         f"{reason}")


def retry(
    waiting_for: str,
    attempt: Callable[[float], T],
    *,
    deadline_s: float,
    delay_s: float = 0.1,
    backoff: float = 1.0,
    max_delay_s: float = 10.0,
    attempts: int | None = None,
    log: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``attempt(remaining_s)`` until it returns (see the module docstring); ``GaveUp`` when time or tries run out.

    ``waiting_for`` completes "waiting for ...", e.g. "the media server to answer /health on port 8000".
    ``log`` (optional) gets one line per retry and one when a retried wait succeeds.
    """
    started = clock()
    delay = delay_s
    made = 0
    reason = "no attempt made"
    while True:
        remaining = deadline_s - (clock() - started)
        if made and remaining <= 0:
            break
        made += 1
        try:
            result = attempt(max(0.0, remaining))
        except NotYet as exc:
            reason = str(exc) or "not yet"
        else:
            if made > 1 and log:
                log(f"{waiting_for}: succeeded on attempt {made}")
            return result
        if attempts is not None and made >= attempts:
            break
        left = deadline_s - (clock() - started)
        if left <= 0:
            break
        wait = min(delay, left)
        if log:
            of = f" of {attempts}" if attempts is not None else ""
            log(f"{reason}; retrying in {wait:.3g} s (attempt {made}{of})")
        if wait > 0:
            sleep(wait)
        delay = min(delay * backoff, max_delay_s)
    raise GaveUp(waiting_for, reason, made, clock() - started)


def wait_http_ok(
    waiting_for: str,
    url: str,
    *,
    deadline_s: float,
    alive_check: Callable[[], None] | None = None,
    delay_s: float = 0.1,
    request_timeout_s: float = 2.0,
) -> None:
    """GET ``url`` until it answers HTTP 200, through ``retry`` (a refused connection or another
    status is "not yet"). ``alive_check()`` runs before every try and raises the caller's own error
    once the process behind the URL has exited, so a dead server ends the wait at once."""

    def answered(remaining_s: float) -> None:
        if alive_check is not None:
            alive_check()
        try:
            with urllib.request.urlopen(url, timeout=min(request_timeout_s, max(remaining_s, 0.1))) as resp:
                status = resp.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except OSError as exc:
            raise NotYet(str(getattr(exc, "reason", exc))) from None
        if status != 200:
            raise NotYet(f"HTTP {status}")

    retry(waiting_for, answered, deadline_s=deadline_s, delay_s=delay_s)
