"""The regression gate's interval and decision, checked by simulation against a known truth
(``scripts/simulate_regression_gate.py`` through ``reports.comparison.compare_series``), and its pieces alone.

The simulation draws runs of a host whose speed drifts as an AR(1) process in time, with the request noise a
2-core host shows (``simulate_regression_gate`` says how); the truth is known, so false alarms and misses are
counted, not assumed. The README's table is the same simulation with more draws.
"""
from __future__ import annotations

import math

import pytest

from reports.run_noise import (
    MIN_RUNS,
    PRIOR_SD,
    NoiseLevel,
    block_level,
    block_stats,
    choose_level,
    ratio_interval,
    runs_to_decide,
    satterthwaite,
    setup_level,
    within_run,
)
from scripts.simulate_regression_gate import CELLS, simulate

DRAWS = 150


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    found = simulate(CELLS, DRAWS)
    print("\n" + "\n".join(f"{r['host'][:24]:24} n={r['requests']:>2} ratio={r['ratio']:.2f} k={r['history']} "
                            f"regressed={r['regressed']:.3f} within={r['within_noise']:.3f}" for r in found))
    return found


def test_unchanged_builds_are_rarely_called_regressed(rows) -> None:
    assert all(r["regressed"] <= 0.05 for r in rows if r["ratio"] == 1.0), rows


def test_a_40_percent_slowdown_is_decided_from_one_baseline_run(rows) -> None:
    """The stub and a steady host decide it nearly always; a busy host with ci-sized points too; a server each
    run restarts, compared with the prior as a floor until the history knows the host, most of the time."""
    forty = [r for r in rows if r["ratio"] == 1.4 and r["history"] == 1]
    assert all(r["regressed"] >= 0.95 for r in forty if r["host"].startswith(("stub", "steady"))), forty
    assert all(r["regressed"] >= 0.95 for r in forty if r["host"].startswith("busy") and r["requests"] >= 32), forty
    assert all(r["regressed"] >= 0.75 for r in forty), forty


def test_an_unchanged_stub_is_decided_within_noise(rows) -> None:
    """A host that varies by < 1% shows 'no change beyond 5%' from one baseline run: the gate decides both ways."""
    stub = [r for r in rows if r["host"].startswith("stub") and r["ratio"] == 1.0]
    assert stub and all(r["within_noise"] >= 0.95 for r in stub), stub


def test_blocks_tell_drift_from_request_noise() -> None:
    """Independent requests: no drift between blocks; a host that slows half-way: drift of about that size."""
    steady = [10.0 * (1 + 0.1 * ((i * 7919) % 13 - 6) / 6) for i in range(32)]
    stats = block_stats(steady, 1)
    assert stats is not None and len(stats.means) == 8 and stats.size == 4
    calm = within_run([stats, block_stats(list(reversed(steady)), 1)])
    assert calm is not None and calm.df == 14 and calm.drift_sd < 0.03
    shifted = [v * (1.3 if i >= 16 else 1.0) for i, v in enumerate(steady)]
    drift = within_run([block_stats(shifted, 1), block_stats(steady, 1)])
    assert drift is not None and drift.drift_sd > 0.08
    assert block_stats([1.0] * 7, 4) is None and block_stats([1.0, 0.0, 1.0, 1.0], 1) is None
    assert block_level(None) is None and block_level(drift).source == "within-run blocks"


def test_the_level_is_the_larger_known_estimate_else_the_prior() -> None:
    prior = choose_level(None, None)
    assert prior.source == "prior" and prior.sd == PRIOR_SD and prior.df is None
    history, blocks = NoiseLevel("setup runs", 0.02, 4, "x", 5), NoiseLevel("within-run blocks", 0.05, 10, "y")
    assert choose_level(history, blocks) is blocks and choose_level(history, None) is history
    # a server each run started afresh: the prior is a floor under steady blocks until the history knows the host
    steady = NoiseLevel("within-run blocks", 0.005, 10, "z")
    assert choose_level(None, steady) is steady
    floor = choose_level(None, steady, restarted=True)
    assert floor.source == "prior" and floor.sd == PRIOR_SD and "started its own server" in floor.detail
    assert choose_level(history, steady, restarted=True) is history
    assert setup_level([100.0, 101.0]) is None and MIN_RUNS == 3
    level = setup_level([100.0, 104.0, 98.0])
    assert level is not None and level.runs == 3 and level.df == 2


def test_the_interval_adds_run_levels_to_the_requests_and_says_what_decides() -> None:
    values, baseline = [11.0, 11.2, 10.8, 11.1] * 4, [10.0, 10.2, 9.8, 10.1] * 4
    tight = ratio_interval(values, baseline, NoiseLevel("within-run blocks", 0.0, 20, "x"), iterations=200)
    wide = ratio_interval(values, baseline, NoiseLevel("prior", PRIOR_SD, None, "y"), iterations=200)
    assert tight.low < 1.1 < tight.high and tight.high - tight.low < 0.05
    half = math.log(wide.high / wide.ratio)
    assert half == pytest.approx(1.96 * math.sqrt(2 * PRIOR_SD ** 2 + 0.0001), rel=0.1)
    assert "prior" in wide.method
    # undecided at 8% a run: about this many runs of each build bring the interval inside the 5% edge
    needed = runs_to_decide(wide, 0.05, False)
    assert needed is not None and needed >= 2
    assert satterthwaite((1.0, None), (1.0, None)) is None and satterthwaite((1.0, 4), (0.0, None)) == 4
    with pytest.raises(ValueError):
        ratio_interval([], [1.0], wide.level)
