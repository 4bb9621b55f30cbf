"""``EvalAB``: one eval task scored on both servers of an A/B, decided on the paired items (``tt-ab-eval/1``).

Why paired: two scores of 72 items each have binomial intervals about 12 points wide, so two independent
scores can show nothing short of a collapse. The same items scored on both servers differ only where the two
answer differently (the discordant pairs); an unchanged model answers nearly every item alike, so the share of
items it loses is bounded tightly long before the scores' own intervals are (McNemar's insight). Per item
``d = candidate - baseline`` in [-1, 1] splits into a gain ``max(0, d)`` and a loss ``max(0, -d)``, each in
[0, 1]; each share gets an anytime-valid confidence sequence at alpha/2 (``contracts.sequential.bounded_mean_cs``,
the one the sequential evals use), so the difference of the scores lies in
``[gain.low - loss.high, gain.high - loss.low]`` with 95% confidence; items scored 0 or 1 (most tasks) get the
tighter score interval for paired proportions, Tango's (``tango_paired``). As a ratio to the baseline's score it is
decided by the one rule of ``records.regression`` (accuracy: higher is better) against ``regression_tolerance``.
Stdlib only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from contracts.intervals import Z95
from contracts.sequential import bounded_mean_cs
from contracts.typed_record import TypedRecord, described
from records.regression import INCONCLUSIVE, decide_ratio

SCHEMA = "tt-ab-eval/1"
ALPHA = 0.05
METHOD_BINARY = ("paired 0/1 items: Tango's score interval for the difference of paired proportions (only the "
                 "discordant pairs move it), over the baseline's score as a ratio")
METHOD = ("paired items: per item candidate - baseline split into a gain and a loss share, each an anytime-valid "
          "confidence sequence at alpha/2 (Waudby-Smith & Ramdas); the difference's interval over the baseline's "
          "score as a ratio")


@dataclass
class EvalAB(TypedRecord):
    """One eval task on the baseline and on this run's server, the same items, decided on the pairs."""

    SCHEMA = SCHEMA

    task: str = described("lm-eval task.")
    metric: str = described("The scored metric ('acc,none').")
    baseline: str = described("The baseline as asked (--baseline-url URL or --baseline-vllm-args JSON).")
    items: int = described("Items scored on both servers (the first n of the task's fixed order).", 0)
    baseline_score: float | None = described("The baseline server's mean score over the items.", None)
    candidate_score: float | None = described("This run's server's mean score over the same items.", None)
    gains: int = described("Items this run's server scored higher than the baseline (discordant pairs won).", 0)
    losses: int = described("Items it scored lower (discordant pairs lost).", 0)
    difference_ci95: list[float] | None = described(
        "95% interval of candidate_score - baseline_score over the task (METHOD).", None)
    ratio: float | None = described("candidate_score / baseline_score.", None)
    ci95: list[float] | None = described("95% interval of the ratio: 1 + difference_ci95 / baseline_score.", None)
    tolerance: float = described("regression_tolerance of the decision (share).", 0.05)
    decision: str = described("regressed, improved, within_noise or inconclusive (records.regression).", INCONCLUSIVE)
    method: str = described("How the interval is made.", METHOD)
    items_to_decide: int | None = described(
        "Inconclusive only: about how many paired items would decide it at the gains and losses seen (null: more "
        "than 100000, or not estimated).", None)
    note: str | None = described("Why the task was not compared (then inconclusive), or what to know.", None)

    @property
    def name(self) -> str:
        """The verdict check's name: 'ab accuracy <task>'."""
        return f"ab accuracy {self.task}"

    def detail(self) -> str:
        if self.note and self.ci95 is None:
            return f"{self.decision}: {self.note}"
        ci = "n/a" if self.ci95 is None else f"{self.ci95[0]:.3f}-{self.ci95[1]:.3f}"
        return (f"{self.decision}: {self.metric} baseline {self.baseline_score:.4g}, candidate "
                f"{self.candidate_score:.4g} on the same {self.items} items ({self.gains} won, {self.losses} lost); "
                f"ratio {self.ratio} (95% CI {ci}); tolerance {self.tolerance:.0%}"
                + (f"; about {self.items_to_decide} items would decide it" if self.items_to_decide else ""))


