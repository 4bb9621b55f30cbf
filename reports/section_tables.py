"""Detail tables of the tests and stress_tests sections, built from their typed records.

Why tables and not new report fields per number: the tests and stress records have their own
schemas (``records.server_tests``, ``records.stress``); the report carries what a reader needs
from them as titled tables of text cells whose column legend comes from those records' field
descriptions, so every renderer (markdown, HTML, console, CSV) prints them the same generic way
and the report stays rebuildable from the records alone.
"""
from __future__ import annotations


from records.report import SectionTable
from records.server_tests import CaseResult, TestsRecord
from records.distribution import Distribution
from records.stress import CapacityLevel, CapacityRecord, Drift, StressPointRecord, StressRecord


def _n(value, nd: int = 0) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:.{nd}f}" if isinstance(value, float) else str(value)


def _pf(passed) -> str:
    return "PASS" if passed is True else "FAIL" if passed is False else "n/a"


def conformance_tables(rec: TestsRecord | None) -> list[SectionTable]:
    """The cases table of the tests record (none when the run has no readable record)."""
    if rec is None:
        return []
    order = {"failed": 0, "error": 1, "skipped": 2, "passed": 3}
    cases = sorted(rec.cases, key=lambda c: (order.get(c.outcome, 9), c.name))
    legend = CaseResult.legend()
    return [SectionTable(
        kind="cases", title=f"API conformance against {rec.server_url or 'the server'}: {rec.detail}",
        headers=["Case", "Outcome", "Duration (s)", "Markers", "Message"],
        rows=[[c.name, c.outcome.upper(), _n(c.duration_s, 2), " ".join(c.markers), c.message or ""] for c in cases],
        legend={"Case": legend["name"], "Outcome": legend["outcome"], "Duration (s)": legend["duration_s"],
                "Markers": legend["markers"], "Message": legend["message"]},
        record_file="tests/tests_record.json")]


def _stress_points(rec) -> list[SectionTable]:

    if not rec.points:
        return []
    lp, ld = StressPointRecord.legend(), Distribution.legend()
    rows = []
    for p in rec.points:
        t, o, e = p.ttft_ms, p.tpot_ms, p.e2el_ms
        size = f"{p.isl}/{p.osl}" + (f" (asked {p.requested_isl}/{p.requested_osl})" if p.requested_isl else "")
        size = size if p.kind == "text" else f"{p.kind} request"  # media requests have no token lengths
        rows.append([p.name, p.mode, size, _n(p.concurrency), _n(p.sent), _n(p.completed), _n(p.failed),
                     f"{p.error_rate:.1%}", *(_n(getattr(t, k, None)) for k in ("p5", "p25", "p50", "p95", "p99")),
                     _n(getattr(o, "p50", None), 1), _n(getattr(o, "p99", None), 1), _n(getattr(e, "p50", None)),
                     _n(getattr(e, "p99", None)), p.stopped_reason or "",
                     _pf(p.passed) if p.passed is not None else p.status.upper()])
    headers = ["Point", "Mode", "ISL/OSL", "Con", "Sent", "OK", "Failed", "Error rate", "TTFT p5", "TTFT p25",
               "TTFT p50", "TTFT p95", "TTFT p99", "TPOT p50", "TPOT p99", "E2EL p50", "E2EL p99",
               "Stopped early", "Result"]
    legend = {"ISL/OSL": lp["isl"] + " / " + lp["osl"], "Con": lp["concurrency"], "Sent": lp["sent"],
              "OK": lp["completed"], "Failed": lp["failed"], "Error rate": lp["error_rate"],
              "TTFT pNN": lp["ttft_ms"] + ", percentile in ms", "TPOT pNN": lp["tpot_ms"] + ", percentile in ms",
              "E2EL pNN": lp["e2el_ms"] + ", percentile in ms", "Stopped early": lp["stopped_reason"],
              "p5..p99": ld["p5"].replace("5th percentile", "5th to 99th percentile")}
    tables = [SectionTable(kind="load_points", title=f"Load points: {rec.detail}", headers=headers, rows=rows,
                           legend=legend, record_file="stress_tests/stress_record.json")]
    timed = [p for p in rec.points if p.drift is not None]
    if timed:
        dl = Drift.legend()
        tables.append(SectionTable(
            kind="drift", title="Endurance: latency and server memory drift after warm-up, decided on 95% intervals",
            headers=["Point", "Duration (s)", "Warm-up (s)", "Judged", "Slices", "First (ms)", "Last (ms)",
                     "n first/last", "Drift %", "Drift 95% CI", "Latency", "p99 first/last (ms)", "Memory source",
                     "Memory warm-up (s)", "Memory baseline (MB)", "Memory last (MB)", "Memory growth %",
                     "Memory growth 95% CI", "Memory"],
            rows=[_drift_row(p) for p in timed],
            legend={"Warm-up (s)": dl["warmup_s"], "Judged": dl["latency_statistic"],
                    "Slices": "count x length of the equal slices the run after warm-up was cut into for the latency "
                              "drift (see Judged); first vs last compared",
                    "First (ms)": dl["latency_judged_first_ms"], "Last (ms)": dl["latency_judged_last_ms"],
                    "n first/last": dl["latency_p99_n"], "Drift %": dl["latency_judged_drift_pct"],
                    "Drift 95% CI": dl["latency_judged_drift_ci"], "Latency": dl["latency_decision"],
                    "p99 first/last (ms)": "p99 e2e latency of the first and last slice, shown beside the judged "
                                           "figure (judged only when Judged is p99)",
                    "Memory source": dl["memory_source"], "Memory warm-up (s)": dl["memory_warmup_s"],
                    "Memory baseline (MB)": dl["memory_baseline_mb"],
                    "Memory growth %": dl["memory_growth_after_warmup_pct"],
                    "Memory growth 95% CI": dl["memory_growth_ci"], "Memory": dl["memory_decision"]},
            record_file="stress_tests/stress_record.json"))
        tables += [_windows_table(p) for p in timed]
    return tables


