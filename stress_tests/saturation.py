"""Over-saturation detector: stop a load point once the server has stopped keeping up (stdlib only).

Why two series: a server past its capacity queues work, so in an open-loop run the number of
requests in flight keeps growing AND each new request waits longer for its first token. Either
slope alone is weak evidence (TTFT drifts with prompt mix; in-flight count wobbles with arrival
noise); both significantly positive over a sliding window is the signature of saturation. Over the
last ``window_s`` seconds we fit a least-squares line to each series and call a slope
significantly positive when its lower confidence bound (slope - t * standard error, one-sided)
is above zero, and materially positive when that lower bound, over the window, adds at least 10%
to the mean TTFT and at least one request in flight (a tiny but real trend is not saturation).

Closed loop (``closed_loop=True``): with a fixed number of requests in flight the in-flight series is
flat by construction and throughput is concurrency / latency, so a server falling behind its own
pace shows as first-token (media: end-to-end) latency rising at a constant load. There the
detector fires on the latency series alone, with a stronger materiality bar so that ordinary
noise of a shared machine cannot trip it: the lower bound of the rise over the window must reach
``CLOSED_LOOP_RISE`` (100%) of the mean latency: latency doubling within the window. Endurance
points run without the detector: their drift checks judge a rising latency over the whole run.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

CLOSED_LOOP_RISE = 1.0  # closed loop: the latency rise over a window that counts as falling behind
# One-sided 99% Student-t critical values by degrees of freedom (normal beyond the table).
_T99 = {1: 31.82, 2: 6.965, 3: 4.541, 4: 3.747, 5: 3.365, 6: 3.143, 7: 2.998, 8: 2.896, 9: 2.821,
        10: 2.764, 12: 2.681, 15: 2.602, 20: 2.528, 25: 2.485, 30: 2.457, 40: 2.423, 60: 2.390, 120: 2.358}


def t_critical(df: int) -> float:
    """One-sided 99% critical value for ``df`` degrees of freedom (the next smaller tabled df)."""
    if df < 1:
        return math.inf
    best = max(k for k in _T99 if k <= df) if df < 120 else None
    return _T99[best] if best is not None else 2.326


@dataclass
class Slope:
    """Least-squares slope of y over t, its standard error and its one-sided lower bound."""

    slope: float
    stderr: float
    lower: float
    n: int


def fit_slope(points: list[tuple[float, float]]) -> Slope | None:
    """Slope per second of (t, y) points; None with fewer than 4 points or no spread in t."""
    n = len(points)
    if n < 4:
        return None
    mt = sum(t for t, _ in points) / n
    my = sum(y for _, y in points) / n
    stt = sum((t - mt) ** 2 for t, _ in points)
    if stt <= 0:
        return None
    slope = sum((t - mt) * (y - my) for t, y in points) / stt
    resid = sum((y - my - slope * (t - mt)) ** 2 for t, y in points)
    stderr = math.sqrt(resid / (n - 2) / stt)
    return Slope(slope, stderr, slope - t_critical(n - 2) * stderr, n)


@dataclass
class SaturationVerdict:
    fired: bool
    reason: str
    at_s: float | None = None
    ttft_slope_ms_per_s: float | None = None
    concurrency_slope_per_s: float | None = None


class SaturationDetector:
    """Feed it first-token latencies and in-flight counts as they happen; ask ``check(now)``."""

    def __init__(self, window_s: float = 20.0, min_samples: int = 8, min_elapsed_s: float = 10.0,
                 closed_loop: bool = False):
        self.window_s, self.min_samples, self.min_elapsed_s = window_s, min_samples, min_elapsed_s
        self.closed_loop = closed_loop
        self.ttft: deque[tuple[float, float]] = deque()
        self.concurrency: deque[tuple[float, float]] = deque()

    def add_ttft(self, t: float, ttft_ms: float) -> None:
        self.ttft.append((t, ttft_ms))

    def add_concurrency(self, t: float, in_flight: float) -> None:
        self.concurrency.append((t, in_flight))

    def _trim(self, now: float) -> None:
        for series in (self.ttft, self.concurrency):
            while series and series[0][0] < now - self.window_s:
                series.popleft()

    def check(self, now: float) -> SaturationVerdict:
        self._trim(now)
        if now < self.min_elapsed_s or len(self.ttft) < self.min_samples or len(self.concurrency) < self.min_samples:
            return SaturationVerdict(False, "not enough samples yet")
        ttft, con = fit_slope(list(self.ttft)), fit_slope(list(self.concurrency))
        if ttft is None or con is None:
            return SaturationVerdict(False, "no spread in time yet")
        mean_ttft = sum(v for _, v in self.ttft) / len(self.ttft)
        if self.closed_loop:
            fired = ttft.lower > 0 and ttft.lower * self.window_s >= CLOSED_LOOP_RISE * mean_ttft
            reason = (f"over-saturated at {now:.1f} s: at a fixed concurrency, over the last {self.window_s:g} s "
                      f"latency rose {ttft.slope:.1f} ms/s (99% lower bound {ttft.lower:.1f}, at least "
                      f"{CLOSED_LOOP_RISE:.0%} of its mean {mean_ttft:.0f} ms): the server falls behind its own pace"
                      ) if fired else "keeping up"
            return SaturationVerdict(fired, reason, now if fired else None, ttft.slope, con.slope)
        fired = (ttft.lower > 0 and con.lower > 0 and ttft.lower * self.window_s >= 0.1 * mean_ttft
                 and con.lower * self.window_s >= 1.0)
        reason = (f"over-saturated at {now:.1f} s: over the last {self.window_s:g} s TTFT rose "
                  f"{ttft.slope:.1f} ms/s (99% lower bound {ttft.lower:.1f}) and requests in flight rose "
                  f"{con.slope:.2f}/s (lower bound {con.lower:.2f})") if fired else "keeping up"
        return SaturationVerdict(fired, reason, now if fired else None, ttft.slope, con.slope)
