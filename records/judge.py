"""Acceptance: turn one run's measurements into a PASS/FAIL verdict with named blockers.

One module over 500 lines on purpose: every rule that turns a benchmark or eval number into a
decision is read in one place, so the rules below cannot drift apart across files.

Rules (documented in the report legend too):

* The model's status decides which target tiers are enforced: EXPERIMENTAL none, FUNCTIONAL
  ``functional``, COMPLETE ``functional`` + ``complete``, TOP_PERF all three. Unknown statuses
  are treated as EXPERIMENTAL and say so in the verdict notes.
* Evals are enforced for every status but EXPERIMENTAL.
* A section is only judged when its workflow step was part of this run. A ``benchmarks``
  workflow does not fail because evals did not run, and vice versa; a step the manifest marks
  ``skipped`` is listed under ``sections_not_run`` and never blocks.
* Within a judged section: a perf-reference point that did not run, or a target check that
  fails, blocks when its tier is required; an eval with ``passed: false`` or status
  ``failed``/``error`` blocks; no eval records at all blocks; a failed test/stress record blocks.
* Failed requests count: every benchmark point's error rate (failed and never-sent requests over
  all its requests) is a check against the spec's ``device_model_spec.max_error_rate`` (default 0),
  decided on its 95% Wilson interval (``error_rate_check``; an allowance of 0 is exact: one failed
  request fails, none passes). A point whose rate clearly exceeds it blocks, whatever the status,
  with a blocker naming the failure classes and counts; and every tier with targets fails at that
  point (``check_tier``), since a target met by the requests that happened to succeed is not met.
* ``check_tier`` is the only place that decides whether a tier passes; the benchmarks workflow
  calls it too for its own console table.
* A manifest step with status ``failed`` blocks (the numbers after a crash are partial), unless
  it is a section whose own records show the failure (client workflows exit 1 when their own
  checks fail): then those records are judged item by item, so waivers and tiers apply.
* Every target a tier sets is a check decided on its 95% interval (``tier_target_checks``: an
  anytime-valid confidence sequence over the point's per-request records, ``target_estimates``): a required tier's target blocks only
  when its whole interval misses it; a target whose interval holds it (or a point with fewer than
  ``MIN_DECIDING_SAMPLES`` requests) is inconclusive. ``check_tier`` keeps the point-value view for
  the benchmarks console table; in the report, ``settle_decisions`` then writes every check's final
  decision into the tier it judges, so no renderer shows a point value's pass/fail beside it.
* Media tier targets are decided the same way (``media_tier_checks``) on the figures' intervals from
  the point's per-request rows (``records.media_estimates``); in a smoke run an undecided media
  target is shown, not required.
* The tests and stress records' judged numbers (divergence rate, error rates, drift, capacity
  goodput: ``records.section_checks``) are checks with the decisions their records made; an
  inconclusive record without such a number is still listed as an inconclusive check.
* Numbers decided on their 95% interval (evals, benchmark targets) are listed in ``verdict.checks``: a
  ``fail`` is a blocker; an ``inconclusive`` check is required unless the run's mode is
  ``smoke`` (a smoke run only proves the path works: its samples are too few to decide a
  healthy score, but a broken one still fails). Result: FAIL when an unwaived blocker remains,
  else INCONCLUSIVE when a required check is undecided, else PASS.
* The comparison with a baseline run (``--compare-to``; a release compares with the last run of its
  spec on its host) adds one check per compared metric (category ``comparison``); a metric whose
  whole 95% interval of the ratio lies beyond the tolerance is ``regressed`` and blocks, unless the
  run says ``on_regression=warn`` (then it is a note). Noise never blocks: the interval decides.
* ``known_issues`` waivers in the model spec turn a blocker into a waived item carrying the
  waiver's reason. A waiver matches on ``workflow`` == blocker category and ``task`` == the
  item (point key or eval task) or ``"*"``. A crashed step is only waived by naming it
  (``task: "step-failed"``): a blanket ``*`` for known slow points should not hide a crash.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from contracts.intervals import FAIL, INCONCLUSIVE, Interval, decide_share
from contracts.intervals import decide as decide_interval
from contracts.model_spec import ModelSpec, metric_higher_is_better, read_known_issues
from contracts.sequential import mean_cs
from records.bench import BenchPoint, format_classes
from records.report import (
    TIERS,
    BenchmarkRow,
    Blocker,
    Check,
    Comparison,
    EvalRow,
    MediaRow,
    MediaTierCheck,
    Section,
    StepSummary,
    TargetRow,
    TierCheck,
    Verdict,
    Waived,
)

STATUS_TIERS: dict[str, tuple[str, ...]] = {
    "EXPERIMENTAL": (),
    "FUNCTIONAL": ("functional",),
    "COMPLETE": ("functional", "complete"),
    "TOP_PERF": ("functional", "complete", "target"),
}

#: Step names that are sections of the report rather than infrastructure.
SECTION_STEPS = ("benchmarks", "evals", "tests", "stress_tests")
STEP_FAILED = "step-failed"


def normalise_status(status: Any) -> str:
    text = str(status or "").strip().upper()
    # Accept "ModelStatus.COMPLETE" or "complete" as written by other serialisers.
    return text.rsplit(".", 1)[-1]


def required_tiers(status: Any, perf_tiers: str | None = None) -> list[str]:
    """The performance tiers a verdict requires: the status's, capped at ``perf_tiers``
    (``--workflow-args perf_tiers=``) when it names a tier. The benchmarks size their adaptive
    points to these, and the report requires these: one rule for both."""
    tiers = list(STATUS_TIERS.get(normalise_status(status), ()))
    if perf_tiers not in TIERS:
        return tiers
    return [t for t in tiers if TIERS.index(t) <= TIERS.index(perf_tiers)]


def evals_required(status: Any) -> bool:
    return normalise_status(status) in STATUS_TIERS and normalise_status(status) != "EXPERIMENTAL"


#: The three targets a tier may set: target key -> (label in blockers, higher is better).
TARGET_CHECKS: dict[str, tuple[str, bool]] = {
    "ttft_ms": ("TTFT", False), "tput_user": ("t/s/u", True), "tput": ("decode tput", True)}
#: Share of a point's requests allowed to fail when the spec says nothing.
DEFAULT_MAX_ERROR_RATE = 0.0


def measured_values(point: BenchPoint) -> dict[str, float | None]:
    """What each target is compared with: mean TTFT, t/s/u and decode throughput of the point."""
    m = point.metrics
    return {"ttft_ms": m.mean_ttft_ms, "tput_user": m.tput_user, "tput": m.decode_throughput}


#: A target is not decided on fewer per-request samples than this: the standard deviation of a handful of
#: requests is too often far below the truth (the comparison with a baseline run uses the same floor).
MIN_DECIDING_SAMPLES = 8
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


def media_target_decision(metric: str, interval: Interval | None, target: float) -> str:
    """pass / fail / inconclusive of one media target on its figure's interval, the direction from the
    metric's name (``media_tier_checks`` judges with it, the media benchmark's adaptive stop too)."""
    return decide_interval(interval, target, metric_higher_is_better(metric))


def max_error_rate(spec: ModelSpec) -> tuple[float, str | None]:
    """The spec's allowance ``device_model_spec.max_error_rate`` (0..1, default 0) and a note
    when the value given is unusable."""
    value = spec.device_model_spec.max_error_rate
    if value is None:
        return DEFAULT_MAX_ERROR_RATE, None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        return DEFAULT_MAX_ERROR_RATE, (f"ignored max_error_rate {value!r} (expected a share between 0 "
                                        f"and 1): no failed request is allowed")
    return float(value), None


def errors_within(error_rate: float | None, allowed: float, requests: int | None = None) -> bool:
    """A point's error rate is acceptable when it is known and not clearly above the allowance: with
    the point's request count, not failed on its 95% Wilson interval (``contracts.intervals.decide_share``:
    an allowance of 0 takes no failed request); without it, not above the allowance."""
    if error_rate is None:
        return False
    if not requests or allowed <= 0:
        return error_rate <= allowed
    return decide_share(round(error_rate * requests), requests, allowed)[0] != FAIL


ERROR_RATE_UNDECIDED = ("the 95% interval of the failed share holds max_error_rate: more requests can decide it "
                        "(mode=full)")


def error_rate_check(item: str, failed: int, total: int, allowed: float, fail_detail: str,
                     category: str = "benchmarks", label: str | None = None) -> Check:
    """The error-rate rule of one point as a check: the failed share (failed and never-sent requests over
    all its requests) against the spec's max_error_rate, decided on its 95% Wilson interval
    (``contracts.intervals.decide_share``: an allowance of 0 fails on one failed request and passes on
    none). A point with no request at all fails: nothing shows it works. Required for every status.
    ``label`` names the point in the check's name when its key is not unique in the run."""
    name = f"error_rate {label or item}"
    if total <= 0:
        return Check(name=name, category=category, item=item, required=True, n=0, target=allowed,
                     decision=FAIL, detail=fail_detail)
    decision, interval = decide_share(failed, total, allowed)
    return Check(name=name, category=category, item=item, required=True, value=round(failed / total, 6),
                 ci95=interval.as_list(), ci_method=interval.method, n=total, target=allowed, decision=decision,
                 detail={FAIL: fail_detail, INCONCLUSIVE: ERROR_RATE_UNDECIDED}.get(decision))


