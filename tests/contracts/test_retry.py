"""The one retry loop: backoff, the deadline, the attempt limit, and errors retrying cannot fix."""
from __future__ import annotations

import pytest

from contracts.retry import GaveUp, NotYet, retry, wait_http_ok


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


def test_wait_http_ok_waits_through_other_statuses_and_stops_when_the_process_is_gone():
    import http.server
    import threading

    class Health(http.server.BaseHTTPRequestHandler):
        """FAKE /health: 503 twice, then 200."""
        answers = [503, 503]

        def do_GET(self):  # noqa: N802
            self.send_response(self.answers.pop(0) if self.answers else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/health"
    try:
        wait_http_ok("the fake to be healthy", url, deadline_s=10, delay_s=0.01)
        assert Health.answers == []

        def exited():
            raise RuntimeError("server exited (1)")
        with pytest.raises(RuntimeError, match="exited"):
            wait_http_ok("the fake to be healthy", url, deadline_s=10, alive_check=exited)
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(GaveUp, match="refused"):
        wait_http_ok("nothing", url, deadline_s=0.3, delay_s=0.05)
