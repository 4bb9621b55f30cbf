"""Summaries and checks of one stress load: percentiles, error rate, drift (stdlib only)."""
from __future__ import annotations

from collections import Counter

from benchmarking.metrics import RequestRecord
from contracts.intervals import percentile
from stress_tests.args import StressArgs
from stress_tests.driver import STOPPED_EARLY, LoadRun
from records.stress import PERCENTILES, Distribution, Drift, StressPointRecord
from stress_tests.saturation import fit_slope


def distribution(values_ms: list[float]) -> Distribution:
    if not values_ms:
        return Distribution()
    p = {f"p{q:02d}": round(percentile(values_ms, q), 3) for q in PERCENTILES}
    return Distribution(count=len(values_ms), mean=round(sum(values_ms) / len(values_ms), 3), **p)


def _pct(first: float | None, last: float | None) -> float | None:
    return None if first in (None, 0) or last is None else round((last - first) / first * 100.0, 2)


def drift(windows: list[dict], memory_source: str, memory_what: str) -> Drift:
    """First-vs-last and slope of the window medians and memory samples of a timed load."""
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


def _check(value: float | None, limit: float, passed: bool | None = None) -> dict:
    ok = passed if passed is not None else (value is not None and value <= limit)
    return {"value": value, "limit": limit, "passed": ok}


def point_record(name: str, mode: str, point, run: LoadRun, args: StressArgs, started: str,
                 memory_source: str, memory_what: str) -> StressPointRecord:
    recs: list[RequestRecord] = run.records
    ok = [r for r in recs if r.success]
    cut = [r for r in recs if not r.success and r.error_class == STOPPED_EARLY]
    failed = [r for r in recs if not r.success and r.error_class != STOPPED_EARLY]
    judged = len(recs) - len(cut)
    error_rate = len(failed) / judged if judged else 0.0
    dur = run.duration_s or float("nan")
    out_tokens = sum(r.output_tokens or 0 for r in ok)
    windows = [dict(w.__dict__) for w in run.windows]
    rec = StressPointRecord(
        name=name, mode=mode, isl=point.isl, osl=point.osl, concurrency=point.concurrency,
        num_prompts=point.num_prompts, duration_target_s=point.duration_s, requested_isl=point.requested_isl,
        requested_osl=point.requested_osl, started=started, duration_s=round(run.duration_s, 3), sent=len(recs),
        completed=len(ok), failed=len(failed), stopped_early=len(cut), not_sent=run.not_sent,
        error_rate=round(error_rate, 4),
        failures_by_class=dict(sorted(Counter(r.error_class or "other" for r in failed).items())),
        request_throughput=round(len(ok) / dur, 4) if ok else None,
        output_throughput=round(out_tokens / dur, 3) if ok else None,
        ttft_ms=distribution([r.ttft * 1000 for r in ok if r.ttft is not None]),
        tpot_ms=distribution([r.tpot * 1000 for r in ok if r.tpot is not None]),
        itl_ms=distribution([g * 1000 for r in ok for g in r.itls]),
        e2el_ms=distribution([r.latency * 1000 for r in ok if r.latency is not None]),
        saturation=dict(run.saturation.__dict__) if run.saturation else None,
        stopped_reason=run.stopped_reason, windows=windows)
    checks = {"error_rate": _check(rec.error_rate, args.max_error_rate),
              "completed_any": _check(float(len(ok)), 1.0, passed=bool(ok))}
    if mode == "endurance":
        rec.drift = drift(windows, memory_source, memory_what)
        checks["latency_drift_pct"] = _check(rec.drift.latency_drift_pct, args.max_latency_drift_pct,
                                             passed=rec.drift.latency_drift_pct is None
                                             or rec.drift.latency_drift_pct <= args.max_latency_drift_pct)
        if rec.drift.memory_growth_pct is not None:
            checks["memory_growth_pct"] = _check(rec.drift.memory_growth_pct, args.max_memory_growth_pct)
    rec.checks = checks
    bad = [k for k, c in checks.items() if not c["passed"]]
    rec.passed = not bad
    rec.status = "passed" if rec.passed else "failed"
    summary = (f"{len(ok)}/{len(recs)} ok, error rate {error_rate:.1%}, TTFT p99 "
               f"{_fmt(rec.ttft_ms.p99)} ms, TPOT p99 {_fmt(rec.tpot_ms.p99)} ms")
    if run.stopped_reason:
        summary += f"; stopped early: {run.stopped_reason}"
    rec.detail = summary if not bad else "failed " + ", ".join(
        f"{k} ({checks[k]['value']} > {checks[k]['limit']})" for k in bad) + "; " + summary
    return rec


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0f}"
