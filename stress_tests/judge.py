"""Summaries and checks of one stress load: percentiles, error rate, drift (stdlib only)."""
from __future__ import annotations

from collections import Counter

from benchmarking.metrics import RequestRecord
from contracts.intervals import FAIL, PASS, decide_share
from stress_tests.args import StressArgs
from stress_tests.drift import latency_drift, memory_drift
from stress_tests.driver import STOPPED_EARLY, LoadRun
from records.distribution import Distribution, summarise
from records.stress import Drift, StressPointRecord
from stress_tests.saturation import fit_slope


def distribution(values_ms: list[float]) -> Distribution:
    """Percentiles of one metric over a point's successful requests (no histogram: the report
    plots the per-request files)."""
    return summarise(values_ms, histogram=False)


def _pct(first: float | None, last: float | None) -> float | None:
    return None if first in (None, 0) or last is None else round((last - first) / first * 100.0, 2)


def drift(windows: list[dict], memory_source: str, memory_what: str) -> Drift:
    """First-vs-last and slope of the window medians and memory samples of a timed load (shown, not judged)."""
    lat = [(w["t_end"], w["e2el_p50_ms"]) for w in windows if w.get("e2el_p50_ms") is not None]
    mem = [(w["t_end"], w["memory_bytes"] / 1e6) for w in windows if w.get("memory_bytes")]
    d = Drift(memory_source=memory_source, memory_what=memory_what)
    if lat:
        d.latency_first_ms, d.latency_last_ms = round(lat[0][1], 3), round(lat[-1][1], 3)
        d.latency_drift_pct = _pct(lat[0][1], lat[-1][1])
        s = fit_slope(lat)
        d.latency_slope_ms_per_h = round(s.slope * 3600, 3) if s else None
    if mem:
        d.memory_first_mb, d.memory_last_mb = round(mem[0][1], 2), round(mem[-1][1], 2)
        d.memory_peak_mb = round(max(v for _, v in mem), 2)
        d.memory_growth_pct = _pct(mem[0][1], mem[-1][1])
        s = fit_slope(mem)
        d.memory_slope_mb_per_h = round(s.slope * 3600, 2) if s else None
    return d


def judged_drift(run: LoadRun, windows: list[dict], args: StressArgs, memory_source: str,
                 memory_what: str) -> tuple[Drift, dict]:
    """The drift record of a timed load and its two checks, each decided on its 95% interval."""
    d = drift(windows, memory_source, memory_what)
    lat = latency_drift(run.records, run.duration_s, args.window_s, args.max_latency_drift_pct)
    d.warmup_s, d.slice_s, d.slices = lat.warmup_s, lat.slice_s, lat.slices
    d.latency_statistic, d.latency_judged_first_ms, d.latency_judged_last_ms = lat.statistic, lat.first_ms, lat.last_ms
    d.latency_judged_drift_pct, d.latency_judged_drift_ci = lat.drift_pct, lat.ci_pct
    d.latency_p99_first_ms, d.latency_p99_last_ms = lat.first_p99_ms, lat.last_p99_ms
    d.latency_p99_n, d.latency_p99_drift_pct = [lat.first_n, lat.last_n], lat.p99_drift_pct
    d.latency_p99_drift_ci = lat.ci_pct if lat.statistic == "p99" else None
    d.latency_decision = lat.decision
    checks = {"latency_drift_pct": _decided(lat.drift_pct, args.max_latency_drift_pct, lat.decision,
                                            lat.ci_pct, [lat.first_n, lat.last_n], lat.detail,
                                            statistic=lat.statistic)}
    samples = [(w["t_end"], w["memory_bytes"]) for w in windows if w.get("memory_bytes")]
    if memory_source != "none" or samples:
        mem = memory_drift(samples, run.duration_s, args.window_s, args.max_memory_growth_pct)
        d.memory_warmup_s = mem.warmup_s
        d.memory_baseline_mb, d.memory_growth_after_warmup_pct = mem.baseline_mb, mem.growth_pct
        d.memory_growth_ci, d.memory_samples, d.memory_decision = mem.ci_pct, mem.n, mem.decision
        checks["memory_growth_pct"] = _decided(mem.growth_pct, args.max_memory_growth_pct, mem.decision,
                                               mem.ci_pct, mem.n, mem.detail)
    return d, checks


def _decided(value: float | None, limit: float, decision: str, ci: list | None, n, detail: str,
             **extra) -> dict:
    return {"value": value, "limit": limit, "passed": {PASS: True, FAIL: False}.get(decision),
            "decision": decision, "ci95": ci, "n": n, "detail": detail, **extra}


