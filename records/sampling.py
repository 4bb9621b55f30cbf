"""Adaptive sample size of a benchmark point: the one stop rule of LLM and media points.

A point sends its minimum, then further rounds until every required target check it feeds is decided
on its 95% interval, or its precision goal is met (interval half-width at most ``precision`` of the
value), bounded by its sampling budget and a request cap; the point record says which
(``records.bench.PointSampling``). The sampling budget never stops a point that feeds a required check
below ``MIN_DECIDING_SAMPLES`` (fewer samples cannot decide any check, so stopping there would leave it
inconclusive by design on a slow or busy host): the point's own budget, its cap and a signal still bound it.

Why in records, and why the estimates come in as an argument: a point must stop exactly when the report
could decide it, so the rule judges each check on the estimate and with the decision the report uses
(LLM points: ``records.judge.target_estimates`` and ``target_decision``; media points:
``records.media_estimates.figure_estimates`` and ``records.judge.media_target_decision``). Both client
packages (benchmarking, media_clients) use the rule, and a client package may not import another
(tests/contracts/test_no_import_cycles.py), so it lives below them, beside the estimates.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from contracts.intervals import Interval
from records.bench import PointSampling
from records.judge import MIN_DECIDING_SAMPLES, Estimate

#: Precision goal of an adaptive point: 95% half-width at most this share of the value.
DEFAULT_PRECISION = 0.05
#: Seconds of measured requests per point after which no further round starts, per mode.
DEFAULT_SAMPLE_BUDGETS = {"smoke": 30.0, "ci": 60.0, "full": 300.0}
#: A point sends at most this many times its minimum.
MAX_REQUESTS_FACTOR = 16


def sampling_setting(key: str, raw: str) -> float:
    """The value of workflow arg ``precision`` or ``sample_budget_s``, or ValueError with the one line
    that names what is wrong. Both benchmark clients (LLM and media) parse the two settings here, so a
    value one accepts the other never refuses."""
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"workflow arg {key}={raw!r} is not a number") from None
    if math.isnan(value) or value <= 0:
        raise ValueError(f"workflow arg {key}={raw!r} must be > 0")
    if key == "precision" and value >= 1:
        raise ValueError(f"precision={raw!r} must be a share below 1 (e.g. 0.05)")
    return value


#: The report's decision of one check: (metric key, its 95% interval or None, target) -> pass/fail/inconclusive.
Decide = Callable[[str, "Interval | None", float], str]


@dataclass
class SampleGoal:
    """What an adaptive point must reach: the required target checks it feeds (name, metric key,
    target), its precision goal, its minimum and cap, and its sampling budget (s). ``users`` is the
    LLM point's concurrent users (its decode throughput is t/s/u times them); media points leave it 1."""

    checks: list[tuple[str, str, float]]
    min_requests: int
    concurrency: int
    users: int = 1
    precision: float = DEFAULT_PRECISION
    budget_s: float = DEFAULT_SAMPLE_BUDGETS["ci"]
    max_requests: int = field(default=0)

    def __post_init__(self) -> None:
        self.max_requests = self.max_requests or self.min_requests * MAX_REQUESTS_FACTOR


def goal_checks(point_key: str, targets: Mapping[str, Any], required: Iterable[str],
                metrics: Iterable[str] | None = None) -> list[tuple[str, str, float]]:
    """(check name, metric key, target) of every target the point's required tiers set, named as the
    report's verdict.checks name them (``<metric> <point> <tier>``). ``targets`` is tier -> {metric:
    target}; ``metrics`` the metrics a check may be on, in that order (None: every metric the tier
    names, in its order). A target that is not a positive number is not checked (the report's rule)."""
    required = set(required)
    out = []
    for tier, tier_targets in (targets or {}).items():
        if tier not in required or not isinstance(tier_targets, Mapping):
            continue
        for key in (list(tier_targets) if metrics is None else metrics):
            value = tier_targets.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                out.append((f"{key} {point_key} {tier}", key, float(value)))
    return out


