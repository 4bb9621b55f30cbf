"""The judge's requirements section (``records.judge``): a customer's requirements document
(``records.requirements``) decided requirement by requirement on 95% intervals.

Why here and not in the client that measured: a requirement is a claim about a population of requests,
not about the requests one run happened to send, so it is decided like every other number of the verdict
(``contracts.intervals.decide``): **met** when the whole interval clears the bound, **not met** when the
whole interval misses it, **undecided** when the bound lies inside it. A ``must`` not met is a blocker
(FAIL, exit 3); a ``must`` undecided is a required inconclusive check (INCONCLUSIVE, exit 4) whose detail
says about how many samples would decide it; a ``should`` is shown and never required.

The intervals are the ones the rest of the verdict uses: a latency or throughput mean on the anytime-valid
confidence sequence of ``records.judge_benchmarks.target_estimates`` (the benchmark's adaptive stop samples
each point until its ``must`` means are decided, on the same estimate), a percentile on the distribution-free
order-statistic interval (``contracts.intervals.quantile_interval``), a share (error rate, goodput, sessions
passed) on its Wilson interval (``contracts.intervals.decide_share``: a bound of 0 failed, or of every
session passing, is exact over this run's items, as the error-rate rule is).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from contracts.intervals import FAIL, INCONCLUSIVE, PASS, Z95, Interval, decide, decide_share, percentile, \
    quantile_interval
from records.judge_benchmarks import target_estimates
from records.judge_checks import MIN_DECIDING_SAMPLES, SectionJudgement
from records.report import Blocker, Check, EvalRow
from records.requirements import (AgenticRequirement, PointRequirement, RequirementRow, Requirements,
                                  RequirementsSection, Target)

STATUS = {PASS: "met", FAIL: "not met", INCONCLUSIVE: "undecided"}


@dataclass
class PointSamples:
    """One measured point's per-request values, in request order (what its requirements are decided on)."""

    key: str
    users: int
    ttfts_ms: list[float] = field(default_factory=list)
    tpots_ms: list[float] = field(default_factory=list)
    pairs: list[tuple[float | None, float | None]] = field(default_factory=list)  # (ttft, tpot) per completed
    failed: int = 0
    not_deciding: str | None = None  # another's load, uncounted answers, a lagging client (records.reconciliation)


@dataclass
class SessionSamples:
    """One agentic session set: every turn's TTFT (ms), and per session (every turn answered, its worst TTFT)."""

    name: str
    turn_ttfts_ms: list[float] = field(default_factory=list)
    sessions: list[tuple[bool, float | None]] = field(default_factory=list)
    failed_turns: int = 0
    turns: int = 0


@dataclass(frozen=True)
class _Decided:
    decision: str
    value: float | None
    interval: Interval | None
    n: int
    shown: str | None = None
    detail: str | None = None


def judge_requirements(reqs: Requirements, points: dict[str, PointSamples], evals: Sequence[EvalRow],
                       agentic: dict[str, SessionSamples]) -> tuple[RequirementsSection, SectionJudgement]:
    """Every requirement of ``reqs`` as a row of the report's table and a check of the verdict."""
    rows: list[RequirementRow] = []
    for req in reqs.evals:
        row = next((e for e in evals if e.task == req.task and (req.metric is None or e.metric == req.metric)), None)
        rows.append(_row(req.id, "evals", req.level, f"{req.task} {req.metric or (row.metric if row else '') or ''}"
                         .strip(), f">= {req.min_score:.4g} (reference {req.reference_score:g}, tolerance "
                         f"{req.tolerance:.0%})", _eval_decided(row, req.min_score)))
    for point in reqs.benchmarks:
        samples = points.get(point.key)
        for target in point.targets:
            rows.append(_target_row(target, "benchmarks", _point_decided(point, target, samples)))
    for group in reqs.agentic:
        sessions = agentic.get(group.name)
        for target in group.targets:
            rows.append(_target_row(target, "agentic", _agentic_decided(group, target, sessions)))
    return _section(reqs, rows), _judgement(rows)


def _row(rid: str, kind: str, level: str, metric: str, target: str, d: _Decided) -> RequirementRow:
    return RequirementRow(id=rid, kind=kind, level=level, metric=metric, target=target, status=STATUS[d.decision],
                          value=None if d.value is None else round(d.value, 6),
                          ci95=d.interval.as_list() if d.interval else None,
                          ci_method=d.interval.method if d.interval else None, n=d.n, shown_value=d.shown,
                          detail=d.detail)


