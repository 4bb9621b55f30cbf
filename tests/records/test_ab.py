"""The paired A/B decision of two live servers (records/ab.py) through the real ABBA loop (benchmarking/agreement.py).

The error rates are measured by simulation against a known truth: the candidate server unchanged (ratio 1)
or 40% slower (its latencies x1.4, its throughput /1.4), with block-to-block noise and a host that drifts
over the run (a trend and AR(1) wander both servers share, as a neighbour's load does). Asserted: an
unchanged candidate is called ``regressed`` (or ``improved``) at most 5% of the time and its interval covers
the truth at least 93% of the time; a 40% slower one is called ``regressed`` almost always and never
``within_noise``.
"""
from __future__ import annotations

import math
import random

from benchmarking.agreement import run_abba
from records import judge
from records.ab import (
    IMPROVED,
    INCONCLUSIVE,
    REGRESSED,
    WITHIN_NOISE,
    ABMetric,
    ABRecord,
    ABSection,
    blocks_to_decide,
    decide,
    judge_ab_metrics,
    more_blocks_line,
)
from records.agreement import AgreementBlock
from records.report import EvalRow, Section

RUNS = 400  # the standard error of a 5% rate is then 1.1%


def _simulated(truth: float, noise: float, trend: float, ar: float, rng: random.Random):
    """Block values base * drift * noise; the candidate's (side B) latencies x ``truth``, throughput / ``truth``."""
    state = {"wander": 0.0}

    def measure(side: str, index: int) -> AgreementBlock:
        state["wander"] = ar * state["wander"] + rng.gauss(0.0, noise)
        drift = math.exp(trend * index + state["wander"])
        slow = truth if side == "B" else 1.0
        values = {"mean_ttft_ms": 50.0 * drift * slow * math.exp(rng.gauss(0.0, noise)),
                  "mean_tpot_ms": 40.0 * drift * slow * math.exp(rng.gauss(0.0, noise)),
                  "output_tok_s": 90.0 / drift / slow * math.exp(rng.gauss(0.0, noise))}
        return AgreementBlock(index=index, side=side, tool="tt-bench", requests=4, completed=4, duration_s=1.0,
                              values=values)
    return measure


def _run(truth: float, rng: random.Random, noise: float, cycles: int = 6) -> ABRecord:
    record = ABRecord(point="p", baseline="sim", baseline_url="a", candidate_url="b", tolerance=0.05,
                      max_cycles=cycles)
    return run_abba(record, _simulated(truth, noise, 0.01, 0.6, rng),
                    judge=lambda blocks, looks: judge_ab_metrics("p", blocks, 0.05, cycles, looks),
                    side_names=("baseline", "candidate"))


def _rates(truth: float, noise: float = 0.03):
    rng = random.Random(20261206 + int(truth * 1000))
    counts = {REGRESSED: 0, IMPROVED: 0, WITHIN_NOISE: 0, INCONCLUSIVE: 0}
    covered = total = 0
    for _ in range(RUNS):
        for m in _run(truth, rng, noise).metrics:
            counts[m.decision] += 1
            true_ratio = 1 / truth if m.higher_is_better else truth
            covered += m.ci95 is not None and m.ci95[0] <= true_ratio <= m.ci95[1]
            total += 1
    return {k: v / total for k, v in counts.items()}, covered / total


def test_an_unchanged_candidate_is_rarely_called_regressed_and_the_interval_covers_the_truth():
    rates, coverage = _rates(1.0)
    print(f"truth 1.00, 3% block noise: {rates}, coverage {coverage:.3f}")
    assert rates[REGRESSED] + rates[IMPROVED] <= 0.05
    assert coverage >= 0.93


def test_with_quiet_blocks_an_unchanged_candidate_is_mostly_decided_within_noise():
    """The check can say "no change beyond the tolerance", not only "cannot tell", when blocks are quiet (1.5%
    per value, as the stub server's); at 3% a ±5% band is mostly inconclusive within 6 cycles (measured above:
    about a fifth decided), and the report then says how many more blocks would decide."""
    rates, _ = _rates(1.0, noise=0.015)
    print(f"truth 1.00, 1.5% block noise: {rates}")
    assert rates[WITHIN_NOISE] >= 0.8 and rates[REGRESSED] + rates[IMPROVED] <= 0.05


