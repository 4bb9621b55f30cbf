"""The one retry loop: backoff, the deadline, the attempt limit, and errors retrying cannot fix."""
from __future__ import annotations

import pytest

from contracts.retry import GaveUp, NotYet, retry


class FakeClock:
    """A clock that only moves when the retry loop sleeps or an attempt spends time."""

    def __init__(self):
        self.now, self.sleeps = 0.0, []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _attempts(results, clock=None, cost_s=0.0):
    calls = []

    def attempt(remaining_s):
        calls.append(remaining_s)
        if clock:
            clock.now += cost_s
        outcome = results.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome
    return attempt, calls


def test_returns_the_first_success_after_backoff_that_grows_to_its_cap():
    clock = FakeClock()
    attempt, calls = _attempts([NotYet("a"), NotYet("b"), NotYet("c"), "up"])
    lines = []
    assert retry("the thing", attempt, deadline_s=100, delay_s=1, backoff=2, max_delay_s=3, log=lines.append,
                 sleep=clock.sleep, clock=lambda: clock.now) == "up"
    assert clock.sleeps == [1, 2, 3] and len(calls) == 4 and calls[0] == 100
    assert lines[0] == "a; retrying in 1 s (attempt 1)" and lines[-1] == "the thing: succeeded on attempt 4"


def test_gives_up_at_the_deadline_naming_what_and_why_and_never_sleeps_past_it():
    clock = FakeClock()
    attempt, calls = _attempts([NotYet("refused")] * 10, clock, cost_s=30)
    with pytest.raises(GaveUp) as info:
        retry("port 1 to listen", attempt, deadline_s=70, delay_s=5, sleep=clock.sleep, clock=lambda: clock.now)
    assert calls == [70, 35] and clock.sleeps == [5, 5]  # the second sleep ends at the deadline: no third try
    assert clock.now == 70 and info.value.attempts == 2
    assert str(info.value).startswith("gave up waiting for port 1 to listen after") and "refused" in str(info.value)


def test_attempt_limit_and_errors_retrying_cannot_fix():
    clock = FakeClock()
    attempt, calls = _attempts([NotYet("x")] * 5)
    with pytest.raises(GaveUp) as info:
        retry("x", attempt, deadline_s=100, attempts=2, sleep=clock.sleep, clock=lambda: clock.now)
    assert info.value.attempts == 2 and clock.sleeps == [0.1]
    attempt, calls = _attempts([NotYet("x"), ValueError("401")])
    with pytest.raises(ValueError, match="401"):
        retry("x", attempt, deadline_s=100, sleep=clock.sleep, clock=lambda: clock.now)
    assert len(calls) == 2
