"""Stress-test logic without a server: mode expansion, the context limit, the over-saturation
detector on synthetic series, and the capacity search on a simulated server of known capacity."""
from __future__ import annotations

import math
import random

import pytest

from stress_tests.args import Slo, StressArgError, parse_slos, parse_stress_args
from stress_tests.capacity import LevelSamples, judge_level, request_is_good, search_capacity, wilson_interval
from stress_tests.plan import CONTEXT_RESERVE, enforce_context_limit, expand
from stress_tests.saturation import SaturationDetector, fit_slope
from tests.helpers import model_spec

SPEC = model_spec(device_model_spec={"max_context": 2048, "max_concurrency": 4})


# ------------------------------------------------------------------------------ context limit

@pytest.mark.parametrize("isl,osl,ctx,expected", [
    (100, 28, 128, (100, 28, False)),          # exactly fits
    (2048, 128, 2048, (1927, 121, True)),      # both shrink by 2048/2176
    (1536, 2048, 2048, (877, 1171, True)),     # proportions kept: 1536/3584 of 2048 = 877.7
    (5000, 1, 100, (99, 1, True)),             # each keeps at least one token
])
def test_enforce_context_limit(isl, osl, ctx, expected):
    got = enforce_context_limit(isl, osl, ctx)
    assert got == expected
    assert got[0] + got[1] <= ctx and got[0] >= 1 and got[1] >= 1


def test_enforce_context_limit_rejects_no_room():
    with pytest.raises(ValueError):
        enforce_context_limit(1, 1, 1)


# ------------------------------------------------------------------------------ mode expansion

def test_single_mode_defaults_by_size():
    (p,) = expand(parse_stress_args({"mode": "smoke", "run_mode": "single"}), SPEC)
    assert (p.isl, p.osl, p.concurrency, p.num_prompts, p.rescaled) == (128, 32, 1, 2, False)
    (p,) = expand(parse_stress_args({"mode": "smoke", "run_mode": "single", "input_size": "4000",
                                     "output_size": "100", "max_concurrent": "3"}), SPEC)
    assert p.rescaled and p.requested_isl == 4000 and p.isl + p.osl == 2048 - CONTEXT_RESERVE
    assert p.concurrency == 3 and p.num_prompts == 3


def test_multiple_mode_is_the_cross_product_within_context():
    points = expand(parse_stress_args({"mode": "ci", "run_mode": "multiple"}), SPEC)
    assert {p.concurrency for p in points} == {1, 2, 4}
    assert all(p.num_prompts == p.concurrency for p in points)
    assert all(p.isl + p.osl <= 2048 - CONTEXT_RESERVE for p in points)
    # 5 ISL fractions x 2 OSLs x 3 concurrencies, minus the points a rescale merged
    assert len(points) == len({p.name for p in points}) <= 30
    assert any(p.rescaled and p.requested_isl == 2048 for p in points)
    assert any(p.isl == round(0.1 * 2048) and p.osl == 128 and not p.rescaled for p in points)


def test_custom_mode_fractions_and_tokens():
    args = parse_stress_args({"mode": "smoke", "run_mode": "custom", "custom_isl_values": "0.25,300",
                              "custom_osl_values": "16", "custom_concurrency_values": "1,2"})
    points = expand(args, SPEC)
    assert sorted((p.isl, p.osl, p.concurrency) for p in points) == [
        (300, 16, 1), (300, 16, 2), (512, 16, 1), (512, 16, 2)]


def test_endurance_mode_is_timed_at_max_concurrency():
    (p,) = expand(parse_stress_args({"mode": "smoke", "run_mode": "endurance", "endurance_s": "12"}), SPEC)
    assert p.duration_s == 12 and p.concurrency == 4 and p.num_prompts == 0 and "dur-12s" in p.name


@pytest.mark.parametrize("raw", [{"run_mode": "sideways"}, {"run_mode": "custom"}, {"slo": "ttft:10"},
                                 {"slo": "latency_p99:10"}, {"goodput_goal": "2"}, {"custom_osl_values": "0"},
                                 {"max_concurrent": "x"}])
def test_bad_args_are_refused(raw):
    with pytest.raises(StressArgError):
        parse_stress_args(raw)


def test_keys_of_other_workflows_are_ignored():
    assert parse_stress_args({"points": "1x2x3x4", "markers": "auth"}).ignored_keys == ["markers", "points"]


