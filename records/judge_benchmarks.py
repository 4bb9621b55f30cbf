"""The judge's benchmarks section (``records.judge``): LLM points against the perf-reference targets,
the error-rate rule of every point, and the media points (``records.judge_media``) beside them.

``check_tier`` is the only place that decides whether a tier passes on a point's values (the benchmarks
workflow's console table uses it too); ``tier_target_checks`` decides every target a tier sets on its
95% interval (``target_estimates``); ``settle_decisions`` writes the verdict's final decisions back
into the tier records. ``judge_benchmarks`` is the section as the verdict takes it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from contracts.intervals import FAIL, INCONCLUSIVE, Interval
from contracts.intervals import decide as decide_interval
from contracts.sequential import mean_cs
from records.bench import BenchPoint, format_classes
from records.judge_checks import (
    DEFAULT_MAX_ERROR_RATE,
    MIN_DECIDING_SAMPLES,
    Decided,
    SectionJudgement,
    Settled,
    error_rate_check,
    errors_within,
    fmt_ci,
    target_value,
)
from records.judge_media import media_checks
from records.report import BenchmarkRow, Blocker, Check, MediaRow, MediaTierCheck, TargetRow, TierCheck

#: The three targets a tier may set: target key -> (label in blockers, higher is better).
TARGET_CHECKS: dict[str, tuple[str, bool]] = {
    "ttft_ms": ("TTFT", False), "tput_user": ("t/s/u", True), "tput": ("decode tput", True)}


def measured_values(point: BenchPoint) -> dict[str, float | None]:
    """What each target is compared with: mean TTFT, t/s/u and decode throughput of the point."""
    m = point.metrics
    return {"ttft_ms": m.mean_ttft_ms, "tput_user": m.tput_user, "tput": m.decode_throughput}


BOOTSTRAP_ITERATIONS = 2000
TARGET_CI_METHOD = ("anytime-valid asymptotic confidence sequence (normal mixture; Waudby-Smith et al. 2021) over "
                    "batch means of the point's completed requests in request order, one batch per round of its "
                    "concurrent users (mean TTFT; t/s/u and decode throughput from the mean TPOT): valid at "
                    "every round the adaptive stop looks at")


@dataclass(frozen=True)
class Estimate:
    """One target metric of a point from its per-request samples: the value, its 95% interval (None
    with fewer than MIN_DECIDING_SAMPLES samples) and the samples behind it."""

    value: float | None
    interval: Interval | None
    n: int


def target_estimates(ttfts_ms: list[float], tpots_ms: list[float], users: int) -> dict[str, Estimate]:
    """The three target metrics (``TARGET_CHECKS``) with 95% intervals from per-request values.

    TTFT is the mean of the requests' TTFTs; t/s/u is 1000 / mean TPOT and decode throughput that
    times ``users`` (``records.bench.BenchMetrics``), so their intervals are the TPOT mean's interval
    mapped through the same formulas.

    The intervals are anytime-valid confidence sequences (``contracts.sequential.mean_cs``), not fixed-n
    intervals: the benchmark's adaptive stop (``records.sampling.sampling_stop``) looks after every
    round and stops at the first look that decides, and a fixed-n 95% interval looked at that often
    decides wrongly far more than 5% of the time; a confidence sequence holds at every look at once
    (tests/records/test_sequential_error_rates.py shows the error rates of the whole stop rule). The
    values must come in request order: requests in flight together queue behind each other, so the
    sequence is over means of batches of ``users`` consecutive requests (one round of the closed loop).
    A deterministic function of the samples: the benchmark's adaptive stop and the report judge agree.
    None with fewer than MIN_DECIDING_SAMPLES samples or fewer than 2 batches (``mean_cs``)."""
    def mean_interval(values: list[float]) -> Interval | None:
        if len(values) < MIN_DECIDING_SAMPLES:
            return None
        interval = mean_cs(values, batch=max(1, int(users)))
        # a latency's mean is never negative: cutting the interval to where the mean can be keeps its coverage
        return None if interval is None else Interval(max(0.0, interval.low), interval.high, interval.method)

    ttft = mean_interval(ttfts_ms)
    tpot = mean_interval(tpots_ms)
    mean_tpot = sum(tpots_ms) / len(tpots_ms) if tpots_ms else None
    tput_user = 1000.0 / mean_tpot if mean_tpot else None
    per_user = (Interval(1000.0 / tpot.high, 1000.0 / tpot.low, TARGET_CI_METHOD)
                if tpot is not None and tpot.low > 0 else None)
    return {
        "ttft_ms": Estimate(sum(ttfts_ms) / len(ttfts_ms) if ttfts_ms else None,
                            None if ttft is None else Interval(ttft.low, ttft.high, TARGET_CI_METHOD), len(ttfts_ms)),
        "tput_user": Estimate(tput_user, per_user, len(tpots_ms)),
        "tput": Estimate(None if tput_user is None else tput_user * users,
                         None if per_user is None else Interval(per_user.low * users, per_user.high * users,
                                                                TARGET_CI_METHOD), len(tpots_ms)),
    }


def target_decision(key: str, interval: Interval | None, target: float) -> str:
    """pass / fail / inconclusive of one target metric on its interval (``contracts.intervals.decide``)."""
    return decide_interval(interval, target, TARGET_CHECKS[key][1])


def benchmark_error_checks(rows: Sequence[BenchmarkRow], allowed: float) -> list[Check]:
    """The error-rate check of every point, in ``rows``' order; a point whose key another point shares
    (another prompt count, a workload of the same shape) is named after its point file."""
    keys = [row.key for row in rows]
    out = []
    for row in rows:
        failed = sum(row.failures_by_class.values()) or (row.failed or 0)
        label = None
        if keys.count(row.key) > 1:
            label = (row.point_file.rsplit("/", 1)[-1].removesuffix(".json").removeprefix("point_")
                     if row.point_file else f"{row.key}_n-{row.num_prompts}")
        out.append(error_rate_check(row.key, failed, (row.completed or 0) + failed, allowed,
                                    error_rate_detail(row, allowed), label=label))
    return out


def error_rate_detail(row: BenchmarkRow, allowed: float) -> str:
    """'isl 128/osl 128/con 4: 3 of 8 requests failed (http_5xx 2, connection_reset 1) > allowed 0'."""
    failed = sum(row.failures_by_class.values()) or (row.failed or 0)
    total = (row.completed or 0) + failed
    classes = format_classes(row.failures_by_class) or "unclassified"
    what = (f"{failed} of {total} requests failed ({classes})" if total
            else "no request was measured")
    return (f"isl {row.isl}/osl {row.osl}/con {row.max_concurrency}: {what} "
            f"> allowed {allowed:g}")


def check_tier(tier: str, required: bool, targets: dict[str, Any] | None,
               point: BenchPoint | None, max_error_rate: float = DEFAULT_MAX_ERROR_RATE) -> TierCheck:
    """The one judge of a tier: compare one point's measurements with one tier's targets.

    - ``point`` None: the point did not run; the check keeps the targets and judges nothing.
    - A target that is not set (null, or not a positive number) is not checked and is listed
      in ``unchecked``.
    - A target that is set but has no measurement (no request completed, or one output token
      each so there is no TPOT) fails and is listed in ``missing``: nothing shows it was met.
    - A measurement of 0 is a measurement: a mean TTFT of 0.0 ms meets any positive target.
    - A point whose error rate exceeds ``max_error_rate`` fails every tier that sets a target:
      a target met by the requests that happened to succeed is not met.
    - ``passed`` is None when the tier sets no target or the point did not run.
    """
    targets = targets or {}
    check = TierCheck(tier=tier, required=required, ttft_ms=target_value(targets.get("ttft_ms")),
                      tput_user=target_value(targets.get("tput_user")), tput=target_value(targets.get("tput")))
    check.unchecked = [k for k in TARGET_CHECKS if getattr(check, k) is None]
    if point is None:
        return check
    measured = measured_values(point)
    outcomes = []
    for key, (_, higher) in TARGET_CHECKS.items():
        target, value = getattr(check, key), measured[key]
        if target is None:
            continue
        name = key.removesuffix("_ms")
        if value is None:
            check.missing.append(key)
            ok = False
        else:
            setattr(check, f"{name}_ratio", value / target)
            ok = value >= target if higher else value <= target
        setattr(check, f"{name}_pass", ok)
        outcomes.append(ok)
    check.error_rate_pass = errors_within(point.metrics.error_rate, max_error_rate, point.requests_total())
    check.passed = all(outcomes) and check.error_rate_pass if outcomes else None
    return check


def _measured(row: TargetRow) -> dict[str, float | None]:
    return {"ttft_ms": row.measured_ttft_ms, "tput_user": row.measured_tput_user, "tput": row.measured_tput}


def tier_target_checks(row: TargetRow, tier: TierCheck, required: bool) -> Decided:
    """One check per target the tier sets, decided on the metric's 95% interval (``row.ci95``):
    (target key, check, missed) where ``missed`` says the target itself was missed (not measured, or
    the whole interval beyond it), as opposed to failing only through the point's error rate.

    Order of the rules: a point that did not run is inconclusive (its own blocker fails a required
    tier); a target without a measurement fails; the interval decides; a point whose error rate
    exceeds the allowance fails every target its interval did not already fail (``check_tier``'s
    rule); no interval (fewer than MIN_DECIDING_SAMPLES requests, no per-request file) is
    inconclusive. A point that measured something else than this server under this point's load
    (``row.not_deciding``: contaminated, uncounted or client-bound, ``records.reconciliation``) decides
    nothing: its measured targets are inconclusive, naming why."""
    out = []
    measured = _measured(row)
    for key, (label, higher) in TARGET_CHECKS.items():
        target = getattr(tier, key)
        if target is None:
            continue
        ci, n = row.ci95.get(key), row.samples.get(key)
        missed = False
        detail = None
        if not row.ran:
            decision, detail = INCONCLUSIVE, "the point did not run"
        elif key in tier.missing or measured[key] is None:
            decision, missed, detail = "fail", True, f"{label} not measured"
        else:
            decision = INCONCLUSIVE if ci is None else target_decision(key, Interval(ci[0], ci[1], ""), target)
            missed = decision == "fail"
            if tier.error_rate_pass is False and decision != "fail":
                decision, detail = "fail", ("the point's error rate exceeds max_error_rate: a target met by the "
                                            "requests that succeeded is not met")
            elif ci is None:
                detail = (f"{n or 0} per-request samples: fewer than {MIN_DECIDING_SAMPLES} (or no per-request "
                          f"file) cannot decide it; more requests can (benchmarks sample_budget_s, mode=full)")
            elif decision == INCONCLUSIVE:
                detail = ("the 95% interval holds the target: more requests can decide it (benchmarks "
                          "sample_budget_s, mode=full)")
            if row.not_deciding:  # another's load, uncounted answers or a lagging client: not this server's figure
                decision, missed, detail = INCONCLUSIVE, False, row.not_deciding
        out.append((key, Check(name=f"{key} {row.key} {tier.tier}", category="benchmarks", item=row.key,
                               required=required, value=measured[key], ci95=ci,
                               ci_method=row.ci_method if ci else None, n=n, target=target, decision=decision,
                               detail=detail, looks=row.rounds, stopped=row.stop_reason), missed))
    return out


def _tier_failure_detail(row: TargetRow, check: TierCheck, missed: set[str]) -> str | None:
    """What a failed tier missed (the targets in ``missed``, each decided on its interval); None when
    its only failure is the point's error rate (the point's own blocker names the failure classes)."""
    measured = _measured(row)
    parts = []
    for key, (label, higher) in TARGET_CHECKS.items():
        target = getattr(check, key)
        unit = " ms" if key == "ttft_ms" else ""
        if key not in missed:
            continue
        if key in check.missing or measured[key] is None:
            parts.append(f"{label} not measured (target {_fmt(target)}{unit})")
        else:
            ci = row.ci95.get(key)
            parts.append(f"{label} {_fmt(measured[key])}{unit} {'<' if higher else '>'} target {_fmt(target)}{unit}"
                         + (f" (95% CI {fmt_ci(ci)}, n={row.samples.get(key)})" if ci else ""))
    return f"{check.tier} tier: " + "; ".join(parts) if parts else None


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def tier_decision(decisions: Iterable[str], ran: bool) -> str | None:
    """One decision for a tier at a point from its target checks' decisions: fail beats undecided beats
    waived beats pass (a tier passes only when every target it sets passed); None without targets."""
    decisions = list(decisions)
    if not decisions:
        return None
    if not ran:
        return "not_run"
    return next((d for d in (FAIL, INCONCLUSIVE, "waived") if d in decisions), "pass")


def _passed(decision: str | None) -> bool | None:
    return {"pass": True, FAIL: False}.get(decision or "")


def settle_decisions(settled: Iterable[Settled], targets: Iterable[TargetRow], benchmarks: Sequence[BenchmarkRow],
                     error_checks: list[Check]) -> None:
    """Write the verdict's final decisions (after waivers) into the tier records they judge.

    Why: ``check_tier`` compares the point's values with the targets, and a value can pass a target its
    95% interval cannot yet decide (507 ms against 500 is inconclusive, not a fail). A report that showed
    that beside the check would say two things about one claim; after this every tier record carries the
    check's decision (``<metric>_decision``, ``decision``, and ``passed``/``*_pass`` follow them), so every
    renderer shows the judge's one decision. ``settled`` holds (tier record, its target checks, ran)."""
    for tier, decided, ran in settled:
        decisions = {key: check.decision for key, check, _ in decided}
        tier.decision = tier_decision(decisions.values(), ran)
        tier.passed = _passed(tier.decision)
        if isinstance(tier, MediaTierCheck):
            tier.decisions = decisions
            continue
        for key in TARGET_CHECKS:
            setattr(tier, f"{key}_decision", decisions.get(key))
            setattr(tier, f"{key.removesuffix('_ms')}_pass", _passed(decisions.get(key)))
    by_file = {row.point_file: check for row, check in zip(benchmarks, error_checks) if row.point_file}
    for row in targets:
        error = by_file.get(row.point_file) if row.point_file else None
        if error is None:
            continue
        row.error_rate_decision = error.decision
        for tier in row.tiers:
            tier.error_rate_pass = _passed(error.decision)


