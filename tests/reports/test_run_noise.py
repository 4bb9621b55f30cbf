"""The regression gate's interval, checked by simulation against a known truth (``reports.run_noise``).

Runs are drawn as a 2-core host makes them: each run has its own state (a log-normal run effect of SD
``tau``: 2% on a steady host, 8% as measured between smoke releases of one build here), and its requests
are correlated within it (at concurrency 4 the requests of one batch share its speed; at concurrency 1 an
AR(1) series). The gate's real interval and decision (``ratio_interval``, ``comparison.decide``) judge a
run against the newest of ``k`` accepted runs; the truth is known, so coverage and the false fail rate of
healthy builds are counted, not assumed. The requests-only bootstrap the gate used before is counted
beside it: it is what failed healthy builds.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

import pytest

from contracts.intervals import bootstrap_ratio_of_means
from reports.comparison import decide
from reports.run_noise import MIN_RUNS, METHOD_REQUESTS, METHOD_RUNS, log_run_sd, ratio_interval

TOLERANCE = 0.05
SIMULATIONS = 200
BOOTSTRAP_ITERATIONS = 100   # the hull's request bootstrap: enough for its edges here, 20x faster


@dataclass(frozen=True)
class Host:
    tau: float          # SD of a run's log speed (the run effect)
    concurrency: int    # 4: requests of a batch share its speed; 1: an AR(1) series
    requests: int = 8


def draw_run(rng: random.Random, host: Host, truth: float) -> list[float]:
    """One run's per-request latencies (lower is better) of a build whose true mean is ``truth``."""
    run = rng.gauss(0, host.tau)
    values, state = [], 0.0
    for i in range(host.requests):
        if host.concurrency > 1:
            if i % host.concurrency == 0:
                state = rng.gauss(0, 0.05)      # this batch's speed
            noise = state + rng.gauss(0, 0.01)
        else:
            state = 0.5 * state + rng.gauss(0, 0.08)
            noise = state
        values.append(truth * math.exp(run + noise))
    return values


def judge(rng: random.Random, host: Host, k: int, truth_ratio: float, requests_only: bool = False
          ) -> tuple[str, bool, str | None]:
    """(the gate's decision, whether its interval covers the truth, the requests-only decision if asked)."""
    history = [draw_run(rng, host, 100.0) for _ in range(k)]
    baseline, current = history[-1], draw_run(rng, host, 100.0 * truth_ratio)
    means = [sum(run) / len(run) for run in history]
    interval = ratio_interval(current, baseline, means, iterations=BOOTSTRAP_ITERATIONS)
    ci = [interval.low, interval.high]
    old = None
    if requests_only:
        boot = bootstrap_ratio_of_means(current, baseline, iterations=BOOTSTRAP_ITERATIONS)
        old = decide([boot.low, boot.high], TOLERANCE, False)
    return decide(ci, TOLERANCE, False), ci[0] <= truth_ratio <= ci[1], old


#: (host, accepted runs): a steady and a noisy host, batched and sequential requests, the fewest runs that
#: decide and ten; and a steady host's ci-sized point (32 requests), where a 30% regression must be caught.
CELLS = [(Host(tau, c), k) for tau in (0.02, 0.08) for c in (1, 4) for k in (3, 10)] + [(Host(0.02, 4, 32), 10)]


def simulate() -> list[dict]:
    rows = []
    for index, (host, k) in enumerate(CELLS):
        rng = random.Random(1000 + index)
        healthy = [judge(rng, host, k, 1.0, requests_only=True) for _ in range(SIMULATIONS)]
        slower = [judge(rng, host, k, 1.3)[0] for _ in range(SIMULATIONS)]
        rows.append({"tau": host.tau, "concurrency": host.concurrency, "requests": host.requests, "k": k,
                     "false_fail": sum(d == "regressed" for d, _, _ in healthy) / SIMULATIONS,
                     "coverage": sum(c for _, c, _ in healthy) / SIMULATIONS,
                     "requests_only_false_fail": sum(o == "regressed" for _, _, o in healthy) / SIMULATIONS,
                     "caught_30pct": sum(d == "regressed" for d in slower) / SIMULATIONS})
    return rows


@pytest.fixture(scope="module")
def table() -> list[dict]:
    rows = simulate()
    print("\ntau  con  n   k  false_fail  coverage  requests_only_false_fail  caught_30pct")
    for r in rows:
        print(f"{r['tau']:.2f} {r['concurrency']:>4} {r['requests']:>2} {r['k']:>3} {r['false_fail']:>11.3f} "
              f"{r['coverage']:>9.3f} "
              f"{r['requests_only_false_fail']:>25.3f} {r['caught_30pct']:>13.3f}")
    return rows


def test_healthy_builds_are_failed_rarely_and_the_interval_covers_the_truth(table) -> None:
    assert all(r["false_fail"] <= 0.05 for r in table), table
    pooled = sum(r["coverage"] for r in table) / len(table)
    assert pooled >= 0.93 and min(r["coverage"] for r in table) >= 0.90, table


def test_the_requests_alone_fail_healthy_builds_on_a_noisy_host(table) -> None:
    """Why the gate reads runs: one run's requests cannot see its own run effect."""
    noisy = [r for r in table if r["tau"] == 0.08]
    assert min(r["requests_only_false_fail"] for r in noisy) > 0.1, noisy


def test_a_30_percent_regression_is_caught_where_the_host_lets_it_be(table) -> None:
    """The price of honesty: the gate resolves what the runs' spread allows; a steady host with ten runs and
    a ci-sized point catches a 30% regression nearly always, the fewest runs on a noisy host rarely."""
    steady = next(r for r in table if r["requests"] == 32)
    assert steady["caught_30pct"] >= 0.95, steady
    assert all(r["caught_30pct"] < 0.5 for r in table if r["tau"] == 0.08 and r["k"] == 3), table


def test_the_interval_needs_min_runs_and_says_how_it_was_made() -> None:
    assert MIN_RUNS == 3 and log_run_sd([100, 110]) is None and log_run_sd([100, 110, 0]) is None
    few = ratio_interval([110.0] * 8, [100.0] * 8, [100.0, 104.0])
    assert few.method == METHOD_REQUESTS and not few.may_decide and few.run_noise is None and few.runs == 2
    many = ratio_interval([110.0] * 8, [100.0] * 8, [100.0, 104.0, 98.0])
    assert many.method == METHOD_RUNS and many.may_decide and many.runs == 3
    assert many.low < 1.1 < many.high and many.run_noise == pytest.approx(log_run_sd([100.0, 104.0, 98.0]))
    with pytest.raises(ValueError):
        ratio_interval([], [100.0], [100.0, 101.0, 99.0])