def _target_row(target: Target, kind: str, d: _Decided) -> RequirementRow:
    metric = target.metric + ("" if target.stat == "mean" else f" {target.stat}")
    slo = [f"{k} <= {v:g} ms" for k, v in (("TTFT", target.slo_ttft_ms), ("TPOT", target.slo_tpot_ms)) if v]
    shown = target.shown_target() + (f" (good: {', '.join(slo)})" if slo else "")
    return _row(target.id, kind, target.level, metric, shown, d)


def _section(reqs: Requirements, rows: list[RequirementRow]) -> RequirementsSection:
    parts = []
    for level in ("must", "should"):
        mine = [r for r in rows if r.level == level]
        if mine:
            counts = {s: sum(r.status == s for r in mine) for s in ("met", "not met", "undecided")}
            parts.append(f"{level}: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    return RequirementsSection(source=reqs.source, schema_version=reqs.schema_version, rows=rows,
                               summary="; ".join(parts) or None)


def _judgement(rows: list[RequirementRow]) -> SectionJudgement:
    checks, blockers = [], []
    for r in rows:
        decision = {"met": PASS, "not met": FAIL}.get(r.status, INCONCLUSIVE)
        detail = r.detail or f"{r.metric}: {r.shown_value or r.value} against {r.target}"
        checks.append(Check(name=f"requirement {r.id}", category="requirements", item=r.id, required=r.level == "must",
                            value=r.value, ci95=r.ci95, ci_method=r.ci_method, n=r.n, target=None,
                            decision=decision, detail=f"{r.level}: {detail}"))
        if decision == FAIL and r.level == "must":
            blockers.append(Blocker("requirements", r.id, f"must not met: {r.metric} {_value(r)} against {r.target}"))
    return SectionJudgement(checks, blockers, [])


def _value(r: RequirementRow) -> str:
    if r.shown_value:
        return r.shown_value
    ci = f" (95% CI [{r.ci95[0]:.4g}, {r.ci95[1]:.4g}], n={r.n})" if r.ci95 else ""
    return ("not measured" if r.value is None else f"{r.value:.4g}") + ci


# ---------------------------------------------------------------------- deciding one requirement


def _eval_decided(row: EvalRow | None, min_score: float) -> _Decided:
    if row is None or row.value is None:
        return _Decided(INCONCLUSIVE, None, None, 0, detail="not measured: the eval did not run in this run")
    interval = Interval(row.ci95[0], row.ci95[1], row.ci_method or "") if row.ci95 else None
    decision = decide(interval, min_score, higher_is_better=True)
    detail = None
    if decision == INCONCLUSIVE:
        detail = _more(row.value, interval, min_score, row.samples or 0, "items")
    return _Decided(decision, row.value, interval, row.samples or 0, detail=detail)


def _point_decided(point: PointRequirement, target: Target, s: PointSamples | None) -> _Decided:
    if s is None:
        return _Decided(INCONCLUSIVE, None, None, 0, detail=f"not measured: point {point.key} did not run")
    if target.metric == "error_rate":
        return _share(len(s.pairs), s.failed, target, bad_is_failed=True)
    if target.metric == "goodput":
        good = sum(1 for ttft, tpot in s.pairs
                   if _within(ttft, target.slo_ttft_ms) and _within(tpot, target.slo_tpot_ms))
        return _share(good, len(s.pairs) + s.failed - good, target)
    values = s.ttfts_ms if target.metric == "ttft_ms" else s.tpots_ms
    d = _latency(values, target, s.users) if target.metric in ("ttft_ms", "tpot_ms") else _throughput(s, target)
    if s.not_deciding and d.decision != INCONCLUSIVE:
        return _Decided(INCONCLUSIVE, d.value, d.interval, d.n, detail=s.not_deciding)
    return d


def _agentic_decided(group: AgenticRequirement, target: Target, s: SessionSamples | None) -> _Decided:
    if s is None or not s.sessions:
        return _Decided(INCONCLUSIVE, None, None, 0, detail=f"not measured: agentic session set {group.name!r} "
                                                             "did not run")
    if target.metric == "error_rate":
        return _share(s.turns - s.failed_turns, s.failed_turns, target, bad_is_failed=True)
    if target.metric == "sessions_passed":
        good = sum(1 for ok, worst in s.sessions if ok and _within(worst, target.slo_ttft_ms))
        d = _share(good, len(s.sessions) - good, target)
        return _Decided(d.decision, d.value, d.interval, d.n, f"{good}/{len(s.sessions)} sessions", d.detail)
    return _latency(s.turn_ttfts_ms, target, 1)


