"""The judged numbers of the tests and stress records as verdict checks (``records.report.Check``).

Why here: a tests or stress record is one report item with a pass flag, but the flag rests on numbers
(an error rate, a drift, a goodput, a divergence rate) that each carry a 95% interval. The verdict
lists every one of them with its value, interval, n and decision, so a reader sees what was decided
and how sure it is. The decisions are the records' own (the client judged them with the same
``contracts.intervals`` rules), so a check and its item never disagree: a failed check's item is
failed, and an inconclusive one's is inconclusive. Interval per check (in its ``ci_method``):

* tests: one check per record (the cases, n = cases run; no interval: each case is pass/fail) and the
  batch-invariance divergence rate (Wilson, against the spec's ``max_batch_divergence``);
* stress load points: the error rate (Wilson, against the point's ``max_error_rate``), completed_any,
  and for timed loads the latency and memory drift (their own intervals, read from the record);
* SLO capacity: the goodput of the deciding level (Wilson, against ``goodput_goal``).
"""
from __future__ import annotations

from typing import Any

from contracts.intervals import FAIL, INCONCLUSIVE, PASS, decide_share
from records.report import Check
from records.server_tests import TestsRecord
from records.stress import CapacityLevel, CapacityRecord, Drift, StressPointRecord, StressRecord

DIVERGENCE_UNDECIDED = ("the 95% interval holds max_batch_divergence: more comparisons (invariance cases) can "
                        "decide it")
GOODPUT_METHOD = ("Wilson score interval of the level's goodput (requests that succeeded and met every SLO / requests "
                  "sent, repeats pooled); the level holds when the whole interval is at or above goodput_goal and "
                  "every SLO percentile is within its limit")
#: A record's pass flag as a decision (no flag: inconclusive).
_FLAG_DECISIONS: dict[bool | None, str] = {True: PASS, False: FAIL}
#: drift check -> (value, interval, n, decision) fields of ``records.stress.Drift``
DRIFT_FIELDS = {
    "latency_drift_pct": ("latency_judged_drift_pct", "latency_judged_drift_ci", "latency_p99_n", "latency_decision"),
    "memory_growth_pct": ("memory_growth_after_warmup_pct", "memory_growth_ci", "memory_samples", "memory_decision"),
}


def conformance_checks(record: TestsRecord, max_batch_divergence: float) -> list[Check]:
    """The record's cases as one check, and its divergence rate when invariance cases ran."""
    ran = sum(record.counts.get(o, 0) for o in ("passed", "failed", "error"))
    out = [Check(name=f"tests {record.name}", category="tests", item=record.name, required=True, n=ran,
                 decision=PASS if record.passed else FAIL, detail=record.detail or None)]
    if record.batch_compared:
        divergent, n = record.batch_divergent or 0, record.batch_compared
        decision, interval = decide_share(divergent, n, max_batch_divergence)
        detail = {FAIL: f"{divergent} of {n} answers changed under load > allowed {max_batch_divergence:g} "
                        f"(max_batch_divergence)", INCONCLUSIVE: DIVERGENCE_UNDECIDED}.get(decision)
        out.append(Check(name=f"batch_divergence {record.name}", category="tests", item=record.name, required=True,
                         value=round(divergent / n, 6), ci95=interval.as_list(), ci_method=interval.method, n=n,
                         target=max_batch_divergence, decision=decision, detail=detail))
    return out


def stress_checks(record: StressRecord) -> list[Check]:
    """Every judged check of every load point that ran."""
    out = []
    for point in record.points:
        if point.status == "not_run":
            continue  # nothing measured: the record's item fails on it
        for key, check in point.checks.items():
            if isinstance(check, dict):
                out.append(_point_check(record.name, point, key, check))
        for key in DRIFT_FIELDS:
            if key not in point.checks and point.drift is not None and _drift_value(point.drift, key)[3] is not None:
                out.append(_point_check(record.name, point, key, {}))  # judged on the record's drift alone
    return out