def test_parse_slos():
    assert parse_slos("ttft_p99:2000,tpot_p99:150") == [Slo("ttft", 99, 2000), Slo("tpot", 99, 150)]
    assert request_is_good({"ttft": 1999.0, "tpot": None}, parse_slos("ttft_p99:2000,tpot_p99:150"))
    assert not request_is_good({"ttft": 2001.0, "tpot": 1.0}, parse_slos("ttft_p99:2000"))


# ------------------------------------------------------------------------------ saturation detector

def _feed(detector: SaturationDetector, ttft_at, conc_at, seconds: int, per_s: int = 2) -> list[bool]:
    fired = []
    for step in range(seconds * per_s):
        t = step / per_s
        detector.add_ttft(t, ttft_at(t))
        detector.add_concurrency(t, conc_at(t))
        fired.append(detector.check(t).fired)
    return fired


def test_saturation_fires_on_rising_ttft_and_concurrency():
    rng = random.Random(1)
    det = SaturationDetector(window_s=20, min_samples=8, min_elapsed_s=10)
    fired = _feed(det, lambda t: 200 + 40 * t + rng.gauss(0, 60), lambda t: 2 + 0.5 * t + rng.gauss(0, 1), 60)
    assert any(fired)
    first = fired.index(True) / 2
    assert 10 <= first <= 25, first
    verdict = det.check(59.5)
    assert verdict.fired and "over-saturated" in verdict.reason and verdict.ttft_slope_ms_per_s > 0


@pytest.mark.parametrize("seed", range(10))
def test_saturation_quiet_on_flat_noisy_series(seed):
    rng = random.Random(seed)
    det = SaturationDetector(window_s=20, min_samples=8, min_elapsed_s=10)
    fired = _feed(det, lambda t: 500 + rng.gauss(0, 150), lambda t: 8 + rng.gauss(0, 2), 120)
    assert not any(fired)


def test_saturation_needs_both_slopes():
    rng = random.Random(3)
    det = SaturationDetector()
    # TTFT rises (longer prompts, say) but the in-flight count is flat (a closed loop): not saturation
    assert not any(_feed(det, lambda t: 200 + 50 * t + rng.gauss(0, 20), lambda t: 4.0, 60))


def test_fit_slope():
    s = fit_slope([(t, 3.0 * t + 1) for t in range(10)])
    assert math.isclose(s.slope, 3.0) and s.stderr == pytest.approx(0.0, abs=1e-9)
    assert fit_slope([(0, 1), (1, 2)]) is None


# ------------------------------------------------------------------------------ capacity search

SLOS = parse_slos("ttft_p99:1000,tpot_p99:100")


class SimulatedServer:
    """Latency that is comfortable up to `capacity` and far over the limits past it, with noise."""

    def __init__(self, capacity: float, seed: int = 0, fail_beyond: float = 0.1):
        self.capacity, self.rng, self.fail_beyond = capacity, random.Random(seed), fail_beyond
        self.calls: list[float] = []

    def __call__(self, level: float) -> LevelSamples:
        self.calls.append(level)
        over = max(0.0, level - self.capacity) / max(self.capacity, 1e-9)
        n = 80  # 80 good of 80: the Wilson interval clears a 95% goal (40 of 40 does not)
        s = LevelSamples(sent=n, duration_s=1.0)
        for _ in range(n):
            if over > 0 and self.rng.random() < self.fail_beyond:
                s.failed += 1
                continue
            noise = math.exp(self.rng.gauss(0, 0.12))
            ttft = (450 if over == 0 else 1500 + 3000 * over) * noise
            tpot = (40 if over == 0 else 130 + 200 * over) * noise
            s.ttft_ms.append(ttft)
            s.tpot_ms.append(tpot)
            s.good += request_is_good({"ttft": ttft, "tpot": tpot}, SLOS)
        return s


@pytest.mark.parametrize("capacity", [1, 3, 6, 13, 48])
def test_capacity_search_finds_known_concurrency(capacity):
    sim = SimulatedServer(capacity, seed=capacity)
    res = search_capacity(sim, SLOS, start=1, ceiling=64, integer=True, resolution=1)
    assert abs(res.capacity - capacity) <= 1, (res.capacity, res.stop_reason, sim.calls)
    assert res.converged and res.bracket == (res.capacity, res.capacity + 1)
    assert len(sim.calls) <= 2 * math.ceil(math.log2(64)) + 2  # bracketing + bisection, not a scan