def benchmark_error_checks(rows: list[BenchmarkRow], allowed: float) -> list[Check]:
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


def media_error_check(row: MediaRow, allowed: float) -> Check:
    total = row.num_requests or 0
    failed = total - (row.completed or 0)
    classes = format_classes(row.failures_by_class) or "unclassified"
    return error_rate_check(row.key, failed, total, allowed,
                            f"{failed} of {total} requests failed ({classes}) > allowed {allowed:g}")


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
    check = TierCheck(tier=tier, required=required, **{k: _target(targets.get(k)) for k in TARGET_CHECKS})
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


def check_metric_tier(tier: str, required: bool, targets: dict[str, Any] | None,
                      measured: dict[str, float | None] | None, error_rate: float | None,
                      max_error_rate: float = DEFAULT_MAX_ERROR_RATE, requests: int | None = None) -> MediaTierCheck:
    """``check_tier``'s rules for named metrics (media points): a null target is not checked, a
    target without a measurement fails, a measured 0 is a measurement, and a point whose error
    rate exceeds the allowance fails every tier that sets a target. ``measured`` None: the point
    did not run (nothing judged). Direction comes from the metric's name
    (``contracts.model_spec.metric_higher_is_better``)."""
    check = MediaTierCheck(tier=tier, required=required,
                           targets={k: t for k, v in (targets or {}).items() if (t := _target(v)) is not None})
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
                      smoke: bool = False) -> list[tuple[str, Check, bool]]:
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
        needed = required
        if smoke and row.ran and decision == INCONCLUSIVE:
            needed, detail = False, f"{detail}; a smoke run cannot decide it: not required (mode=ci decides it)"
        out.append((metric, Check(name=f"{metric} {row.key} {tier.tier}", category="benchmarks", item=row.key,
                                  required=needed, value=value, ci95=ci,
                                  ci_method=row.ci_methods.get(metric) if ci else None, n=n, target=target,
                                  decision=decision, detail=detail), missed))
    return out