def _ci(ci) -> str:
    return "n/a" if not ci else f"{ci[0]:.1f}..{ci[1]:.1f}"


def _decision(decision) -> str:
    return {"pass": "PASS", "fail": "FAIL", "inconclusive": "INCONCLUSIVE"}.get(decision or "", "n/a")


def _drift_row(p) -> list[str]:
    d = p.drift
    n = "/".join(str(x) for x in d.latency_p99_n) if d.latency_p99_n else "n/a"
    slices = f"{len(d.slices)} x {d.slice_s:.3g} s" if d.slices and d.slice_s else "n/a"
    return [p.name, _n(p.duration_s, 1), _n(d.warmup_s, 1), d.latency_statistic or "none", slices,
            _n(d.latency_judged_first_ms), _n(d.latency_judged_last_ms), n, _n(d.latency_judged_drift_pct, 1),
            _ci(d.latency_judged_drift_ci), _decision(d.latency_decision),
            f"{_n(d.latency_p99_first_ms)}/{_n(d.latency_p99_last_ms)}", d.memory_source, _n(d.memory_warmup_s, 1),
            _n(d.memory_baseline_mb, 1),
            _n(d.memory_last_mb, 1), _n(d.memory_growth_after_warmup_pct, 2), _ci(d.memory_growth_ci),
            _decision(d.memory_decision)]


