"""``ABRecord``: this run's server against a live baseline server, paired block by block (``tt-ab/1``), stdlib only.

Why paired: two runs compared after the fact differ by the host as much as by the build (a shared host
measured the same build 15-50% slower while other work ran), and estimating that drift needs a history of
runs. With ``--baseline-url`` (a running server) or ``--baseline-vllm-args`` (a second local server of the
same spec with those vLLM arguments laid over) both servers are up during one run and each judged point is
measured in blocks sent alternately to the baseline (A) and to this run's server, the candidate (B), in the
order A B B A, with the same prompts in both blocks of a pair; only one server is loaded at a time. A drift
of the host over the run hits both alike and cancels within each cycle, so it is removed, not estimated.

The statistic is the agreement machinery's (``records.agreement.paired_ratios``: per pair log(B / A), a
Student t interval of the mean on pairs - 1 degrees of freedom at alpha 0.05 / planned looks,
exponentiated) and so is the anytime-valid stop (``benchmarking.agreement.run_abba``: a look after each
whole cycle from the second; sampling stops once every metric is decided). The decision is a regression
gate's against the tolerance (``regression_tolerance``), on the ratio candidate / baseline made "worse"
(its inverse for a higher-is-better metric):

* ``regressed``: the whole interval lies above ``1 + tolerance``;
* ``improved``: the whole interval lies below ``1 - tolerance``;
* ``within_noise``: the interval shows no regression beyond the tolerance (its worse end inside
  ``1 + tolerance``; ``records.regression``, the comparison with a baseline run's rule too);
* ``inconclusive``: anything else; ``blocks_to_decide`` then says how many more blocks would likely decide
  it at the block-to-block spread seen (null when the ratio sits on the band's edge: no number would).

tests/records/test_ab.py measures the false regressed / within-noise rates by simulation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist, mean, stdev
from typing import Sequence

from contracts.sequential import student_t_equivalent
from contracts.typed_record import TypedRecord, described
from records.ab_evals import EvalAB
from records.agreement import METRICS, AgreementBlock, paired_ratios, planned_looks, rounded
from records.regression import (  # the decision words are the one rule's; importable from here too
    IMPROVED as IMPROVED,
    INCONCLUSIVE,
    REGRESSED as REGRESSED,
    WITHIN_NOISE as WITHIN_NOISE,
    decide_ratio,
)

SCHEMA = "tt-ab/1"
DEFAULT_TOLERANCE = 0.05  # reports.comparison.DEFAULT_TOLERANCE: the same regression_tolerance default
DEFAULT_CYCLES = 6
METHOD = ("ABBA blocks on the baseline (A) and this run's server (B), the same prompts in both blocks of a pair; "
          "per pair log(candidate / baseline); Student t interval of the mean log ratio on pairs - 1 degrees of "
          "freedom at alpha 0.05 / planned looks, exponentiated")
#: Most extra blocks ``blocks_to_decide`` reports; beyond it the estimate says "more than".
MAX_ESTIMATE_BLOCKS = 400


@dataclass
class ABMetric(TypedRecord):
    """One metric of one point: candidate / baseline, with its interval and decision."""

    point: str = described("Point key (isl-128_osl-32_con-4).")
    metric: str = described("mean_ttft_ms, mean_tpot_ms or output_tok_s (records.agreement.METRICS).")
    higher_is_better: bool = described("True for output_tok_s: regressed then means lower.", False)
    baseline: float | None = described("Mean of the baseline server's block values.", None)
    candidate: float | None = described("Mean of this run's server's block values.", None)
    ratio: float | None = described("Geometric mean over the pairs of candidate / baseline.", None)
    ci95: list[float] | None = described("95% interval of the ratio (METHOD); null with fewer than 2 pairs.", None)
    pairs: int = described("Pairs of adjacent blocks behind the ratio.", 0)
    tolerance: float = described("regression_tolerance: the band [1 - tolerance, 1 + tolerance].", DEFAULT_TOLERANCE)
    looks: int = described("Times the pairs were looked at before the stop.", 0)
    stopped: str = described("decided (every metric decided) or budget (cycles or time ran out first).", "budget")
    decision: str = described("regressed, improved, within_noise or inconclusive (module docstring).", INCONCLUSIVE)
    blocks_to_decide: int | None = described(
        "Inconclusive only: more blocks that would likely decide it at the block spread seen (null: the ratio "
        "sits on the band's edge, or too few pairs to tell the spread).", None)

    @property
    def name(self) -> str:
        """The verdict check's name: 'ab <metric> <point>'."""
        return f"ab {self.metric} {self.point}"

    def detail(self) -> str:
        ci = "n/a" if self.ci95 is None else f"{self.ci95[0]:.3f}-{self.ci95[1]:.3f}"
        text = (f"{self.decision}: {self.metric} baseline {_fmt(self.baseline)}, candidate {_fmt(self.candidate)}; "
                f"ratio {_fmt(self.ratio, '.3f')} (95% CI {ci}) over {self.pairs} pairs; "
                f"tolerance ±{self.tolerance:.0%}")
        if self.decision == INCONCLUSIVE:
            text += "; " + more_blocks_line(self)
        return text