def media_checks(rows: Iterable[MediaRow], tiers: list[str], max_error_rate: float,
                 smoke: bool = False, settle: list | None = None) -> tuple[list[Check], list[Blocker]]:
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
                     + (f" (95% CI {_fmt_ci(c.ci95)}, n={c.n})" if c.ci95 else "")
                     for _, c, missed in decided if missed]
            if parts:
                out.append(Blocker("benchmarks", row.key, f"{tier.tier}: " + "; ".join(parts), tier.tier))
    return checks, out


def _fmt_num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _target(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return float(value)


@dataclass
class Waiver:
    workflow: str
    task: str
    reason: str

    def matches(self, blocker: Blocker) -> bool:
        if self.workflow != blocker.category:
            return False
        if self.task == blocker.item:
            return True
        return self.task == "*" and blocker.item != STEP_FAILED


def parse_waivers(known_issues: Any) -> tuple[list[Waiver], list[str]]:
    """Read ``known_issues`` from the model spec (``contracts.model_spec.read_known_issues``)."""
    issues, notes = read_known_issues(known_issues)
    return [Waiver(i.workflow, i.task, i.reason) for i in issues], notes


def _measured(row: TargetRow) -> dict[str, float | None]:
    return {"ttft_ms": row.measured_ttft_ms, "tput_user": row.measured_tput_user, "tput": row.measured_tput}


def tier_target_checks(row: TargetRow, tier: TierCheck, required: bool) -> list[tuple[str, Check, bool]]:
    """One check per target the tier sets, decided on the metric's 95% interval (``row.ci95``):
    (target key, check, missed) where ``missed`` says the target itself was missed (not measured, or
    the whole interval beyond it), as opposed to failing only through the point's error rate.

    Order of the rules: a point that did not run is inconclusive (its own blocker fails a required
    tier); a target without a measurement fails; the interval decides; a point whose error rate
    exceeds the allowance fails every target its interval did not already fail (``check_tier``'s
    rule); no interval (fewer than MIN_DECIDING_SAMPLES requests, no per-request file) is
    inconclusive."""
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
                         + (f" (95% CI {_fmt_ci(ci)}, n={row.samples.get(key)})" if ci else ""))
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