@dataclass
class BenchmarksJudgement:
    """The benchmarks section: its checks, blockers and notes, plus what the verdict needs after waivers
    (``settle_decisions``) and whether its records explain a failed ``benchmarks`` step."""

    judgement: SectionJudgement
    error_checks: list[Check]
    settled: list[Settled]
    explains_failure: bool


def judge_benchmarks(benchmarks: Sequence[BenchmarkRow], targets: Sequence[TargetRow], media: Sequence[MediaRow],
                     tiers: list[str], allowed: float, points_chosen: str | None = None,
                     smoke: bool = False) -> BenchmarksJudgement:
    """Every point's error-rate check (a point clearly above ``allowed`` blocks, whatever the status), the
    LLM targets (``judge_targets``) and the media points (``records.judge_media.media_checks``), in that
    order. ``explains_failure``: failed requests, a media point's error rate, or a media tier that failed
    on its values show why the step exited non-zero."""
    error_checks = benchmark_error_checks(benchmarks, allowed)
    too_many_errors = [row for row, check in zip(benchmarks, error_checks) if check.decision == FAIL]
    media_settled: list[Settled] = []
    media_decided, media_raw = media_checks(media, tiers, allowed, smoke=smoke, settle=media_settled)
    explains = bool(too_many_errors) or any(b.tier is None for b in media_raw) or any(
        t.passed is False for r in media if r.ran for t in r.tiers)
    target_part, target_settled = judge_targets(targets, tiers, points_chosen)
    error_blockers = [Blocker("benchmarks", row.key, error_rate_detail(row, allowed)) for row in too_many_errors]
    judgement = SectionJudgement([*error_checks, *target_part.checks, *media_decided],
                                 [*error_blockers, *target_part.blockers, *media_raw], target_part.notes)
    return BenchmarksJudgement(judgement, error_checks, [*target_settled, *media_settled], explains)


