"""``AgreementRecord``: do two load generators measuring one server agree? (``tt-agreement/1``), stdlib only.

Why: every load generator asks its users to take its numbers on faith, and two runs of one tool already
differ by 10-20% on a busy host. With ``--workflow-args agreement=TOOL`` the benchmarks workflow measures
each judged point with our client (A) and the named tool (B) in interleaved blocks, A B B A A B B A ...
(ABBA: a drift of the server or host over the run hits both tools alike and cancels within each cycle).

The statistic (``ratio_interval``): the unit is the block, not the request, because requests of one block
share the host's state and are not independent. Each half-cycle (A B or B A) is a pair; per metric the
pair gives log(B / A) of the block values; the mean of those log ratios over the pairs, with a Student t
interval on pairs - 1 degrees of freedom, exponentiated, is the ratio tool / ours with its 95% interval.
Sampling is sequential (``agreement_stop``): after each whole cycle from the second on, every metric is
looked at and sampling stops once all are decided or the cycle budget ends. The interval of each look uses
alpha / looks (a union bound over the planned looks), so looking after every cycle does not inflate the
error rate; tests/records/test_agreement.py measures the false agree / disagree rates by simulation.

Decision against the noise band ``band`` (a share, e.g. 0.10): ``agree`` when the whole interval lies within
[1 / (1 + band), 1 + band], ``disagree`` when it lies wholly outside, ``inconclusive`` otherwise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist, mean, stdev
from typing import Any, Sequence

from contracts.sequential import student_t_equivalent
from contracts.typed_record import TypedRecord, described

SCHEMA = "tt-agreement/1"
AGREE, DISAGREE, INCONCLUSIVE = "agree", "disagree", "inconclusive"
#: metric -> (what it is, higher is better)
METRICS: dict[str, tuple[str, bool]] = {
    "mean_ttft_ms": ("mean time to first token of the block's completed requests (ms)", False),
    "mean_tpot_ms": ("mean time per output token after the first of the block's completed requests (ms)", False),
    "output_tok_s": ("output tokens of the block's completed requests / the block's duration (tokens/s)", True),
}
METHOD = ("ABBA blocks; per pair of adjacent blocks log(tool / ours); Student t interval of the mean log ratio "
          "on pairs - 1 degrees of freedom at alpha 0.05 / planned looks, exponentiated")
#: Pairs needed before an interval is made (one whole ABBA cycle gives two).
MIN_PAIRS = 2


@dataclass
class AgreementBlock(TypedRecord):
    """One block of requests sent by one of the two tools."""

    index: int = described("Position in the run order (0-based).")
    side: str = described("A: our client's block; B: the compared tool's (with agreement=ours, our client again).")
    tool: str = described("Who sent it: tt-bench (our client) or the named tool.")
    requests: int = described("Requests sent.")
    completed: int = described("Requests that completed.")
    duration_s: float = described("The block's duration as its tool measured it (s).")
    values: dict[str, float | None] = described("Metric -> the block's value (METRICS).", factory=dict)
    raw_file: str | None = described("The tool's own output for the block, relative to the run directory.", None)


@dataclass
class AgreementMetric(TypedRecord):
    """One metric of one point: the tool's value over ours, with its interval and decision."""

    point: str = described("Point key (isl-128_osl-32_con-1).")
    tool: str = described("The tool compared with our client.")
    metric: str = described("mean_ttft_ms, mean_tpot_ms or output_tok_s (see METRICS).")
    ours: float | None = described("Mean of our client's block values.", None)
    theirs: float | None = described("Mean of the tool's block values.", None)
    ratio: float | None = described("Geometric mean over the pairs of tool / ours.", None)
    ci95: list[float] | None = described("95% interval of the ratio (METHOD); null with fewer than 2 pairs.", None)
    pairs: int = described("Pairs of adjacent blocks behind the ratio.", 0)
    band: float = described("Noise band: agree when the interval lies within [1/(1+band), 1+band].", 0.10)
    looks: int = described("Times the pairs were looked at before the stop.", 0)
    stopped: str = described("decided (every metric decided) or budget (cycles or time ran out first).", "budget")
    decision: str = described("agree, disagree or inconclusive (module docstring).", INCONCLUSIVE)

    @property
    def name(self) -> str:
        """The verdict check's name: 'agreement <metric> <point> <tool>'."""
        return f"agreement {self.metric} {self.point} {self.tool}"

    def detail(self) -> str:
        both = f"ours {_fmt(self.ours)}, {self.tool} {_fmt(self.theirs)}"
        return (f"{self.decision}: {self.metric} {both}; ratio {_fmt(self.ratio, 3)} (95% CI "
                f"{'n/a' if self.ci95 is None else f'{self.ci95[0]:.3f}-{self.ci95[1]:.3f}'}) over {self.pairs} "
                f"pairs; band ±{self.band:.0%}")