def settle_decisions(settled: Iterable[tuple[Any, list[tuple[str, Check, bool]], bool]],
                     targets: Iterable[TargetRow], benchmarks: list[BenchmarkRow], error_checks: list[Check]) -> None:
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


def decide(
    *,
    model_status: Any,
    steps: Iterable[StepSummary],
    targets: list[TargetRow],
    evals: list[EvalRow],
    tests: Section,
    stress_tests: Section,
    benchmarks_judged: bool,
    evals_judged: bool,
    known_issues: Any,
    record_problems: Iterable[str] = (),
    benchmarks: Iterable[BenchmarkRow] = (),
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
    notes: Iterable[str] = (),
    media: Iterable[MediaRow] = (),
    comparison: Comparison | None = None,
    points_chosen: str | None = None,
    section_checks: Iterable[Check] = (),
    mode: str | None = None,
    perf_tiers: str | None = None,
) -> Verdict:
    """Collect blockers, apply waivers, and return the verdict.

    ``points_chosen`` names why a ``benchmarks`` run measured only the points its user chose
    (``points=``, ``workload=``): perf-reference points it left out are then not blockers, and
    their checks stay visible as ``waived`` with that reason (a release never passes this).
    ``section_checks`` are the judged numbers of the tests and stress records
    (``records.section_checks``), each with the decision its record made; ``mode`` is the run's
    (smoke, ci, full): a smoke run does not require a media target its few requests cannot decide.
    ``perf_tiers`` (``--workflow-args perf_tiers=``) caps the performance tiers required at that one:
    the tiers above it are still measured, decided and shown, as checks that are not required."""
    status = normalise_status(model_status)
    tiers = required_tiers(status)
    if perf_tiers is not None and perf_tiers not in TIERS:
        notes = [*notes, f"perf_tiers={perf_tiers!r} is not one of {', '.join(TIERS)}: ignored"]
        perf_tiers = None
    capped = required_tiers(status, perf_tiers)
    cap_note = (f"performance tiers required: {', '.join(capped) or 'none'} (perf_tiers={perf_tiers}; "
                f"the status {status} requires {', '.join(tiers)})") if capped != tiers else None
    tiers = capped
    need_evals = evals_required(status)
    waivers, waiver_notes = parse_waivers(known_issues)
    notes = [*notes, *waiver_notes, *([cap_note] if cap_note else [])]
    benchmarks = list(benchmarks)
    if status not in STATUS_TIERS:
        notes.append(f"unknown model status {model_status!r}: treated as EXPERIMENTAL")
    raw: list[Blocker] = []

    error_checks = benchmark_error_checks(benchmarks, max_error_rate)
    too_many_errors = [row for row, check in zip(benchmarks, error_checks) if check.decision == FAIL]
    media = list(media)
    settled: list[tuple[Any, list[tuple[str, Check, bool]], bool]] = []
    media_settled: list[tuple[Any, list[tuple[str, Check, bool]], bool]] = []
    media_decided, media_raw = media_checks(media, tiers, max_error_rate, smoke=mode == "smoke",
                                            settle=media_settled)
    explained = _explained_sections(targets, evals, tests, stress_tests)
    if too_many_errors or any(b.tier is None for b in media_raw) or any(
            t.passed is False for r in media if r.ran for t in r.tiers):
        explained.add("benchmarks")
    for step in steps:
        if step.name == "reports" or step.status != "failed":
            continue  # a previous reports step "failed" only because its verdict was FAIL
        if step.name in explained:
            notes.append(f"step {step.name!r} exited non-zero; its records show why and are "
                         f"judged item by item")
            continue
        detail = f"step {step.name!r} failed" + (f": {step.detail}" if step.detail else "")
        raw.append(Blocker(step.name, STEP_FAILED, detail))

    for problem in record_problems:
        raw.append(Blocker("records", "unreadable", problem))

    checks: list[Check] = []
    if benchmarks_judged:
        checks.extend(error_checks)
        for row in too_many_errors:
            raw.append(Blocker("benchmarks", row.key, error_rate_detail(row, max_error_rate)))
        for row in targets:
            for check in row.tiers:
                decided = tier_target_checks(row, check, check.tier in tiers)
                checks.extend(c for _, c, _ in decided)
                settled.append((check, decided, row.ran))
                if not row.ran and points_chosen:
                    for _, c, _ in decided:
                        c.decision, c.detail = "waived", f"not in this run: {points_chosen}"
                    continue
                if check.tier not in tiers:
                    continue
                if not row.ran:
                    raw.append(Blocker("benchmarks", row.key,
                                       "perf-reference point was not run", check.tier))
                    continue
                detail = _tier_failure_detail(row, check, {key for key, _, missed in decided if missed})
                if detail is not None:
                    raw.append(Blocker("benchmarks", row.key, detail, check.tier))
        checks.extend(media_decided)
        settled.extend(media_settled)
        raw.extend(media_raw)
        if points_chosen and any(not row.ran for row in targets):
            notes.append(f"perf-reference targets not judged: {points_chosen}")

    if evals_judged and need_evals:
        if not evals:
            raw.append(Blocker("evals", "no-records", "evals ran but wrote no eval records"))
        for ev in evals:
            if ev.status == "error":
                raw.append(Blocker("evals", ev.task, f"eval errored: {ev.error or 'no detail'}"))
            elif ev.passed is False or ev.status == "failed":
                raw.append(Blocker("evals", ev.task, _eval_detail(ev)))
        for ev in (e for e in evals if e.status != "error"):
            check = eval_check(ev)
            if check is None:
                notes.append(f"eval {ev.task}: no reference or published score, not judged")
            else:
                checks.append(check)
            serving = serving_check_of(ev)
            if serving is not None:
                checks.append(serving)

    section_checks = list(section_checks)
    for name, section in (("tests", tests), ("stress_tests", stress_tests)):
        numbered = [c for c in section_checks if c.category == name]
        checks.extend(numbered)
        for item in section.items:
            if item.passed is False:
                raw.append(Blocker(name, item.name, item.detail or f"status {item.status}"))
            elif item.passed is None and (item.status or "").lower() == "inconclusive" and not any(
                    c.item == item.name and c.required and c.decision == INCONCLUSIVE for c in numbered):
                # undecided without a number that says why: shown, and the run is not a PASS
                checks.append(Check(name=f"{name} {item.name}", category=name, item=item.name, required=True,
                                    decision="inconclusive", detail=item.detail))

    if comparison is not None:
        comparison_checks, comparison_blockers, comparison_notes = judge_comparison(comparison)
        checks.extend(comparison_checks)
        raw.extend(comparison_blockers)
        notes.extend(comparison_notes)

    blockers: list[Blocker] = []
    waived: list[Waived] = []
    for blocker in raw:
        waiver = next((w for w in waivers if w.matches(blocker)), None)
        if waiver is None:
            blockers.append(blocker)
        else:
            waived.append(Waived(blocker.category, blocker.item, blocker.detail,
                                 waiver.reason, blocker.tier))
    for check in checks:
        as_blocker = Blocker(check.category, check.item, check.detail or "")
        if check.decision != "pass" and any(w.matches(as_blocker) for w in waivers):
            check.decision = "waived"
    if benchmarks_judged:
        settle_decisions(settled, targets, benchmarks, error_checks)
    undecided = [c for c in checks if c.required and c.decision == "inconclusive"]
    return Verdict(
        result="FAIL" if blockers else "INCONCLUSIVE" if undecided else "PASS",
        checks=checks,
        blockers=blockers,
        waived=waived,
        model_status=status or None,
        required_tiers=list(tiers),
        evals_required=need_evals,
        notes=notes,
    )


