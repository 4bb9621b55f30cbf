"""Drift decided on intervals, the closed-loop over-saturation rule, and the media load driver.

The media driver is exercised with a named fake workload (``SlowingWorkload``: each answer takes a
programmed time, no server) so its stop and classification rules can be checked exactly; the
real media server is exercised in ``test_media_stress.py``.
"""
from __future__ import annotations

import random
import threading
import time

from benchmarking.metrics import RequestRecord
from media_clients.transport import Answer
from media_clients.workloads import Sent, Workload
from stress_tests.drift import latency_drift, memory_drift
from stress_tests.driver import STOPPED_EARLY, Load
from stress_tests.media_driver import drive_media
from stress_tests.saturation import SaturationDetector


def _records(latencies_s: list[float], duration_s: float) -> list[RequestRecord]:
    """Requests ending evenly over ``duration_s`` with the given latencies."""
    out = []
    for i, lat in enumerate(latencies_s):
        end = duration_s * (i + 1) / len(latencies_s)
        out.append(RequestRecord(index=i, request_id=str(i), prompt_len=0, requested_output_len=0,
                                 send_time=end - lat, success=True, latency=lat, ttft=lat))
    return out


def test_latency_drift_passes_flat_fails_rising_and_leaves_few_samples_undecided():
    rng = random.Random(1)
    flat = [0.1 + rng.random() * 0.02 for _ in range(8000)]
    d = latency_drift(_records(flat, 1000.0), 1000.0, 5.0, 20.0)
    assert d.decision == "pass" and d.first_n > 1500 and d.ci_pct[1] < 20 and len(d.slices) == 4
    rising = [0.1 * (1 + i / 8000) + rng.random() * 0.01 for i in range(8000)]   # doubles over the run
    d = latency_drift(_records(rising, 1000.0), 1000.0, 5.0, 20.0)
    assert d.decision == "fail" and d.ci_pct[0] > 20
    d = latency_drift(_records(rising[:80], 60.0), 60.0, 5.0, 20.0)
    assert d.decision == "inconclusive" and d.ci_pct is None and "cannot bound a p99" in d.detail


def test_memory_growth_after_warmup_decided_on_the_slope_interval():
    warm = [(t, 500e6 if t < 5 else 400e6) for t in range(0, 5)]       # warm-up spike, left out
    flat = warm + [(t, 400e6 + (t % 3) * 1e5) for t in range(5, 120, 5)]
    m = memory_drift(flat, 120.0, 5.0, 10.0)
    assert m.decision == "pass" and abs(m.growth_pct) < 1 and m.baseline_mb == 400.0 and m.n >= 20
    leak = warm + [(t, 400e6 * (1 + 0.002 * t)) for t in range(5, 120, 5)]   # +23% by the end
    m = memory_drift(leak, 120.0, 5.0, 10.0)
    assert m.decision == "fail" and m.ci_pct[0] > 10
    m = memory_drift(leak[:9], 120.0, 5.0, 10.0)   # two samples after the 12 s warm-up
    assert m.decision == "inconclusive" and "a line needs 4" in m.detail


def test_closed_loop_detector_fires_on_latency_doubling_not_on_noise():
    steady, falling_behind = SaturationDetector(closed_loop=True), SaturationDetector(closed_loop=True)
    rng = random.Random(2)
    for k in range(200):
        t = k * 0.1
        for det in (steady, falling_behind):
            det.add_concurrency(t, 4)
        steady.add_ttft(t, 500 + rng.random() * 200)
        falling_behind.add_ttft(t, 500 * (1 + t / 5))
    assert not steady.check(20.0).fired
    verdict = falling_behind.check(20.0)
    assert verdict.fired and "falls behind its own pace" in verdict.reason
    # The open-loop rule stays quiet on the same series: its in-flight count is flat.
    open_loop = SaturationDetector()
    for k in range(200):
        open_loop.add_concurrency(k * 0.1, 4)
        open_loop.add_ttft(k * 0.1, 500 * (1 + k * 0.1 / 5))
    assert not open_loop.check(20.0).fired


class SlowingWorkload(Workload):
    """A fake media workload (no server): request i sleeps ``base_s * (1 + i * growth)`` and answers 200,
    or fails with http_503 when ``i`` is in ``fail``."""

    def __init__(self, base_s: float, growth: float = 0.0, fail: frozenset = frozenset()) -> None:
        super().__init__("embedding", "/v1/embeddings", {"batch_items": 3})
        self.base_s, self.growth, self.fail = base_s, growth, fail

    def send(self, http, model, index):
        time.sleep(self.base_s * (1 + index * self.growth))
        if index in self.fail:
            return Sent(Answer("fake://", 503, b"{}", self.base_s, "http_503", "busy"), 3, 0.0, "http_503", "busy")
        return Sent(Answer("fake://", 200, b"{}", self.base_s), 3)


def test_media_driver_counts_items_failures_windows_and_memory():
    samples = iter(range(1, 1000))
    run = drive_media(SlowingWorkload(0.02, fail=frozenset({3, 5})), None, "m", Load(2, None, duration_s=1.2),
                      tag="t", window_s=0.3, memory=lambda: float(next(samples)))
    failed = [r for r in run.records if r.error_class == "http_503"]
    ok = [r for r in run.records if r.success]
    assert len(failed) == 2 and len(ok) > 20 and all(r.output_tokens == 3 and r.latency >= 0.02 for r in ok)
    assert len(run.windows) >= 3 and all(w.memory_bytes for w in run.windows) and run.stopped_reason is None
    assert 1.2 <= run.duration_s < 3


def test_media_driver_stops_a_closed_loop_that_falls_behind_and_cuts_what_is_in_flight():
    detector = SaturationDetector(window_s=2.0, min_samples=6, min_elapsed_s=1.0, closed_loop=True)
    started = time.monotonic()
    run = drive_media(SlowingWorkload(0.01, growth=0.25), None, "m", Load(2, 400), tag="s", window_s=0.5,
                      detector=detector)
    assert run.saturation.fired and "falls behind" in run.stopped_reason
    assert run.not_sent > 300 and time.monotonic() - started < 30
    cut = [r for r in run.records if r.error_class == STOPPED_EARLY]
    assert all(not r.success for r in cut) and not any(r.error_class is None and not r.success for r in run.records)


def test_media_driver_open_loop_counts_arrivals_over_the_cap_as_not_sent():
    lock, in_flight, peak = threading.Lock(), [0], [0]

    class Counting(SlowingWorkload):
        def send(self, http, model, index):
            with lock:
                in_flight[0] += 1
                peak[0] = max(peak[0], in_flight[0])
            try:
                return super().send(http, model, index)
            finally:
                with lock:
                    in_flight[0] -= 1

    run = drive_media(Counting(0.2), None, "m", Load(2, 40, request_rate=100.0), tag="o", window_s=0.5)
    assert peak[0] <= 2 and run.not_sent > 20 and len(run.records) + run.not_sent == 40