def deciding_minimum(concurrency: int) -> int:
    """The fewest requests, in whole rounds of ``concurrency``, that can decide a check."""
    concurrency = max(1, concurrency)
    return -(-MIN_DECIDING_SAMPLES // concurrency) * concurrency


@dataclass
class SampleState:
    """The stop rule's answer after a round: why to stop (None: go on), the decisions, and the size
    of the next round."""

    stop_reason: str | None
    decisions: dict[str, str]
    next_round: int
    detail: str

    def record(self, goal: SampleGoal, requests: int, rounds: int) -> PointSampling:
        """The point record's account of its sample size at this stop."""
        return PointSampling(min_requests=goal.min_requests, requests=requests, rounds=rounds,
                             stop_reason=self.stop_reason or "", precision=goal.precision, budget_s=goal.budget_s,
                             decisions=dict(self.decisions), detail=self.detail)


def _precise_enough(estimate: Estimate | None, precision: float) -> bool:
    """The estimate's interval is at most ``precision`` of its (non-zero) value on either side."""
    if estimate is None or estimate.interval is None or not estimate.value:
        return False
    return estimate.interval.half_width() <= precision * abs(estimate.value)


def sampling_stop(goal: SampleGoal, estimates: Mapping[str, Estimate], decide: Decide, sent: int, failed: int,
                  elapsed_s: float, cut_short: bool = False) -> SampleState:
    """Decide whether an adaptive point sends another round (see the module docstring).

    ``estimates`` are the report's estimates of the point's metrics from the samples so far (a metric
    without one has no interval: its checks are undecided); ``decide`` the report's decision of one
    check; ``sent`` counts measured requests sent so far, ``failed`` those that failed, ``elapsed_s``
    the measured requests' seconds so far. The next round is sized from the widest undecided interval:
    a half-width shrinks about as 1/sqrt(n), so reaching the gap to the target (or the precision goal)
    needs n * (half-width / gap)^2 requests, sent in at most as many requests again as so far, in whole
    multiples of the concurrency."""
    def interval(key: str) -> Interval | None:
        est = estimates.get(key)
        return None if est is None else est.interval

    decisions = {name: decide(key, interval(key), target) for name, key, target in goal.checks}
    undecided = [(name, key, target) for name, key, target in goal.checks if decisions[name] == "inconclusive"]
    keys = sorted({key for _, key, _ in goal.checks})
    precise = bool(keys) and all(_precise_enough(estimates.get(k), goal.precision) for k in keys)
    needed = sent
    for _, key, target in undecided:
        e = estimates.get(key)
        if e is None or e.interval is None or not e.value:
            needed = max(needed, MIN_DECIDING_SAMPLES, 2 * sent)
            continue
        gap = abs(e.value - target)
        half = e.interval.half_width()
        to_decide = sent * (half / gap) ** 2 if gap > 0 else math.inf
        to_precise = sent * (half / (goal.precision * abs(e.value))) ** 2
        needed = max(needed, math.ceil(min(to_decide, to_precise) * 1.1))
    step = max(goal.concurrency, min(needed - sent, sent))
    step = math.ceil(step / goal.concurrency) * goal.concurrency
    step = min(step, goal.max_requests - sent)
    per_request = elapsed_s / sent if sent else 0.0
    summary = ", ".join(f"{name} {d}" for name, d in decisions.items())
    if not goal.checks:
        reason, detail = "no_checks", f"{sent} requests; no required target check"
    elif not undecided:
        reason, detail = "decided", f"{sent} requests: {summary}"
    elif precise:
        reason, detail = "precision", (f"{sent} requests: every interval within {goal.precision:.0%} of its value; "
                                       f"still undecided: {', '.join(n for n, _, _ in undecided)}")
    elif failed:
        reason, detail = "failed_requests", f"{failed} of {sent} requests failed"
    elif cut_short:
        reason, detail = "cut_short", f"{sent} requests; the last round was cut short"
    elif step <= 0:
        reason, detail = "max_requests", f"{sent} requests reached the cap {goal.max_requests}; {summary}"
    elif elapsed_s + per_request * step > goal.budget_s and sent >= MIN_DECIDING_SAMPLES:
        reason, detail = "sample_budget", (f"{sent} requests in {elapsed_s:.1f} s; {step} more would overrun "
                                           f"{goal.budget_s:g} s; {summary}")
    else:
        return SampleState(None, decisions, step, f"{sent} requests: {summary}; {step} more")
    return SampleState(reason, decisions, 0, detail)


__all__ = ["DEFAULT_PRECISION", "DEFAULT_SAMPLE_BUDGETS", "MAX_REQUESTS_FACTOR", "Decide", "SampleGoal", "SampleState",
           "deciding_minimum", "goal_checks", "sampling_stop"]