def test_capacity_search_finds_known_rate_within_one_step():
    sim = SimulatedServer(3.3, seed=5)
    res = search_capacity(sim, SLOS, start=0.25, ceiling=64, integer=False, resolution=0.1)
    assert res.converged
    held, failed = res.bracket
    assert held <= 3.3 < failed and failed - held <= 0.1 * failed


def test_capacity_search_edges():
    res = search_capacity(SimulatedServer(100), SLOS, start=1, ceiling=8)
    assert res.capacity == 8 and res.bracket == (8, None) and "ceiling" in res.stop_reason
    res = search_capacity(SimulatedServer(0.5), SLOS, start=1, ceiling=8)
    assert res.capacity == 0 and "do not hold even at level 1" in res.stop_reason


def test_a_rate_search_whose_start_fails_halves_down_to_the_capacity_below_it():
    """The start rate is a guess from unloaded requests; a busy host can put the capacity under it."""
    sim = SimulatedServer(2.2, seed=7)
    res = search_capacity(sim, SLOS, start=8, ceiling=64, integer=False, resolution=0.1)
    assert sim.calls[:3] == [8, 4, 2] and res.converged
    held, failed = res.bracket
    assert held <= 2.2 < failed and failed - held <= 0.1 * failed
    hopeless = SimulatedServer(0.1, seed=7)
    res = search_capacity(hopeless, SLOS, start=8, ceiling=64, integer=False, resolution=0.1)
    assert res.capacity == 0 and hopeless.calls == [8, 4, 2, 1, 0.5] and "level 0.5, the lowest" in res.stop_reason


def test_outside_mode_full_the_search_ends_once_the_target_level_holds():
    sim = SimulatedServer(13, seed=13)
    res = search_capacity(sim, SLOS, start=1, ceiling=64, target=4, above_target=False)
    assert sim.calls == [4] and res.capacity == 4 and res.converged and "at least 4" in res.stop_reason
    missed = SimulatedServer(2, seed=2)
    res = search_capacity(missed, SLOS, start=1, ceiling=64, target=4, above_target=False)
    assert res.capacity == 2 and missed.calls[0] == 4  # a missed target still finds the capacity below it


def test_capacity_search_stops_on_noise():
    """A server sitting right at the TTFT limit from level 5 up: bisection stops there, says so."""
    def measure(level: float) -> LevelSamples:
        ttft = 400.0 if level < 5 else 1010.0
        return LevelSamples(ttft_ms=[ttft] * 80, tpot_ms=[10.0] * 80, good=80 if level < 5 else 0, sent=80)
    res = search_capacity(measure, SLOS, start=1, ceiling=64)
    assert not res.converged and "noise" in res.stop_reason and res.capacity == 4
    assert res.levels[-1].repeats == 2 and res.levels[-1].marginal


def test_a_level_holds_only_when_its_goodput_interval_clears_the_goal():
    """4 good requests of 4 give 51%..100%: undecided, never 'holds'; 80 of 80 clear 95%."""
    few = judge_level(1, LevelSamples(ttft_ms=[10.0] * 4, tpot_ms=[1.0] * 4, good=4, sent=4), SLOS, 0.95)
    assert (few.holds, few.marginal, few.goodput_decision) == (False, True, "inconclusive")
    assert few.goodput_ci[0] == pytest.approx(0.51, abs=0.01) and "undecided" in few.reason
    many = judge_level(1, LevelSamples(ttft_ms=[10.0] * 80, tpot_ms=[1.0] * 80, good=80, sent=80), SLOS, 0.95)
    assert many.holds and many.goodput_decision == "pass"
    bad = judge_level(1, LevelSamples(ttft_ms=[10.0] * 20, tpot_ms=[1.0] * 20, good=10, sent=20), SLOS, 0.95)
    assert not bad.holds and not bad.marginal and bad.goodput_decision == "fail"


def test_the_target_level_comes_first_sampled_until_decided_and_an_undecided_one_is_named():
    calls = []

    def measure(level: float) -> LevelSamples:  # all good: 16 requests a call, 73 needed to clear 95%
        calls.append(level)
        return LevelSamples(ttft_ms=[10.0] * 16, tpot_ms=[1.0] * 16, good=16, sent=16)
    res = search_capacity(measure, SLOS, start=1, ceiling=4, target=4)
    assert res.capacity == 4 and res.converged and calls == [4] * 5 and res.levels[0].repeats == 5
    calls.clear()
    short = search_capacity(measure, SLOS, start=1, ceiling=4, target=4, level_requests=48)
    assert short.capacity == 0 and short.undecided == 4 and not short.converged and calls == [4] * 3
    assert "level 4 is undecided after 48 requests" in short.stop_reason and "95% CI" in short.stop_reason