def _within(value: float | None, slo: float | None) -> bool:
    return slo is None or (value is not None and value <= slo)


def _latency(values: list[float], target: Target, users: int) -> _Decided:
    """A latency's mean (confidence sequence) or percentile (order statistics) against its bound."""
    n = len(values)
    if target.stat == "mean":
        # target_estimates' first list is any latency whose mean is decided (its "ttft_ms" entry): TTFT or TPOT
        est = target_estimates(values, values, users)["ttft_ms"]
        value, interval = est.value, est.interval
    else:
        q = int(target.stat[1:]) / 100
        value = percentile(values, q * 100) if values else None
        interval = quantile_interval(values, q)
    decision = decide(interval, target.bound, target.higher_is_better)
    detail = None
    if decision == INCONCLUSIVE:
        detail = (f"{n} samples: fewer than {MIN_DECIDING_SAMPLES} cannot decide it" if n < MIN_DECIDING_SAMPLES
                  else "the samples cannot bound this percentile on both sides yet: more requests would"
                  if interval is None else _more(value, interval, target.bound, n, "requests"))
    return _Decided(decision, value, interval, n, detail=detail)


def _throughput(s: PointSamples, target: Target) -> _Decided:
    est = target_estimates(s.ttfts_ms, s.tpots_ms, s.users)["tput_user" if target.metric == "tput_user" else "tput"]
    decision = decide(est.interval, target.bound, target.higher_is_better)
    detail = None if decision != INCONCLUSIVE else (
        f"{est.n} samples: fewer than {MIN_DECIDING_SAMPLES} cannot decide it" if est.interval is None
        else _more(est.value, est.interval, target.bound, est.n, "requests"))
    return _Decided(decision, est.value, est.interval, est.n, detail=detail)


def _share(good: int, bad: int, target: Target, bad_is_failed: bool = False) -> _Decided:
    """A share against its bound: error rate (``bad_is_failed``: ``bad`` counts the failures; at most the
    bound) or a share of good items (at least the bound), on its Wilson interval; a bound of 0 failures or
    of every item good is exact over this run's items (``decide_share``)."""
    n = good + bad
    if n <= 0:
        return _Decided(INCONCLUSIVE, None, None, 0, detail="nothing was measured")
    if bad_is_failed:
        decision, interval = decide_share(bad, n, target.bound)
        value = bad / n
    else:  # at least `bound` good is at most 1 - bound bad
        decision, bad_interval = decide_share(bad, n, round(1.0 - target.bound, 12))
        interval = Interval(1 - bad_interval.high, 1 - bad_interval.low, bad_interval.method)
        value = good / n
    detail = None
    if decision == INCONCLUSIVE:
        p = min(max(value, 0.01), 0.99)
        gap = abs(value - target.bound)
        need = math.ceil(Z95 ** 2 * p * (1 - p) / gap ** 2) if gap > 0 else None
        detail = (f"the 95% interval holds the bound; about {need} items in all ({max(need - n, 1)} more) would "
                  f"decide it if the share stays {value:.3g}" if need else
                  "the share sits on the bound: no amount of sampling decides it")
    shown = None if bad_is_failed else f"{good}/{n}"
    return _Decided(decision, value, interval, n, shown, detail)


def _more(value: float | None, interval: Interval | None, bound: float, n: int, what: str) -> str:
    """What more sampling would take: an interval's half-width shrinks about as 1/sqrt(n), so the gap to the
    bound is reached after about n * (half-width / gap)^2 samples."""
    if value is None or interval is None or n <= 0:
        return f"not enough {what} to bound the value: more {what} would"
    gap = abs(value - bound)
    if gap <= 1e-4 * max(1e-9, abs(bound)):  # on the bound (as written, to the digits a report shows)
        return f"the value sits on the bound ({value:.4g}): no amount of sampling decides it; move the bound"
    need = math.ceil(n * (interval.half_width() / gap) ** 2 * 1.1)
    return (f"the 95% interval [{interval.low:.4g}, {interval.high:.4g}] holds the bound {bound:g}: about {need} "
            f"{what} in all ({max(need - n, 1)} more) would decide it if the value stays {value:.4g}")