def judge_targets(targets: Sequence[TargetRow], tiers: list[str],
                  points_chosen: str | None = None) -> tuple[SectionJudgement, list[Settled]]:
    """The perf-reference targets: every target of every tier as a check (``tier_target_checks``); a
    required tier blocks when its point did not run or a target's whole interval misses it. A point the
    user left out (``points_chosen``) blocks nothing: its checks are waived with that reason."""
    checks: list[Check] = []
    blockers: list[Blocker] = []
    settled: list[Settled] = []
    for row in targets:
        for check in row.tiers:
            decided = tier_target_checks(row, check, check.tier in tiers)
            checks.extend(c for _, c, _ in decided)
            settled.append((check, decided, row.ran))
            if not row.ran and points_chosen:
                for _, c, _ in decided:
                    c.decision, c.detail = "waived", f"not in this run: {points_chosen}"
                continue
            if check.tier in tiers:
                blockers.extend(_tier_blockers(row, check, decided))
    notes = ([f"perf-reference targets not judged: {points_chosen}"]
             if points_chosen and any(not row.ran for row in targets) else [])
    return SectionJudgement(checks, blockers, notes), settled


def _tier_blockers(row: TargetRow, check: TierCheck, decided: Decided) -> list[Blocker]:
    """A required tier's blocker: its point did not run, or it missed a target (``_tier_failure_detail``)."""
    if not row.ran:
        return [Blocker("benchmarks", row.key, "perf-reference point was not run", check.tier)]
    detail = _tier_failure_detail(row, check, {key for key, _, missed in decided if missed})
    return [] if detail is None else [Blocker("benchmarks", row.key, detail, check.tier)]