@dataclass
class ABRecord(TypedRecord):
    """One point measured alternately on the baseline server and on this run's server."""

    SCHEMA = SCHEMA

    point: str = described("Point key.")
    baseline: str = described("The baseline: its URL (--baseline-url) or the vLLM arguments laid over "
                              "(--baseline-vllm-args).")
    baseline_url: str = described("Where the baseline blocks were sent.")
    candidate_url: str = described("Where the candidate blocks were sent (this run's server).")
    tolerance: float = described("regression_tolerance of the decisions (share).", DEFAULT_TOLERANCE)
    max_cycles: int = described("ABBA cycles the run may use (ab_cycles).", DEFAULT_CYCLES)
    block_requests: int = described("Requests per block.", 0)
    method: str = described("How each interval is made.", METHOD)
    blocks: list[AgreementBlock] = described("Every block in run order (side A: baseline, B: candidate).",
                                             factory=list, record_list=AgreementBlock)
    metrics: list[ABMetric] = described("One decision per metric.", factory=list, record_list=ABMetric)
    stopped: str = described("decided, budget, interrupted or failed (a block could not run).", "budget")
    notes: list[str] = described("What the reader must know: a failed block, a budget that ended early.",
                                 factory=list)


@dataclass
class ABSection(TypedRecord):
    """The report's A/B section: what the user asked for and every point's record."""

    baseline: str = described("--baseline-url URL or --baseline-vllm-args JSON, as asked.")
    records: list[ABRecord] = described("One per judged point, point order.", factory=list, record_list=ABRecord)
    missing: list[str] = described("Why a comparison the user asked for has no record (then undecided).",
                                   factory=list)
    evals: list[EvalAB] = described("One per eval task scored on both servers, decided on the paired items "
                                    "(records.ab_evals).", factory=list, record_list=EvalAB)


def _fmt(value: float | None, spec: str = ".4g") -> str:
    return "n/a" if value is None else format(value, spec)


def decide(ci: list[float] | None, tolerance: float, higher_is_better: bool) -> str:
    """regressed / improved / within_noise / inconclusive of an interval of candidate / baseline: the one rule
    of ``records.regression`` (the comparison with a baseline run says the same word)."""
    return decide_ratio(ci, tolerance, higher_is_better)


def blocks_to_decide(logs: Sequence[float], tolerance: float, max_cycles: int,
                     higher_is_better: bool = False) -> int | None:
    """More blocks (two per pair) after which the interval would likely clear or fit the band, if the mean
    and spread of the pairs' log ratios stay as seen; None when the mean sits on the band's edge or the
    spread is unknown (fewer than 2 pairs). The half-width needed is the distance of the mean from the
    nearer edge of the band (in logs); pairs = (t * sd / distance)^2 with t at the run's alpha per look."""
    if len(logs) < 2:
        return None
    centre, sd = mean(logs) * (-1 if higher_is_better else 1), stdev(logs)  # the "worse" ratio's log
    distance = abs(centre - math.log(1 + tolerance))  # records.regression: the edge that decides
    if distance < 1e-9:
        return None
    z = NormalDist().inv_cdf(1 - 0.025 / planned_looks(max_cycles))
    need = len(logs)
    while need < len(logs) + MAX_ESTIMATE_BLOCKS // 2:
        need += 1
        if student_t_equivalent(z, need - 1) * sd / math.sqrt(need) < distance:
            break
    return 2 * (need - len(logs))


def more_blocks_line(metric: ABMetric) -> str:
    """'about N more blocks would likely decide it' or why no number can be given."""
    if metric.blocks_to_decide is None:
        return "no block count would likely decide it (the ratio sits on the tolerance's edge, or too few pairs)"
    more = "more than " if metric.blocks_to_decide >= MAX_ESTIMATE_BLOCKS else "about "
    return f"{more}{metric.blocks_to_decide} more blocks would likely decide it at the block spread seen (ab_cycles)"


def judge_ab_metrics(point: str, blocks: Sequence[AgreementBlock], tolerance: float, max_cycles: int,
                     looks: int) -> list[ABMetric]:
    """Every metric's ratio candidate / baseline, interval and decision over ``blocks`` (run order)."""
    out = []
    for r in paired_ratios(blocks, max_cycles):
        higher = METRICS[r.metric][1]
        decision = decide(r.ci95, tolerance, higher)
        out.append(ABMetric(point=point, metric=r.metric, higher_is_better=higher, baseline=r.mean_a,
                            candidate=r.mean_b, ratio=rounded(r.ratio), ci95=rounded(r.ci95), pairs=len(r.logs),
                            tolerance=tolerance, looks=looks, decision=decision,
                            blocks_to_decide=(blocks_to_decide(r.logs, tolerance, max_cycles, higher)
                                              if decision == INCONCLUSIVE else None)))
    return out
