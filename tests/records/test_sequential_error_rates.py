"""The error rates of the whole adaptive decision, by simulation with a known truth.

Simulated benchmark points and eval scores (tests/records/decision_simulation.py) go through the real stop
rule and the real judge, looking after every round; the truth is the target met exactly, 10% better or 10%
worse, for TTFT and t/s/u (lognormal latencies, i.i.d. and AR(1)) and for a Bernoulli accuracy (with and
without replacement). The promises checked, each per cell:

* a check passes a target its truth does not beat (truth at the target or 10% worse) at most 5% of the time;
* a check fails a target its truth meets (at the target or 10% better) at most 5% of the time;
* the final interval holds the truth at least 93% of the time (nominal: 95%);
* a release of a healthy build (6 checks, every truth 10% better) fails any check at most 5% of the time.

Monte-Carlo margin: a rate is shown within its limit only when its whole 95% Wilson interval over the runs
is (``monte_carlo_bounds``), so a lucky seed cannot pass a method that misses. With 300 runs a cell's upper
bound is at most 5% for an observed rate up to about 2.7%, and its coverage bound at least 93% from about
95.7%; the cells whose truth sits on the target have rates nearest the limit (their nominal one-sided miss
is 2.5%, an asymptotic interval on skewed, correlated latencies a little above), so they get 800 runs:
bound <= 5% up to about 3.6%. Seeded: the same table every time. The whole file runs in about 13 s.
"""
from __future__ import annotations

import itertools
import math
import random

import pytest

from contracts.intervals import FAIL
from contracts.sequential import bounded_mean_cs, bounded_mean_cs_path
from tests.records.decision_simulation import (
    CHECKS,
    DISTRIBUTIONS,
    EVAL_DISTRIBUTIONS,
    RELEASE_CHECKS,
    TRUTHS,
    decision_table,
    eval_items,
    format_release,
    format_table,
    healthy_release,
    lognormal_series,
    monte_carlo_bounds,
    simulate_point,
    truth_value,
)

RUNS = 300
AT_TARGET_RUNS = 800
SEED = 2024
LIMIT = 0.05           # false pass, false fail, any fail of a healthy release
MIN_COVERAGE = 0.93


@pytest.fixture(scope="module")
def table():
    rows = decision_table(runs=RUNS, seed=SEED, at_target_runs=AT_TARGET_RUNS)
    print("\n" + format_table(rows))   # shown with -s; scripts/simulate_decisions.py prints the same
    return rows


def test_the_table_has_every_truth_distribution_and_check(table):
    cells = {(r.check, r.distribution, r.truth) for r in table}
    expected = {(c, d, t) for c in CHECKS for d in DISTRIBUTIONS for t in TRUTHS}
    expected |= {("accuracy", d, t) for d in EVAL_DISTRIBUTIONS for t in TRUTHS}
    assert cells == expected and len(table) == len(expected)
    assert all(r.runs == (AT_TARGET_RUNS if r.truth == "at target" else RUNS) for r in table)
    assert len(format_table(table).splitlines()) == len(table) + 2


def test_no_check_passes_a_target_its_truth_misses_more_than_5_percent_of_the_time(table):
    for row in table:
        if row.false_pass is not None:
            assert monte_carlo_bounds(row.passed, row.runs)[1] <= LIMIT, format_table([row])


def test_no_check_fails_a_target_its_truth_meets_more_than_5_percent_of_the_time(table):
    for row in table:
        if row.false_fail is not None:
            assert monte_carlo_bounds(row.failed, row.runs)[1] <= LIMIT, format_table([row])


def test_the_final_interval_holds_the_truth_at_least_93_percent_of_the_time(table):
    for row in table:
        assert monte_carlo_bounds(row.covered, row.runs)[0] >= MIN_COVERAGE, format_table([row])


def test_a_clear_truth_is_decided_before_the_budget(table):
    """Validity alone is cheap (never deciding is never wrong): a 10% gap on i.i.d. latencies and on items of a
    fixed set is decided within the budget nearly always, on far fewer samples than the request cap (512) or
    the item budget (400); an AR(1) series (a third of the information per request) and i.i.d. items still
    often."""
    for row in table:
        if row.truth == "at target":
            continue
        if row.distribution.startswith(("iid", "Bernoulli WoR")):
            assert row.decided >= 0.9 and row.mean_n < 320, format_table([row])
        else:
            assert row.decided >= 0.3, format_table([row])


def test_a_release_of_a_healthy_build_fails_any_of_its_six_checks_at_most_5_percent_of_the_time():
    rates = healthy_release(runs=RUNS, seed=SEED)
    assert rates.checks == len(RELEASE_CHECKS) == 6 and rates.runs == RUNS
    assert monte_carlo_bounds(rates.any_fail, rates.runs)[1] <= LIMIT, format_release(rates)
    assert rates.all_pass_share >= 0.3, format_release(rates)   # and it does pass, mostly


def test_the_stop_rule_and_the_report_judge_decide_the_same():
    """simulate_point raises when the report's decision from all samples differs from the stop's last one."""
    rng = random.Random(1)
    for truth in TRUTHS:
        for dist in DISTRIBUTIONS:
            out = simulate_point(rng, {"ttft_ms": (truth_value("ttft_ms", truth), dist),
                                       "tput_user": (truth_value("tput_user", truth), dist)})
            assert set(out) == {"ttft_ms", "tput_user"} and all(o.n >= 32 for o in out.values())
    worse = simulate_point(random.Random(2), {"ttft_ms": (200.0, "iid lognormal")})["ttft_ms"]
    assert worse.decision == FAIL and worse.n <= 64 and worse.decided_early   # twice the target: within 2 rounds


@pytest.mark.parametrize("population", [None, 500])
def test_an_eval_look_is_bounded_mean_cs_of_the_items_so_far(population):
    items, truth = eval_items(random.Random(3), 0.8, population)
    assert truth == 0.8 and len(items) == 400
    path = bounded_mean_cs_path(items, population=population)
    for n in (16, 160, 400):
        assert path[n - 1] == bounded_mean_cs(items[:n], population=population)


def test_the_simulated_latencies_have_the_stated_mean_spread_and_correlation():
    for phi in (0.0, 0.5):
        series = lognormal_series(random.Random(7), 100.0, 0.4, phi)
        xs = [next(series) for _ in range(40_000)]
        mean = sum(xs) / len(xs)
        sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
        lag1 = sum((a - mean) * (b - mean) for a, b in itertools.pairwise(xs)) / ((len(xs) - 1) * sd * sd)
        assert mean == pytest.approx(100.0, rel=0.02) and sd / mean == pytest.approx(0.4, rel=0.05)
        assert lag1 == pytest.approx(0.48 if phi else 0.0, abs=0.03)