def _explained_sections(targets: list[TargetRow], evals: list[EvalRow], tests: Section,
                        stress_tests: Section) -> set[str]:
    """Sections whose failed step is accounted for by their own records.

    Client workflows exit 1 when their own checks fail (an eval below tolerance, a missed
    target), which marks the step failed. When the records show such a failure, the verdict
    judges those records under the acceptance rules (so a waiver or a non-required tier can
    clear them); only a failure the records do not explain (a crash, a point that never ran,
    failed requests) is a blocker by itself.
    """
    out = set()
    if any(t.passed is False for r in targets for t in r.tiers):
        out.add("benchmarks")
    if any(e.passed is False or e.status in ("failed", "error") for e in evals):
        out.add("evals")
    for name, section in (("tests", tests), ("stress_tests", stress_tests)):
        if any(i.passed is False for i in section.items):
            out.add(name)
    return out


def judge_comparison(comparison: Comparison) -> tuple[list[Check], list[Blocker], list[str]]:
    """The regression gate: one check per compared metric, a blocker per regression when the policy
    is ``fail`` (``on_regression=warn``: shown, not failing).

    A metric is ``regressed`` only when its whole 95% interval lies beyond the tolerance
    (``reports.comparison.decide``), so noise never fails a release; a metric without per-request
    records is inconclusive and not required (its run could not show a change either way).
    """
    checks, blockers, notes = [], [], []
    tol = comparison.tolerance
    gate = comparison.on_regression == "fail"
    for metric in comparison.metrics:
        target = 1 - tol if metric.higher_is_better else 1 + tol
        decision = {"regressed": "fail", "inconclusive": "inconclusive"}.get(metric.decision, "pass")
        detail = (f"{metric.decision}: ratio {metric.ratio} (95% CI {_fmt_ci(metric.ci95)}) against baseline "
                  f"{comparison.baseline_run}; tolerance {tol:.0%}")
        if decision == "inconclusive":
            detail += "; too few per-request records to decide, not required"
        elif decision == "fail" and not gate:
            detail += "; on_regression=warn: shown, not failing"
        checks.append(Check(name=f"regression {metric.name}", category="comparison", item=metric.name,
                            required=gate and decision != "inconclusive", value=metric.ratio, ci95=metric.ci95,
                            ci_method="bootstrap over the requests of both runs", n=metric.n, target=target,
                            decision=decision, detail=detail))
        if decision == "fail":
            (blockers.append(Blocker("comparison", metric.name, detail)) if gate
             else notes.append(f"regression (warn only): {metric.name} {detail}"))
    if not comparison.same_host:
        notes.append(f"compared with {comparison.baseline_run} from a different host: "
                     + "; ".join(comparison.host_differences))
    return checks, blockers, notes


