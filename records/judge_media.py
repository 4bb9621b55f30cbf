"""The judge's media points (``records.judge``'s benchmarks section, beside the LLM points of
``records.judge_benchmarks``): ``check_tier``'s rules for named metrics (``check_metric_tier``), every
tier target decided on its figure's 95% interval (``media_tier_checks``) and the error-rate rule.
"""
from __future__ import annotations

from typing import Any, Iterable

from contracts.intervals import FAIL, INCONCLUSIVE, Interval
from contracts.intervals import decide as decide_interval
from contracts.model_spec import metric_higher_is_better
from records.bench import format_classes
from records.judge_checks import (
    DEFAULT_MAX_ERROR_RATE,
    MIN_DECIDING_SAMPLES,
    Decided,
    Settled,
    error_rate_check,
    errors_within,
    fmt_ci,
    target_value,
)
from records.report import Blocker, Check, MediaRow, MediaTierCheck


def media_target_decision(metric: str, interval: Interval | None, target: float) -> str:
    """pass / fail / inconclusive of one media target on its figure's interval, the direction from the
    metric's name (``media_tier_checks`` judges with it, the media benchmark's adaptive stop too)."""
    return decide_interval(interval, target, metric_higher_is_better(metric))


def media_error_check(row: MediaRow, allowed: float) -> Check:
    total = row.num_requests or 0
    failed = total - (row.completed or 0)
    classes = format_classes(row.failures_by_class) or "unclassified"
    return error_rate_check(row.key, failed, total, allowed,
                            f"{failed} of {total} requests failed ({classes}) > allowed {allowed:g}")


def check_metric_tier(tier: str, required: bool, targets: dict[str, Any] | None,
                      measured: dict[str, float | None] | None, error_rate: float | None,
                      max_error_rate: float = DEFAULT_MAX_ERROR_RATE, requests: int | None = None) -> MediaTierCheck:
    """``check_tier``'s rules for named metrics (media points): a null target is not checked, a
    target without a measurement fails, a measured 0 is a measurement, and a point whose error
    rate exceeds the allowance fails every tier that sets a target. ``measured`` None: the point
    did not run (nothing judged). Direction comes from the metric's name
    (``contracts.model_spec.metric_higher_is_better``)."""
    check = MediaTierCheck(tier=tier, required=required,
                           targets={k: t for k, v in (targets or {}).items() if (t := target_value(v)) is not None})
    if measured is None:
        return check
    outcomes = []
    for name, target in check.targets.items():
        value = measured.get(name)
        if value is None:
            check.missing.append(name)
            outcomes.append(False)
            continue
        check.ratios[name] = round(value / target, 6)
        ok = value >= target if metric_higher_is_better(name) else value <= target
        if not ok:
            check.failed_metrics.append(name)
        outcomes.append(ok)
    check.error_rate_pass = errors_within(error_rate, max_error_rate, requests)
    check.passed = (all(outcomes) and check.error_rate_pass) if outcomes else None
    return check


def media_tier_checks(row: MediaRow, tier: MediaTierCheck, required: bool, error_rate_failed: bool = False,
                      smoke: bool = False) -> Decided:
    """One check per target a media tier sets, decided on the figure's 95% interval (``row.ci95``, from
    the point's per-request rows: ``records.media_estimates``), with ``tier_target_checks``' rules: a
    point that did not run is inconclusive (its own blocker fails a required tier), a figure without a
    measurement fails, the interval decides, a point whose error rate fails its check fails every target
    its interval did not already fail, and no interval is inconclusive. In a smoke run an inconclusive
    target is shown, not required (a smoke point's few requests only prove the path works)."""
    out = []
    for metric, target in tier.targets.items():
        value = row.figures.get(metric) if row.ran else None
        ci, n = row.ci95.get(metric), row.samples.get(metric, row.completed)
        missed, detail = False, None
        if not row.ran:
            decision, detail = INCONCLUSIVE, "the point did not run"
        elif metric in tier.missing or value is None:
            decision, missed, detail = FAIL, True, f"{metric} not measured"
        else:
            decision = media_target_decision(metric, None if ci is None else Interval(ci[0], ci[1], ""), target)
            missed = decision == FAIL
            if error_rate_failed and decision != FAIL:
                decision, detail = FAIL, ("the point's error rate exceeds max_error_rate: a target met by the "
                                          "requests that succeeded is not met")
            elif ci is None:
                detail = (f"{n or 0} completed requests: fewer than {MIN_DECIDING_SAMPLES}, or no per-request rows "
                          f"for {metric}, cannot decide it; more requests can (mode=ci, full)")
            elif decision == INCONCLUSIVE:
                detail = "the 95% interval holds the target: more requests can decide it (mode=full)"
            if row.not_deciding:  # another client's load or uncounted answers: not this server's figure
                decision, missed, detail = INCONCLUSIVE, False, row.not_deciding
        needed = required
        if smoke and row.ran and decision == INCONCLUSIVE:
            needed, detail = False, f"{detail}; a smoke run cannot decide it: not required (mode=ci decides it)"
        out.append((metric, Check(name=f"{metric} {row.key} {tier.tier}", category="benchmarks", item=row.key,
                                  required=needed, value=value, ci95=ci,
                                  ci_method=row.ci_methods.get(metric) if ci else None, n=n, target=target,
                                  decision=decision, detail=detail), missed))
    return out


def media_checks(rows: Iterable[MediaRow], tiers: list[str], max_error_rate: float,
                 smoke: bool = False, settle: list[Settled] | None = None) -> tuple[list[Check], list[Blocker]]:
    """Checks and blockers of media points: the error-rate rule of every point that ran (any status), and
    every tier target decided on its interval; a required perf-reference point not run, or a required
    target whose whole interval misses it, blocks. ``settle`` collects (tier, its checks, ran) for
    ``settle_decisions``."""
    checks, out = [], []
    for row in rows:
        error_failed = False
        if row.ran:
            error = media_error_check(row, max_error_rate)
            checks.append(error)
            error_failed = error.decision == FAIL
            if error_failed:
                out.append(Blocker("benchmarks", row.key, error.detail or ""))
        for tier in row.tiers:
            required = tier.tier in tiers
            decided = media_tier_checks(row, tier, required, error_failed, smoke)
            checks.extend(c for _, c, _ in decided)
            if settle is not None:
                settle.append((tier, decided, row.ran))
            if not required:
                continue
            if not row.ran:
                out.append(Blocker("benchmarks", row.key, "perf-reference point was not run", tier.tier))
                continue
            parts = [f"{c.name.split()[0]} not measured" if c.value is None else
                     f"{c.name.split()[0]} {_fmt_num(c.value)} vs target {c.target:g}"
                     + (f" (95% CI {fmt_ci(c.ci95)}, n={c.n})" if c.ci95 else "")
                     for _, c, missed in decided if missed]
            if parts:
                out.append(Blocker("benchmarks", row.key, f"{tier.tier}: " + "; ".join(parts), tier.tier))
    return checks, out


def _fmt_num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"