def test_a_candidate_40_percent_slower_is_called_regressed():
    rates, coverage = _rates(1.4)
    print(f"truth 1.40, 3% block noise: {rates}, coverage {coverage:.3f}")
    assert rates[REGRESSED] >= 0.95 and rates[WITHIN_NOISE] == 0 and rates[IMPROVED] == 0
    assert coverage >= 0.93


def test_a_candidate_15_percent_slower_is_decided_within_the_block_budget():
    """What one run against a history cannot resolve on a real engine, the paired blocks do: +15% is called
    regressed in at least 80% of runs within ab_cycles' default 6 cycles (measured: 99%), never within noise."""
    rates, coverage = _rates(1.15)
    print(f"truth 1.15, 3% block noise: {rates}, coverage {coverage:.3f}")
    assert rates[REGRESSED] >= 0.8 and rates[WITHIN_NOISE] == 0 and rates[IMPROVED] == 0


def test_the_loop_stops_as_soon_as_every_metric_is_decided():
    """A 40% slower candidate on quiet blocks is decided at the first look (two cycles, eight blocks)."""
    record = _run(1.4, random.Random(1), noise=0.01)
    assert record.stopped == "decided" and len(record.blocks) == 8
    assert {m.decision for m in record.metrics} == {REGRESSED}


def test_decide_against_the_band():
    assert decide([1.10, 1.30], 0.05, False) == REGRESSED
    assert decide([1.10, 1.30], 0.05, True) == IMPROVED  # throughput up
    assert decide([0.97, 1.04], 0.05, False) == WITHIN_NOISE
    assert decide([0.97, 1.08], 0.05, False) == INCONCLUSIVE  # not regressed, but not shown to be within the band
    assert decide(None, 0.05, False) == INCONCLUSIVE


def test_an_undecided_metric_says_how_many_more_blocks_would_decide_it():
    rng = random.Random(7)
    logs = [0.02 + rng.gauss(0, 0.05) for _ in range(4)]
    more = blocks_to_decide(logs, 0.05, 6)
    assert more is not None and more > 0 and more % 2 == 0
    metric = ABMetric(point="p", metric="mean_tpot_ms", decision=INCONCLUSIVE, blocks_to_decide=more)
    assert f"{more} more blocks" in more_blocks_line(metric) and f"{more} more blocks" in metric.detail()
    # a ratio on the band's edge: no number of blocks would likely decide it
    assert blocks_to_decide([math.log(1.05)] * 2 + [math.log(1.05) + 0.01, math.log(1.05) - 0.01], 0.05, 6) is None


def _verdict(section: ABSection):
    return judge.decide(model_status="COMPLETE", steps=[], targets=[], evals=[EvalRow("t", "passed", passed=True)],
                        tests=Section(ran=False), stress_tests=Section(ran=False), benchmarks_judged=True,
                        evals_judged=True, known_issues=[], ab=section)


def _section(*decisions: str) -> ABSection:
    metrics = [ABMetric(point="isl-64_osl-8_con-2", metric=m, decision=d, ratio=1.0, ci95=[0.9, 1.1], pairs=4)
               for m, d in zip(("mean_ttft_ms", "mean_tpot_ms", "output_tok_s"), decisions)]
    record = ABRecord(point="isl-64_osl-8_con-2", baseline="--baseline-url http://b", baseline_url="http://b",
                      candidate_url="http://c", metrics=metrics)
    return ABSection(baseline="--baseline-url http://b", records=[record])


def test_the_ab_checks_are_a_gate_regressed_fails_undecided_is_inconclusive_never_pass():
    """Asked for, the comparison is required: a regression is a blocker (FAIL, exit 3), an undecided metric makes
    the verdict INCONCLUSIVE (exit 4), and an A/B that measured nothing is an undecided check, not a PASS."""
    assert _verdict(_section(WITHIN_NOISE, WITHIN_NOISE, IMPROVED)).result == "PASS"
    failed = _verdict(_section(WITHIN_NOISE, REGRESSED, REGRESSED))
    assert failed.result == "FAIL" and [b.category for b in failed.blockers] == ["ab", "ab"]
    assert _verdict(_section(WITHIN_NOISE, INCONCLUSIVE, WITHIN_NOISE)).result == "INCONCLUSIVE"
    empty = _verdict(ABSection(baseline="--baseline-vllm-args {}"))
    assert empty.result == "INCONCLUSIVE"
    assert [c.name for c in empty.checks if c.category == "ab"] == ["ab not measured"]
    assert all(c.required for c in failed.checks if c.category == "ab")
