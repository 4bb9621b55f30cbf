"""Drift decided on intervals, the closed-loop over-saturation rule, and the media load driver.

The media driver is exercised with a named fake workload (``SlowingWorkload``: each answer takes a
programmed time, no server) so its stop and classification rules can be checked exactly; the
real media server is exercised in ``test_media_stress.py``.
"""
from __future__ import annotations

import random
import threading
import time

import pytest

from benchmarking.metrics import RequestRecord
from contracts.intervals import quantile_interval
from media_clients.transport import Answer
from media_clients.workloads import Sent, Workload
from stress_tests.drift import (GMEAN, SLICE_TAIL, choose, gmean_ratio_interval, latency_drift, memory_drift,
                                memory_warmup_seconds)
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


def test_latency_drift_judges_the_p99_over_four_slices_when_a_long_run_holds_enough_requests():
    rng = random.Random(1)
    flat = [0.1 + rng.random() * 0.02 for _ in range(8000)]
    d = latency_drift(_records(flat, 1000.0), 1000.0, 5.0, 20.0)
    assert (d.statistic, len(d.slices)) == ("p99", 4) and d.first_n > 1500
    assert d.decision == "pass" and d.ci_pct[1] < 20 and d.drift_pct == d.p99_drift_pct
    rising = [0.1 * (1 + i / 8000) + rng.random() * 0.01 for i in range(8000)]   # doubles over the run
    d = latency_drift(_records(rising, 1000.0), 1000.0, 5.0, 20.0)
    assert d.statistic == "p99" and d.decision == "fail" and d.ci_pct[0] > 20


def _minute(slower_from_s: float | None = None, n: int = 60, seed: int = 3) -> list[RequestRecord]:
    """``n`` requests ending evenly over 60 s, latency 1 s +-5% (a steady speech server at concurrency
    2); the ones ending from ``slower_from_s`` on take 1.5 times as long."""
    rng = random.Random(seed)
    lat = [1.0 + (rng.random() - 0.5) * 0.1 for _ in range(n)]
    lat = [x * 1.5 if slower_from_s is not None and 60.0 * (i + 1) / n >= slower_from_s else x
           for i, x in enumerate(lat)]
    return _records(lat, 60.0)


def test_a_steady_minute_of_60_requests_is_decided_pass_on_the_halves_geometric_means():
    d = latency_drift(_minute(), 60.0, 5.0, 20.0)
    # 27 requests per half after the 6 s warm-up: too few for a p90 (100 per slice), enough for the halves'
    # geometric means (10 each)
    assert (d.statistic, len(d.slices), d.first_n + d.last_n) == (GMEAN, 2, 54)
    assert d.decision == "pass" and -20 < d.ci_pct[0] <= d.drift_pct <= d.ci_pct[1] < 20
    assert d.first_ms == d.slices[0]["gmean_ms"] and 950 < d.first_ms < 1050
    assert "geometric mean, first vs last of 2 slices" in d.detail and d.first_p99_ms is not None


def test_a_minute_whose_last_half_is_half_again_slower_is_decided_fail():
    d = latency_drift(_minute(slower_from_s=33.0), 60.0, 5.0, 20.0)   # 33 s: where the last half starts
    assert (d.statistic, len(d.slices)) == (GMEAN, 2)
    assert d.decision == "fail" and 20 < d.ci_pct[0] and 45 < d.drift_pct < 55


def test_six_requests_stay_inconclusive_and_say_how_many_a_decision_needs():
    d = latency_drift(_minute(n=6), 60.0, 5.0, 20.0)
    assert d.statistic is None and d.decision == "inconclusive" and d.ci_pct is None
    assert d.first_ms is d.last_ms is d.drift_pct is None   # nothing judged: no judged figure is claimed
    assert d.first_n + d.last_n == 5 and "too few to judge even their geometric means (10 per half" in d.detail


def test_the_judged_statistic_comes_from_request_counts_alone():
    assert choose({4: (1000, 1000), 3: (1400, 1300), 2: (2000, 2000)}) == ("p99", 4)
    assert choose({4: (999, 1000), 3: (1300, 1300), 2: (2000, 2000)}) == ("p99", 3)   # p99 first, then slices
    assert choose({4: (150, 150), 3: (200, 200), 2: (300, 300)}) == ("p95", 3)
    assert choose({4: (60, 60), 3: (80, 80), 2: (100, 120)}) == ("p90", 2)
    assert choose({4: (5, 5), 3: (7, 6), 2: (10, 30)}) == (GMEAN, 2)
    assert choose({4: (5, 5), 3: (7, 6), 2: (9, 30)}) is None