def _point_check(item: str, point: StressPointRecord, key: str, check: dict[str, Any]) -> Check:
    name, limit = f"{key} {point.name}", _num(check.get("limit"))
    if key == "error_rate":
        judged = point.sent - point.stopped_early
        decision, interval = decide_share(point.failed, judged, limit or 0.0)
        return Check(name=name, category="stress_tests", item=item, required=True,
                     value=round(point.failed / judged, 6) if judged else None, ci95=interval.as_list(),
                     ci_method=interval.method, n=judged, target=limit, decision=decision,
                     detail=None if decision == PASS else check.get("detail") or (
                         f"{point.failed} of {judged} requests failed; allowed {limit or 0:g}"))
    if key in DRIFT_FIELDS and point.drift is not None:
        value, ci, n, drift_decision = _drift_value(point.drift, key)
        return Check(name=name, category="stress_tests", item=item, required=True, value=value, ci95=ci,
                     ci_method=Drift.legend()[DRIFT_FIELDS[key][1]] if ci else None, n=n, target=limit,
                     decision=drift_decision or INCONCLUSIVE, detail=check.get("detail"))
    decision = check.get("decision") or _FLAG_DECISIONS.get(check.get("passed"), INCONCLUSIVE)
    ci = check.get("ci95")
    return Check(name=name, category="stress_tests", item=item, required=True, value=_num(check.get("value")),
                 ci95=ci if _pair(ci) else None, ci_method=check.get("ci_method"),
                 n=_count(check.get("n")) if check.get("n") is not None else point.sent, target=limit,
                 decision=decision, detail=check.get("detail"))


def _drift_value(drift: Drift, key: str) -> tuple[float | None, list[float] | None, int | None, str | None]:
    value, ci, n, decision = (getattr(drift, f) for f in DRIFT_FIELDS[key])
    return _num(value), ci if _pair(ci) else None, _count(n), decision


def capacity_checks(record: CapacityRecord) -> list[Check]:
    """The goodput of the level that decides the record: the target level when there is a target (the
    record's target_met is the decision), else the capacity level (shown, not required: without a
    target the search only answers how much load holds)."""
    level = _level(record)
    if level is None:
        return []
    ci = [level.goodput_ci_low, level.goodput_ci_high]
    if record.target is not None:
        decision = _FLAG_DECISIONS.get(record.target_met, INCONCLUSIVE)
        required = record.target_met is not None or record.passed is None
        detail = f"target {record.target:g} ({record.target_source or 'set'}); level {level.level:g}: {level.reason}"
    else:
        decision = PASS if level.holds else INCONCLUSIVE if level.marginal else FAIL
        required = False
        detail = f"no capacity target: shown, not required; level {level.level:g}: {level.reason}"
    return [Check(name=f"capacity goodput {record.metric} {level.level:g}", category="stress_tests", item=record.name,
                  required=required, value=level.goodput, ci95=ci, ci_method=GOODPUT_METHOD, n=level.sent,
                  target=record.goodput_goal, decision=decision, detail=detail, looks=level.repeats,
                  stopped="decided" if decision != INCONCLUSIVE else "budget")]


def _level(record: CapacityRecord) -> CapacityLevel | None:
    levels = list(record.levels)

    def at(value: float) -> CapacityLevel | None:
        return next((lv for lv in reversed(levels) if lv.level == value), None)

    if record.target is not None and at(record.target) is not None:
        return at(record.target)
    held = at(record.capacity) if record.capacity else None
    return held or (levels[0] if levels else None)


def section_checks(tests: TestsRecord | None, stress: StressRecord | None, capacity: CapacityRecord | None,
                   max_batch_divergence: float) -> list[Check]:
    out = conformance_checks(tests, max_batch_divergence) if tests is not None else []
    if stress is not None:
        out += stress_checks(stress)
    if capacity is not None:
        out += capacity_checks(capacity)
    return out


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    """A sample size: an int, or the sum of a list of them (the first and last slices of a drift)."""
    if isinstance(value, list):
        parts = [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
        return sum(parts) if parts else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _pair(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(_num(v) is not None for v in value)
