"""Run control of the benchmarks workflow: signals, parent death, budgets, stop rules, closing lines.

Why a module of its own: ``run_benchmarks.py`` builds and writes point records; what decides when
a run stops, and what it says when it does, is a separate contract and is tested on its own.

* SIGINT/SIGTERM never raise in the middle of a write: outside a point the handler only records
  the signal (``contracts.client_main.StopSignals``, checked between steps); inside a point the
  runner's loop handler aborts in-flight requests so the point is written as partial
  (``interrupted``) and the run exits 128+N.
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
  request cap; the point record says which (``records.bench.PointSampling``). The rule is
  ``records.sampling``'s, shared with the media points; here it reads an LLM point's TTFTs and TPOTs.
  The sampling budget never stops a point that feeds a required check below ``MIN_DECIDING_SAMPLES``
  (fewer samples cannot decide any check, so stopping there would leave it inconclusive by design on a
  slow or busy host, as smoke's 4-request points were): the point's own budget and the stall timeout
  still bound it.
"""
from __future__ import annotations

from collections import Counter

from records import sampling
from records.judge import TARGET_CHECKS, target_decision, target_estimates
from records.sampling import SampleGoal, SampleState

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


def goal_checks(point_key: str, targets: dict, required: list[str]) -> list[tuple[str, str, float]]:
    """(check name, metric key, target) of every LLM target (``TARGET_CHECKS``) the point's required
    tiers set, named as the report's verdict.checks name them (``records.sampling.goal_checks``)."""
    return sampling.goal_checks(point_key, targets, required, metrics=TARGET_CHECKS)


def sampling_stop(goal: SampleGoal, ttfts_ms: list[float], tpots_ms: list[float], sent: int, failed: int,
                  elapsed_s: float, cut_short: bool = False) -> SampleState:
    """Whether an LLM point sends another round: ``records.sampling.sampling_stop`` on the report's
    estimates of its per-request TTFTs and TPOTs (``records.judge.target_estimates``) with the report's
    decision (``target_decision``). ``sent`` counts measured requests sent so far, ``failed`` those that
    failed, ``elapsed_s`` the measured requests' seconds so far."""
    return sampling.sampling_stop(goal, target_estimates(ttfts_ms, tpots_ms, goal.users), target_decision,
                                  sent, failed, elapsed_s, cut_short)


__all__ = ["STALL_MARGIN_S", "SERVER_GONE", "failure_summary", "goal_checks", "point_budget", "sampling_stop",
           "server_gone", "stall_line"]