def eval_check(ev: EvalRow) -> Check | None:
    """An eval row as a check decided on its interval; None when there was nothing to compare it
    with. Smoke runs decide only what their samples can: an inconclusive smoke score is shown, not
    required."""
    decision = ev.decision or {True: "pass", False: "fail"}.get(ev.passed)
    if decision is None:
        if ev.target is None:
            return None
        decision = "inconclusive"
    detail = None
    required = True
    if decision == "inconclusive":
        if ev.mode == "smoke":
            required = False
            detail = "smoke samples cannot decide a healthy score; not required (mode=ci decides it)"
        else:
            detail = (f"the 95% interval holds the target: {ev.samples or 'these'} samples cannot decide it; a mode "
                      f"or an eval set with more items can")
    if ev.condition_differences:
        detail = "; ".join(filter(None, [detail, "this run differs from the reference score's measurement in "
                                         + ", ".join(ev.condition_differences)]))
    return Check(name=f"accuracy {ev.task}", category="evals", item=ev.task, required=required,
                 value=ev.value, ci95=ev.ci95, ci_method=ev.ci_method, n=ev.samples, target=ev.target,
                 decision=decision, detail=detail, looks=ev.looks, stopped=ev.stopped)


#: How the paired serving check's interval is made (evals.sequential_eval).
PAIRED_SERVING_METHOD = ("paired per item: the share of items whose served score differs from the in-process "
                         "engine's score of the same item, an anytime-valid without-replacement confidence sequence "
                         "(Waudby-Smith & Ramdas); fails when wholly above the allowed share")