@dataclass
class AgreementRecord(TypedRecord):
    """One point measured alternately by our client and another tool."""

    SCHEMA = SCHEMA

    point: str = described("Point key.")
    tool: str = described("The tool compared with our client.")
    tool_version: str | None = described("The tool's installed version.", None)
    band: float = described("The noise band of the decisions (share).", 0.10)
    max_cycles: int = described("ABBA cycles the run may use (agreement_cycles).", 4)
    block_requests: int = described("Requests per block.", 0)
    method: str = described("How each interval is made.", METHOD)
    blocks: list[AgreementBlock] = described("Every block in run order.", factory=list, record_list=AgreementBlock)
    metrics: list[AgreementMetric] = described("One decision per metric.", factory=list, record_list=AgreementMetric)
    stopped: str = described("decided, budget, interrupted or failed (a block of either tool could not run).",
                             "budget")
    notes: list[str] = described("What the reader must know: a failed block, a tool that could not run.",
                                 factory=list)


def _fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def abba_order(cycles: int) -> list[str]:
    """'A' (ours) / 'B' (the tool) for ``cycles`` ABBA cycles: A B B A A B B A ..."""
    return [side for _ in range(cycles) for side in ("A", "B", "B", "A")]


def block_values(ttfts_s: Sequence[float], tpots_s: Sequence[float], output_tokens: int,
                 duration_s: float) -> dict[str, float | None]:
    """One block's metric values from its completed requests' TTFTs and TPOTs (s) and its output tokens."""
    return {"mean_ttft_ms": mean(ttfts_s) * 1000.0 if ttfts_s else None,
            "mean_tpot_ms": mean(tpots_s) * 1000.0 if tpots_s else None,
            "output_tok_s": output_tokens / duration_s if duration_s > 0 and output_tokens else None}


def log_ratios(sides: Sequence[str], values: Sequence[float | None]) -> list[float]:
    """log(B / A) per pair of adjacent blocks (0-1, 2-3, ...); a pair with a missing or non-positive value
    is left out."""
    out = []
    for k in range(0, len(sides) - 1, 2):
        by_side = dict(zip(sides[k:k + 2], values[k:k + 2]))
        a, b = by_side.get("A"), by_side.get("B")
        if a is not None and b is not None and a > 0 and b > 0:
            out.append(math.log(b / a))
    return out


def ratio_interval(logs: Sequence[float], looks: int = 1) -> tuple[float, list[float]] | None:
    """(ratio, [low, high]) from the pairs' log ratios: exp(mean ± t * sd / sqrt(pairs)), t at two-sided
    alpha 0.05 / ``looks`` on pairs - 1 degrees of freedom; None below ``MIN_PAIRS``."""
    if len(logs) < MIN_PAIRS:
        return None
    centre = mean(logs)
    spread = stdev(logs) / math.sqrt(len(logs))
    z = NormalDist().inv_cdf(1 - 0.025 / max(1, looks))
    half = student_t_equivalent(z, len(logs) - 1) * spread
    return math.exp(centre), [math.exp(centre - half), math.exp(centre + half)]