def test_wilson_interval():
    lo, hi = wilson_interval(95, 100)
    assert lo < 0.95 < hi
    assert wilson_interval(0, 0) == (0.0, 1.0)


# ------------------------------------------------------------------------------ server memory

def test_memory_sources(tmp_path, monkeypatch):
    import json
    import os

    from stress_tests.memory import parse_docker_mem, pick_source, process_tree_rss

    assert parse_docker_mem("1.5GiB / 31.2GiB") == 1.5 * 1024 ** 3
    assert parse_docker_mem("812MB / 2GB") == 812e6 and parse_docker_mem("--") is None
    assert process_tree_rss(os.getpid()) > 1e6 and process_tree_rss(2 ** 22 + 12345) is None
    (tmp_path / "server.pid.json").write_text(json.dumps({"kind": "local", "pid": os.getpid()}))
    src = pick_source(str(tmp_path), "http://127.0.0.1:9", None)
    assert src.kind == "process_tree" and src.read() > 1e6
    monkeypatch.setenv("TT_SERVER_CONTAINER", "tt-x")
    assert pick_source(str(tmp_path / "none"), "http://127.0.0.1:9", None).kind == "docker"
    monkeypatch.delenv("TT_SERVER_CONTAINER")
    assert pick_source(str(tmp_path / "none"), "http://127.0.0.1:9", None).kind == "none"


def _capacity_with_budget(target):
    """A rate search whose levels up to 1 req/s hold (100 good of 100) and whose budget runs out after two levels."""
    from records.stress import CapacityRecord
    from stress_tests.capacity import LevelSamples
    from stress_tests.run_stress_tests import search_into_record

    measured = []

    def measure(level: float) -> LevelSamples:
        measured.append(level)
        good = 100 if level <= 1 else 0
        return LevelSamples(e2el_ms=[100.0 if good else 9000.0] * 100, good=good, sent=100, duration_s=10.0)

    args = parse_stress_args({"mode": "smoke", "run_mode": "capacity", "slo": "e2el_p99:1000"})
    record = CapacityRecord(model_id="m", metric="rate", goodput_goal=args.goodput, start=0.5, ceiling=64,
                            resolution=0.01, target=target, slos=["e2el_p99:1000"])
    import tempfile
    from pathlib import Path
    return search_into_record(record, measure, parse_slos("e2el_p99:1000"), args, False,
                              lambda: len(measured) >= 2, Path(tempfile.mkdtemp()), " req/s")


def test_a_capacity_search_without_target_cut_by_its_budget_keeps_its_lower_bound_and_passes():
    record = _capacity_with_budget(None)
    assert record.converged is False and "budget ran out" in record.stop_reason
    assert record.passed is True and record.capacity == 1.0, record.detail
    assert "lower bound" in record.detail and "did not finish" not in record.detail


def test_a_capacity_search_with_a_target_cut_by_its_budget_is_not_a_pass():
    record = _capacity_with_budget(4.0)
    assert record.passed is not True, record.detail


def test_a_smoke_run_defaults_to_its_load_point_only():
    assert parse_stress_args({"mode": "smoke"}).run_modes == ("single",)
    assert parse_stress_args({"mode": "ci"}).run_modes == ("single", "capacity")
    assert parse_stress_args({"mode": "smoke", "run_mode": "capacity"}).run_modes == ("capacity",)


def test_a_goodput_collapse_between_adjacent_levels_is_flagged_as_a_cliff():
    from records.stress import CapacityLevel, find_cliff

    def level(at: float, goodput: float) -> CapacityLevel:
        return CapacityLevel(at, goodput >= 0.95, goodput=goodput)

    # measured out of order (a search brackets then bisects): the curve is read sorted by level
    cliff = find_cliff([level(4, 1.0), level(16, 0.05), level(8, 0.97)], 0.95)
    assert cliff is not None and "97% at 8" in cliff and "5% at 16" in cliff
    assert find_cliff([level(4, 1.0), level(8, 0.9), level(16, 0.6)], 0.95) is None  # a gentle decline
    assert find_cliff([level(4, 1.0)], 0.95) is None