def test_the_geometric_mean_drift_holds_its_95_percent_coverage_and_decides_steady_minutes():
    """Simulated minutes (60 requests, lognormal latencies spread as on a loaded 2-core machine: sd of log
    latency 0.25) whose true drift sits exactly on the 20% limit: a pass or a fail would both be wrong,
    and together they stay near the 5% a 95% interval allows (300 runs: 15 expected, 26 is 3 sd above).
    The same noise without drift is mostly decided pass, which the halves' medians (order-statistic
    intervals) would rarely do at 27 requests each."""
    wrong = steady_passed = median_passed = 0
    for seed in range(300):
        rng = random.Random(seed)
        noise = [rng.lognormvariate(0, 0.25) for _ in range(60)]
        at_limit = [x * 1.2 if i + 1 >= 33 else x for i, x in enumerate(noise)]   # the last half, 20% slower
        d = latency_drift(_records(at_limit, 60.0), 60.0, 5.0, 20.0)
        assert d.statistic == GMEAN
        wrong += d.decision != "inconclusive"
        steady = latency_drift(_records(noise, 60.0), 60.0, 5.0, 20.0)
        steady_passed += steady.decision == "pass"
        first, last = noise[6:33], noise[33:]
        a, b = quantile_interval(first, 0.5, SLICE_TAIL), quantile_interval(last, 0.5, SLICE_TAIL)
        median_passed += b.high / a.low - 1 <= 0.2   # the medians' drift interval wholly under the limit
    assert wrong <= 26 and steady_passed >= 150 and median_passed <= steady_passed / 4, (
        wrong, steady_passed, median_passed)


def test_the_geometric_mean_interval_is_welchs_t_on_log_latency():
    ratio, ci = gmean_ratio_interval([1.0, 2.0, 4.0], [2.0, 4.0, 8.0])
    assert ratio == pytest.approx(2.0) and ci.low < 2.0 < ci.high and ci.low * ci.high == pytest.approx(4.0)
    assert gmean_ratio_interval([1.0], [2.0, 3.0]) is None and gmean_ratio_interval([0.0, 1.0], [1.0, 2.0]) is None
    ratio, ci = gmean_ratio_interval([3.0, 3.0], [3.0, 3.0])
    assert ratio == ci.low == ci.high == 1.0


def _endurance_point(records: list[RequestRecord]):
    """The judge's record of a 60 s speech endurance point over ``records``, memory flat at 400 MB."""
    from stress_tests.args import parse_stress_args
    from stress_tests.driver import LoadRun, Window
    from stress_tests.judge import point_record
    from stress_tests.run_media_stress import MediaStressPoint

    windows = [Window(float(t), 5, 0, 2, None, None, 1000.0, 400e6 + (t % 10) * 1e4) for t in range(5, 65, 5)]
    run = LoadRun(records=records, duration_s=60.0, windows=windows)
    point = MediaStressPoint("speech", 2, 0, "endurance", 60.0)
    return point_record(point.name, "endurance", point, run, parse_stress_args({"run_mode": "endurance"}),
                        "2026-01-01T00:00:00Z", "process_tree", "local server pid 1", kind="speech")


def test_the_record_names_the_judged_percentile_and_its_decision():
    rec = _endurance_point(_minute())
    lat, d = rec.checks["latency_drift_pct"], rec.drift
    assert (lat["statistic"], lat["decision"], lat["passed"]) == (GMEAN, "pass", True)
    assert (d.latency_statistic, d.latency_decision, len(d.slices)) == (GMEAN, "pass", 2)
    assert d.latency_judged_drift_ci == lat["ci95"] and d.latency_p99_drift_ci is None   # the p99 was not judged
    assert d.latency_judged_first_ms == d.slices[0]["gmean_ms"] and d.latency_p99_first_ms == d.slices[0]["p99_ms"]
    assert rec.checks["memory_growth_pct"]["decision"] == "pass" and rec.status == "passed"
    assert "latency geometric mean, first vs last of 2 slices" in rec.detail
    few = _endurance_point(_minute(n=6))
    assert few.drift.latency_statistic is None and few.checks["latency_drift_pct"]["passed"] is None
    assert (few.status, few.passed) == ("inconclusive", None)


def test_memory_growth_after_warmup_decided_on_the_slope_interval():
    warm = [(t, 500e6 if t < 5 else 400e6) for t in range(0, 5)]       # warm-up spike, left out
    flat = warm + [(t, 400e6 + (t % 3) * 1e5) for t in range(5, 120, 5)]
    m = memory_drift(flat, 120.0, 5.0, 10.0)
    # judged from 20 s on (MIN_MEMORY_WARMUP_S, longer than the latency's 12 s): the first sample there is 400.2 MB
    assert m.decision == "pass" and abs(m.growth_pct) < 1 and m.baseline_mb == 400.2 and m.n == 20
    assert m.warmup_s == 20.0 and memory_warmup_seconds(60.0, 5.0) == 20.0 and memory_warmup_seconds(30.0, 5.0) == 10.0
    assert memory_warmup_seconds(1800.0, 10.0) == 180.0   # a long run's tenth is longer
    leak = warm + [(t, 400e6 * (1 + 0.002 * t)) for t in range(5, 120, 5)]   # +23% by the end
    m = memory_drift(leak, 120.0, 5.0, 10.0)
    assert m.decision == "fail" and m.ci_pct[0] > 10
    m = memory_drift(leak[:9], 120.0, 5.0, 10.0)   # one sample after the 20 s warm-up
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