def decide(ci: list[float] | None, band: float) -> str:
    """agree / disagree / inconclusive of an interval of the ratio against the band (module docstring)."""
    if ci is None:
        return INCONCLUSIVE
    low_edge, high_edge = 1.0 / (1.0 + band), 1.0 + band
    if ci[0] >= low_edge and ci[1] <= high_edge:
        return AGREE
    if ci[0] > high_edge or ci[1] < low_edge:
        return DISAGREE
    return INCONCLUSIVE


#: The fewest ABBA cycles a run uses: the first look comes after the second cycle (four pairs; two pairs give
#: a t interval on one degree of freedom, too wide to decide anything, so looking there would only spend alpha).
MIN_CYCLES = 2


def planned_looks(max_cycles: int) -> int:
    """Looks the rule may take: after each whole cycle from the second (each cycle adds two pairs)."""
    return max(1, max_cycles - MIN_CYCLES + 1)


@dataclass(frozen=True)
class PairedRatio:
    """One metric over a run's blocks: the pairs' log(B / A), the ratio B / A with its interval (unrounded; None
    below ``MIN_PAIRS``) and both sides' means. What any ABBA comparison decides on (agreement here, ``records.ab``)."""

    metric: str
    logs: list[float]
    ratio: float | None
    ci95: list[float] | None
    mean_a: float | None
    mean_b: float | None


def paired_ratios(blocks: Sequence[AgreementBlock], max_cycles: int) -> list[PairedRatio]:
    """Every metric's paired ratio B / A over ``blocks`` (run order), its interval at alpha 0.05 over the
    looks ``max_cycles`` plans (``ratio_interval``)."""
    sides = [b.side for b in blocks]
    out = []
    for metric in METRICS:
        values = [b.values.get(metric) for b in blocks]
        logs = log_ratios(sides, values)
        ci = ratio_interval(logs, planned_looks(max_cycles))
        side_a = [v for s, v in zip(sides, values) if s == "A" and v is not None]
        side_b = [v for s, v in zip(sides, values) if s == "B" and v is not None]
        out.append(PairedRatio(metric, logs, None if ci is None else ci[0], None if ci is None else ci[1],
                               mean(side_a) if side_a else None, mean(side_b) if side_b else None))
    return out


def judge_metrics(point: str, tool: str, blocks: Sequence[AgreementBlock], band: float, max_cycles: int,
                  looks: int) -> list[AgreementMetric]:
    """Every metric's ratio, interval and decision over ``blocks`` (run order)."""
    return [AgreementMetric(point=point, tool=tool, metric=r.metric, ours=r.mean_a, theirs=r.mean_b,
                            ratio=rounded(r.ratio), ci95=rounded(r.ci95), pairs=len(r.logs), band=band, looks=looks,
                            decision=decide(r.ci95, band))
            for r in paired_ratios(blocks, max_cycles)]


def rounded(value: Any) -> Any:  # a float or a [low, high] list, as given: callers keep their own type
    """A ratio or its interval as records keep them (4 decimals); None stays None."""
    if value is None:
        return None
    return [round(x, 4) for x in value] if isinstance(value, list) else round(value, 4)


def agreement_stop(metrics: Sequence[AgreementMetric]) -> bool:
    """Sampling may stop: every metric is decided (agree or disagree)."""
    return bool(metrics) and all(m.decision != INCONCLUSIVE for m in metrics)


def settle(record: AgreementRecord, stopped: str) -> AgreementRecord:
    """Mark how sampling stopped on the record and each metric."""
    record.stopped = stopped
    for m in record.metrics:
        m.stopped = "decided" if stopped == "decided" else "budget" if m.decision == INCONCLUSIVE else "decided"
    return record