def _windows_table(p) -> SectionTable:
    """Per-window latency percentiles and memory of one timed point, with the series its plot draws."""
    rows, t, p50, p99, mem = [], [], [], [], []
    for w in p.windows:
        mb = w.get("memory_bytes") / 1e6 if w.get("memory_bytes") else None
        rows.append([_n(w.get("t_end"), 1), _n(w.get("completed")), _n(w.get("failed")), _n(w.get("e2el_p50_ms")),
                     _n(w.get("e2el_p95_ms")), _n(w.get("e2el_p99_ms")), _n(mb, 1)])
        t.append(w.get("t_end"))
        p50.append(w.get("e2el_p50_ms"))
        p99.append(w.get("e2el_p99_ms"))
        mem.append(None if mb is None else round(mb, 2))
    return SectionTable(
        kind="endurance_windows", title=f"{p.name}: latency percentiles and server memory per time window",
        headers=["t (s)", "OK", "Failed", "E2EL p50 (ms)", "E2EL p95 (ms)", "E2EL p99 (ms)", "Memory (MB)"],
        rows=rows, legend={"t (s)": "end of the window, seconds into the load",
                           "E2EL pNN (ms)": "percentile of the end-to-end latency of the requests that ended in the "
                                            "window",
                           "Memory (MB)": "server memory at the window's end "
                                          f"({p.drift.memory_what or p.drift.memory_source})"},
        record_file="stress_tests/stress_record.json",
        series={"t_s": t, "p50_ms": p50, "p99_ms": p99, "memory_mb": mem})


def _capacity(rec) -> SectionTable:

    keys = [s.split(":")[0] for s in rec.slos]
    lc, lr = CapacityLevel.legend(), CapacityRecord.legend()
    unit = "Concurrency" if rec.metric == "concurrency" else "Rate (req/s)"
    rows = [[f"{lv.level:g}", "yes" if lv.holds else "no", f"{lv.goodput:.1%}",
             f"{lv.goodput_ci_low:.0%}..{lv.goodput_ci_high:.0%}",
             *(_n(lv.slo_values_ms.get(k)) for k in keys), _n(lv.sent), _n(lv.failed), _n(lv.repeats),
             _n(lv.duration_s, 1), lv.reason] for lv in rec.levels]
    target = "" if rec.target is None else f"; target {rec.target:g} ({'met' if rec.target_met else 'MISSED'})"
    cap = "n/a" if rec.capacity is None else f"{rec.capacity:g}"
    return SectionTable(
        kind="capacity", title=(f"SLO capacity: {cap} ({rec.metric}) under {', '.join(rec.slos) or 'no SLOs'}, "
               f"goodput >= {rec.goodput_goal:.0%}, isl {rec.isl} osl {rec.osl}{target}; {rec.stop_reason}; "
               f"search took {rec.search_wall_s:.0f} s"),
        headers=[unit, "Holds", "Goodput", "Goodput 95% CI", *[f"{k} (ms)" for k in keys], "Sent", "Failed",
                 "Repeats", "Duration (s)", "Reason"],
        rows=rows,
        legend={unit: lc["level"], "Holds": lc["holds"], "Goodput": lc["goodput"],
                "Goodput 95% CI": "95% Wilson interval of the goodput", "Repeats": lc["repeats"],
                "SLO source": rec.slo_source or "n/a", "Capacity": lr["capacity"]},
        record_file="stress_tests/capacity_record.json")


def stress_tables(stress: StressRecord | None, capacity: CapacityRecord | None) -> list[SectionTable]:
    """The load-point, drift and capacity tables of the stress records the run has."""
    out: list[SectionTable] = []
    if stress is not None:
        out += _stress_points(stress)
    if capacity is not None:
        out.append(_capacity(capacity))
    return out


def markdown_lines(tables: list[SectionTable], table) -> list[str]:
    """Markdown for ``tables``; ``table(headers, rows)`` is the report's own table writer."""
    out: list[str] = []
    for t in tables:
        out += [f"**{t.title}**", "", table(t.headers, t.rows), ""]
        if t.legend:
            out += ["Columns: " + "; ".join(f"*{k}*: {v}" for k, v in t.legend.items()), ""]
    return out


def csv_rows(section: str, tables: list[SectionTable]) -> list[dict]:
    """One CSV row per table row: item = first cell, detail = the other cells named by header."""
    return [{"section": f"{section}:{t.kind}", "item": row[0] if row else "",
             "detail": "; ".join(f"{h}={c}" for h, c in zip(t.headers[1:], row[1:]))}
            for t in tables for row in t.rows]
