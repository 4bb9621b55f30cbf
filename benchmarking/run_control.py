"""Run control of the benchmarks workflow: signals, parent death, budgets, stop rules, closing lines.

Why a module of its own: ``run_benchmarks.py`` builds and writes point records; what decides when
a run stops, and what it says when it does, is a separate contract and is tested on its own.

* SIGINT/SIGTERM never raise in the middle of a write: outside a point the handler only records
  the signal (``contracts.client_main.StopSignals``, checked between steps); inside a point the runner's loop handler aborts in-flight
  requests so the point is written as partial (``interrupted``) and the run exits 128+N.
* A parent that dies sends SIGTERM (the orchestrator starts every client workflow with Linux's
  parent-death signal, workflows/processes.py), which lands here like any SIGTERM: the point in
  flight is written as partial, so a re-run measures it again instead of accepting it.
* A point's budget always exceeds the stall timeout, so a silent server is reported as ``stall``,
  not as ``budget_exceeded``.
* After a warm-up or point in which the server stalled or could not be reached, the sweep stops:
  every remaining point would only wait out the same silence.
* Adaptive sample size (``sampling_stop``): a point sends its minimum, then further rounds until
  every required target check it feeds is decided on its 95% interval, or its precision goal is met
  (interval half-width at most ``precision`` of the value), bounded by its sampling budget and a
  request cap; the point record says which (``records.bench.PointSampling``). The sampling budget
  never stops a point that feeds a required check below ``MIN_DECIDING_SAMPLES`` (fewer samples
  cannot decide any check, so stopping there would leave it inconclusive by design on a slow or busy
  host, as smoke's 4-request points were): the point's own budget and the stall timeout still bound it.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from records.judge import MIN_DECIDING_SAMPLES, TARGET_CHECKS, target_decision, target_estimates

STALL_MARGIN_S = 10.0      # a point's budget exceeds the stall timeout by at least this much
SERVER_GONE = frozenset({"stall", "connect_error"})  # failure classes that stop the sweep


def point_budget(configured: float | None, mode_default: float, stall_timeout_s: float) -> float:
    """The per-point budget: the configured one (validated to exceed the stall timeout), else the
    mode's default raised to stall timeout + margin, so a stall is always seen as a stall."""
    if configured is not None:
        return configured
    return max(mode_default, stall_timeout_s + STALL_MARGIN_S)


def server_gone(records: list, warmup_only: bool = False) -> str | None:
    """The failure class that says the server is silent/unreachable, when nothing else happened.

    ``records`` are RequestRecords (or dicts with ``error_class``/``success``); returns the class
    when no request succeeded and a SERVER_GONE class occurred.
    """
    classes = [_get(r, "error_class") for r in records if not warmup_only or _get(r, "warmup")]
    if not classes or any(_get(r, "success") for r in records):
        return None
    gone = [c for c in classes if c in SERVER_GONE]
    return Counter(gone).most_common(1)[0][0] if gone else None


def _get(rec, key: str):
    return rec.get(key) if isinstance(rec, dict) else getattr(rec, key, None)


def stall_line(phase: str, url: str, stall_timeout_s: float, count: int) -> str:
    """The one line a stall produces: URL, phase, silence."""
    return (f"STALL during {phase}: {count} request(s) to {url} got no data for {stall_timeout_s:g} s "
            f"(stall_timeout_s); the server is silent")


def failure_summary(records: list[dict]) -> str:
    """``'stall 4, http_5xx 3 (of 12 requests in 2 points)'`` over point records; '' when none failed."""
    total, failed = 0, Counter()
    for rec in records:
        m = rec.get("metrics") or {}
        total += int(m.get("completed") or 0) + int(m.get("failed") or 0)
        failed.update(m.get("failures_by_class") or {})
    if not failed:
        return ""
    classes = ", ".join(f"{cls} {n}" for cls, n in failed.most_common())
    return f"{classes} (of {total} requests in {len(records)} point(s))"


#: Precision goal of an adaptive point: 95% half-width at most this share of the value.
DEFAULT_PRECISION = 0.05
#: Seconds of measured requests per point after which no further round starts, per mode.
DEFAULT_SAMPLE_BUDGETS = {"smoke": 30.0, "ci": 60.0, "full": 300.0}
#: A point sends at most this many times its minimum.
MAX_REQUESTS_FACTOR = 16


@dataclass
class SampleGoal:
    """What an adaptive point must reach: the required target checks it feeds (name, metric key,
    target), its precision goal, its minimum and cap, and its sampling budget (s)."""

    checks: list[tuple[str, str, float]]
    min_requests: int
    concurrency: int
    users: int
    precision: float = DEFAULT_PRECISION
    budget_s: float = DEFAULT_SAMPLE_BUDGETS["ci"]
    max_requests: int = field(default=0)

    def __post_init__(self) -> None:
        self.max_requests = self.max_requests or self.min_requests * MAX_REQUESTS_FACTOR


def goal_checks(point_key: str, targets: dict, required: list[str]) -> list[tuple[str, str, float]]:
    """(check name, metric key, target) of every target the point's required tiers set, named as
    the report's verdict.checks name them."""
    out = []
    for tier, tier_targets in (targets or {}).items():
        if tier not in required or not isinstance(tier_targets, dict):
            continue
        for key in TARGET_CHECKS:
            value = tier_targets.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                out.append((f"{key} {point_key} {tier}", key, float(value)))
    return out


@dataclass
class SampleState:
    """The stop rule's answer after a round: why to stop (None: go on), the decisions, and the size
    of the next round."""

    stop_reason: str | None
    decisions: dict[str, str]
    next_round: int
    detail: str


def sampling_stop(goal: SampleGoal, ttfts_ms: list[float], tpots_ms: list[float], sent: int, failed: int,
                  elapsed_s: float, cut_short: bool = False) -> SampleState:
    """Decide whether an adaptive point sends another round (see the module docstring).

    ``sent`` counts measured requests sent so far, ``failed`` those that failed, ``elapsed_s`` the
    measured requests' seconds so far. The next round is sized from the widest undecided interval:
    a half-width shrinks about as 1/sqrt(n), so reaching the gap to the target (or the precision
    goal) needs n * (half-width / gap)^2 requests, sent in at most as many requests again as so far,
    in whole multiples of the concurrency."""
    est = target_estimates(ttfts_ms, tpots_ms, goal.users)
    decisions = {name: target_decision(key, est[key].interval, target) for name, key, target in goal.checks}
    undecided = [(name, key, target) for name, key, target in goal.checks if decisions[name] == "inconclusive"]
    keys = sorted({key for _, key, _ in goal.checks})
    precise = bool(keys) and all(
        est[k].interval is not None and est[k].value and est[k].interval.half_width() <= goal.precision * est[k].value
        for k in keys)
    needed = sent
    for _, key, target in undecided:
        e = est[key]
        if e.interval is None or not e.value:
            needed = max(needed, MIN_DECIDING_SAMPLES, 2 * sent)
            continue
        gap = abs(e.value - target)
        half = e.interval.half_width()
        to_decide = sent * (half / gap) ** 2 if gap > 0 else math.inf
        to_precise = sent * (half / (goal.precision * e.value)) ** 2
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