def serving_check_of(ev: EvalRow) -> Check | None:
    """The served vs in-process comparison of an eval row as a check (None without an in-process score).

    Paired (the row has ``disagreements``): ``value`` is the share of items whose served score differs
    from the in-process one and ``ci95`` its anytime-valid interval, against ``max_disagreement``.
    Otherwise (an in-process score without per-item scores):

    ``value`` is the served score and ``ci95`` the in-process score's interval it must lie in. A fail
    is a serving bug (the row's status is then failed, which blocks). Inconclusive, when the two
    cannot be compared: required when the in-process reference is stale (the task changed) or too
    small, since the served score is then unverified; not required when this run chose other items
    (a ``limit``) or is a smoke run."""
    if ev.serving_decision is None:
        return None
    if ev.disagreements is not None and ev.samples:
        return Check(name=f"served vs in-process {ev.task}", category="evals", item=ev.task,
                     required=ev.serving_decision != "inconclusive" or ev.mode != "smoke",
                     value=round(ev.disagreements / ev.samples, 6), ci95=ev.disagreement_ci95,
                     ci_method=PAIRED_SERVING_METHOD, n=ev.samples, target=ev.max_disagreement,
                     decision=ev.serving_decision, detail=ev.serving_detail, looks=ev.looks, stopped=ev.stopped)
    required = ev.serving_decision != "inconclusive" or (
        ev.mode != "smoke" and ev.samples == ev.in_process_samples)
    return Check(name=f"served vs in-process {ev.task}", category="evals", item=ev.task, required=required,
                 value=ev.value, ci95=ev.in_process_ci95,
                 ci_method="the in-process score's 95% interval (lm-eval hf backend, its stderr): the served "
                           "value must lie inside it",
                 n=ev.in_process_samples, target=ev.in_process_score, decision=ev.serving_decision,
                 detail=ev.serving_detail)


def _fmt_ci(ci: list[float] | None) -> str:
    return "no interval" if not ci else f"[{ci[0]:.4g}, {ci[1]:.4g}]"


def _eval_detail(ev: EvalRow) -> str:
    if ev.serving_decision == "fail" and ev.decision != "fail":
        return ev.serving_detail or "served score outside the in-process score's interval: a serving bug"
    if ev.ci95 and ev.target is not None:
        return (f"score {ev.value} (95% CI {_fmt_ci(ev.ci95)}, n={ev.samples}) is clearly below target "
                f"{ev.target} (reference {ev.reference_score or ev.published_score}, tolerance {ev.tolerance})")
    if ev.ratio_to_reference is not None:
        return (f"score {ev.value} is {ev.ratio_to_reference:.3f} of reference "
                f"{ev.reference_score} (tolerance {ev.tolerance})")
    if ev.ratio_to_published is not None:
        return (f"score {ev.value} is {ev.ratio_to_published:.3f} of published "
                f"{ev.published_score} (tolerance {ev.tolerance})")
    return f"eval status {ev.status}, score {ev.value}"


__all__ = ["TIERS", "STATUS_TIERS", "check_tier", "target_estimates", "target_decision", "tier_target_checks",
           "MIN_DECIDING_SAMPLES", "check_metric_tier", "media_target_decision", "media_tier_checks", "media_checks",
           "decide", "eval_check", "settle_decisions", "tier_decision",
           "serving_check_of",
           "judge_comparison",
           "required_tiers", "evals_required",
           "parse_waivers", "Waiver", "max_error_rate", "error_rate_detail", "measured_values", "error_rate_check",
           "benchmark_error_checks", "media_error_check"]