def error_rate_check(failed: int, judged: int, limit: float) -> dict:
    """The failed share of the requests the server answered or broke (cuts of an early stop left out),
    decided on its 95% Wilson interval against ``limit`` (``contracts.intervals.decide_share``: with a limit
    of 0 one failed request fails and none passes)."""
    decision, interval = decide_share(failed, judged, limit)
    rate = round(failed / judged, 4) if judged else 0.0
    detail = (f"error rate {rate:.1%} ({failed} of {judged} failed; 95% CI {interval.low:.1%}..{interval.high:.1%}) "
              f"against max_error_rate {limit:g}")
    out = _decided(rate, limit, decision, interval.as_list(4), judged, detail)
    out["ci_method"] = interval.method
    return out


def _check(value: float | None, limit: float, passed: bool | None = None) -> dict:
    ok = passed if passed is not None else (value is not None and value <= limit)
    return {"value": value, "limit": limit, "passed": ok}


def point_record(name: str, mode: str, point, run: LoadRun, args: StressArgs, started: str,
                 memory_source: str, memory_what: str, kind: str = "text") -> StressPointRecord:
    recs: list[RequestRecord] = run.records
    ok = [r for r in recs if r.success]
    cut = [r for r in recs if not r.success and r.error_class == STOPPED_EARLY]
    failed = [r for r in recs if not r.success and r.error_class != STOPPED_EARLY]
    judged = len(recs) - len(cut)
    error_rate = len(failed) / judged if judged else 0.0
    dur = run.duration_s or float("nan")
    out_tokens = sum(r.output_tokens or 0 for r in ok)
    media = kind != "text"
    windows = [dict(w.__dict__) for w in run.windows]
    rec = StressPointRecord(
        name=name, mode=mode, kind=kind, isl=point.isl, osl=point.osl, concurrency=point.concurrency,
        num_prompts=point.num_prompts, duration_target_s=point.duration_s, requested_isl=point.requested_isl,
        requested_osl=point.requested_osl, started=started, duration_s=round(run.duration_s, 3), sent=len(recs),
        completed=len(ok), failed=len(failed), stopped_early=len(cut), not_sent=run.not_sent,
        error_rate=round(error_rate, 4),
        failures_by_class=dict(sorted(Counter(r.error_class or "other" for r in failed).items())),
        request_throughput=round(len(ok) / dur, 4) if ok else None,
        output_throughput=round(out_tokens / dur, 3) if ok and not media else None,
        items_throughput=round(out_tokens / dur, 4) if ok and media else None,
        ttft_ms=distribution([r.ttft * 1000 for r in ok if r.ttft is not None]),
        tpot_ms=distribution([r.tpot * 1000 for r in ok if r.tpot is not None and not media]),
        itl_ms=distribution([g * 1000 for r in ok for g in r.itls]),
        e2el_ms=distribution([r.latency * 1000 for r in ok if r.latency is not None]),
        saturation=dict(run.saturation.__dict__) if run.saturation else None,
        stopped_reason=run.stopped_reason, windows=windows)
    checks = {"error_rate": error_rate_check(len(failed), judged, args.max_error_rate),
              "completed_any": _check(float(len(ok)), 1.0, passed=bool(ok))}
    if mode == "endurance":
        rec.drift, drift_checks = judged_drift(run, windows, args, memory_source, memory_what)
        checks.update(drift_checks)
    rec.checks = checks
    bad = [k for k, c in checks.items() if c["passed"] is False]
    undecided = [k for k, c in checks.items() if c["passed"] is None]
    rec.passed = False if bad else None if undecided else True
    rec.status = "failed" if bad else "inconclusive" if undecided else "passed"
    if media:
        summary = (f"{len(ok)}/{len(recs)} ok, error rate {error_rate:.1%}, latency p50 {_fmt(rec.e2el_ms.p50)} ms, "
                   f"p99 {_fmt(rec.e2el_ms.p99)} ms, {_fmt(rec.items_throughput, 2)} items/s")
    else:
        summary = (f"{len(ok)}/{len(recs)} ok, error rate {error_rate:.1%}, TTFT p99 "
                   f"{_fmt(rec.ttft_ms.p99)} ms, TPOT p99 {_fmt(rec.tpot_ms.p99)} ms")
    if run.stopped_reason:
        summary += f"; stopped early: {run.stopped_reason}"
    for key in ("latency_drift_pct", "memory_growth_pct"):
        if key in checks:
            summary += f"; {checks[key]['detail']}"
    rec.detail = summary if not bad else "failed " + ", ".join(
        f"{k} ({checks[k]['value']} > {checks[k]['limit']})" for k in bad) + "; " + summary
    return rec


def _fmt(v: float | None, digits: int = 0) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"