def tango_paired(pairs: Sequence[tuple[float, float]], z: float = Z95) -> tuple[float, float]:
    """95% interval of the difference of two paired proportions (candidate - baseline) from 0/1 pairs: Tango's
    score interval (Stat. Med. 1998), the values of the difference its score test does not reject. Only the
    discordant pairs move it, and with none it still has the width n items allow (a Wald or Newcombe interval
    collapses there and would call 12 alike items "no change"). Solved by bisection on each side."""
    n = len(pairs)
    gains = sum(1 for c, b in pairs if c and not b)
    losses = sum(1 for c, b in pairs if b and not c)

    def score(delta: float) -> float:
        # Tango's notation: b = gains, c = losses; q is the restricted MLE of the losses' cell probability
        a, bb, cc = 2 * n, -gains - losses + (2 * n - gains + losses) * delta, -losses * delta * (1 - delta)
        q = (math.sqrt(max(0.0, bb * bb - 4 * a * cc)) - bb) / (2 * a)
        spread = n * (2 * q + delta * (1 - delta))
        gap = gains - losses - n * delta
        return gap / math.sqrt(spread) if spread > 0 else (0.0 if gap == 0 else math.copysign(math.inf, gap))

    centre = (gains - losses) / n

    def edge(outer: float) -> float:
        inside, outside = centre, outer
        for _ in range(60):
            mid = (inside + outside) / 2
            if abs(score(mid)) <= z:
                inside = mid
            else:
                outside = mid
        return inside

    return max(-1.0, edge(-1.0)), min(1.0, edge(1.0))


def paired_eval(task: str, metric: str, candidate: Sequence[float], baseline: Sequence[float], tolerance: float,
                asked: str, alpha: float = ALPHA) -> EvalAB:
    """The decision on the paired items (module docstring); ``candidate`` and ``baseline`` are per-item scores in
    [0, 1] in the same item order (only the common prefix is paired)."""
    n = min(len(candidate), len(baseline))
    record = EvalAB(task=task, metric=metric, baseline=asked, items=n, tolerance=tolerance)
    if n == 0:
        record.note = "no item was scored on both servers"
        return record
    pairs = list(zip(candidate[:n], baseline[:n]))
    record.candidate_score = round(sum(c for c, _ in pairs) / n, 6)
    record.baseline_score = round(sum(b for _, b in pairs) / n, 6)
    record.gains = sum(1 for c, b in pairs if c > b)
    record.losses = sum(1 for c, b in pairs if c < b)
    if all(v in (0.0, 1.0) for pair in pairs for v in pair):
        low, high = tango_paired(pairs)
        record.method = METHOD_BINARY
    else:
        gain = bounded_mean_cs([max(0.0, c - b) for c, b in pairs], alpha=alpha / 2)
        loss = bounded_mean_cs([max(0.0, b - c) for c, b in pairs], alpha=alpha / 2)
        low, high = gain.low - loss.high, gain.high - loss.low
    record.difference_ci95 = [round(low, 6), round(high, 6)]
    if record.baseline_score <= 0:
        record.note = "the baseline scored 0 on these items: no ratio (the difference's interval is shown)"
        return record
    base = record.baseline_score
    record.ratio = round(record.candidate_score / base, 4)
    record.ci95 = [round(max(1e-6, 1 + low / base), 4), round(1 + high / base, 4)]
    record.decision = decide_ratio(record.ci95, tolerance, True)
    if record.decision == INCONCLUSIVE and record.method == METHOD_BINARY:
        record.items_to_decide = items_to_decide(record.gains, record.losses, n, base, tolerance)
    return record


#: Most items ``items_to_decide`` reports; beyond it the estimate says "more than".
MOST_ITEMS = 100_000


def items_to_decide(gains: int, losses: int, n: int, base: float, tolerance: float) -> int | None:
    """About how many paired items would decide the task if its items kept this share of gains and losses (the
    counts scaled up; at least one discordant pair assumed per 100 items, as near-ties flip on another server):
    the smallest such count whose Tango interval decides; None beyond ``MOST_ITEMS``."""
    rate_g, rate_l = max(gains / n, 0.005), max(losses / n, 0.005)
    size = n
    while size <= MOST_ITEMS:
        size *= 2
        g, lost = round(rate_g * size), round(rate_l * size)
        pairs = [(1.0, 0.0)] * g + [(0.0, 1.0)] * lost + [(1.0, 1.0)] * max(0, size - g - lost)
        low, high = tango_paired(pairs)
        if decide_ratio([max(1e-6, 1 + low / base), 1 + high / base], tolerance, True) != INCONCLUSIVE:
            return size
    return None


__all__ = ["SCHEMA", "METHOD", "METHOD_BINARY", "MOST_ITEMS", "EvalAB", "items_to_decide", "tango_paired",
           "paired_eval"]
