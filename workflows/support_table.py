"""The release matrix's outputs: ``model_support.md`` (one row per spec of the tier) and
``release_specs.json`` (the status each spec's measured verdict supports).

Every row is read from its run directory's ``reports/report.json`` (the typed report record), so the
table says what the reports say; a spec without a report is FAIL (it ran and left no verdict) or NOT
RUN (it did not run here), always with the reason.

Status rules (``release_specs.json``): a spec's measured status is the highest catalog status whose
required performance tiers all passed at every reference point and whose other checks passed (a
crash or a failed eval supports only EXPERIMENTAL). PASS with a measured status above the catalog's
promotes, but only with PASS on every tier the matrix requires for the device; FAIL demotes one
status (or to the measured one when lower; a run that left no report measured nothing and goes down
one status), with the blockers as the reason; INCONCLUSIVE and NOT
RUN keep the status and say why.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from records.judge import STATUS_TIERS
from records.report import ReportRecord
from workflows.release_matrix import STATUS_ORDER, EntryResult, Matrix, Tier

SPECS_SCHEMA = "tt-release-specs/1"
VERDICTS = ("PASS", "FAIL", "INCONCLUSIVE", "NOT RUN")


@dataclass
class SupportRow:
    model: str
    device: str
    impl: str
    status: str
    verdict: str
    reason: str = ""
    figures: str = ""
    comparison: str = ""
    run_id: str = ""
    date: str = ""
    run_dir: str = ""
    measured_status: str | None = None
    notes: list[str] = field(default_factory=list)


def _figures(record: ReportRecord) -> str:
    """Two or three headline numbers: the first benchmark point, the first media point, the first eval."""
    out = []
    if record.benchmarks:
        b = record.benchmarks[0]
        out.append(f"{b.key}: TTFT {_num(b.mean_ttft_ms)} ms, {_num(b.tput_user)} t/s/u")
    if record.media:
        m = next((m for m in record.media if m.ran), None)
        if m is not None:
            figs = ", ".join(f"{k} {v:.3g}" for k, v in list(m.figures.items())[:2] if isinstance(v, (int, float)))
            out.append(f"{m.key}: {figs}")
    if record.evals:
        e = record.evals[0]
        out.append(f"{e.task} {e.value:.3f}" if e.value is not None else f"{e.task} {e.status}")
    return "; ".join(out) or "no figures"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _comparison(record: ReportRecord) -> str:
    c = record.comparison
    if c is None:
        return "no baseline: no earlier run of it here passed or was inconclusive"
    counts = {d: sum(1 for m in c.metrics if m.decision == d)
              for d in ("regressed", "improved", "within_noise", "inconclusive")}
    text = ", ".join(f"{n} {d.replace('_', ' ')}" for d, n in counts.items() if n) or "no metric in common"
    return f"vs {c.baseline_run}: {text}" + ("" if c.same_host else " (different host)")


def measured_status(record: ReportRecord) -> str:
    """The highest status the measured tiers and checks support (module docstring)."""
    if any(b.tier is None and b.category != "comparison" for b in record.verdict.blockers):
        return "EXPERIMENTAL"  # a crash, failed requests or a failed eval; a regression is judged on its own
    supported = "EXPERIMENTAL"
    rows = [*record.targets, *(m for m in record.media if m.tiers)]  # LLM reference points and media points
    for status in STATUS_ORDER[1:]:
        tiers = STATUS_TIERS[status]
        checks = [t for row in rows for t in row.tiers if t.tier in tiers]
        rows_ran = all(row.ran for row in rows) if rows else False
        if checks and rows_ran and all(t.passed for t in checks):
            supported = status
        elif checks or rows:
            break
        else:  # no perf reference at all: the verdict alone speaks for the catalog's status
            supported = record.verdict.model_status or supported
            break
    return supported


def row_of(result: EntryResult) -> SupportRow:
    spec = result.spec
    row = SupportRow(model=spec.model_name, device=spec.device_type.value, impl=spec.impl.impl_name,
                     status=spec.status.name, verdict="NOT RUN")
    if result.not_run:
        row.reason = result.not_run
        return row
    report = result.run_dir / "reports" / "report.json" if result.run_dir else None
    row.run_dir = str(result.run_dir or "")
    if report is None or not report.is_file():
        row.verdict = "FAIL"
        row.reason = f"run.py exited {result.exit_code} and wrote no report: {_failed_step(result.run_dir)}"
        return row
    try:
        record = ReportRecord.read(report)
    except (OSError, ValueError) as exc:
        row.verdict, row.reason = "FAIL", f"report.json cannot be read: {exc}"
        return row
    v = record.verdict
    row.verdict = v.result if v.result in VERDICTS else "FAIL"
    row.run_id, row.date = record.metadata.run_id, (record.metadata.run_started or "")[:10]
    row.figures, row.comparison = _figures(record), _comparison(record)
    row.measured_status = measured_status(record)
    if v.result == "FAIL":
        first = v.blockers[0] if v.blockers else None
        row.reason = (f"[{first.category}] {first.item}: {_short(first.detail)}" if first else "verdict FAIL") + (
            f" (+{len(v.blockers) - 1} more blocker(s))" if len(v.blockers) > 1 else "")
    elif v.result == "INCONCLUSIVE":
        undecided = [c.name for c in v.checks if c.required and c.decision == "inconclusive"]
        row.reason = "undecided: " + ", ".join(undecided[:3])
    if result.exit_code not in (0, 3, 4, None) and v.result == "PASS":
        row.verdict, row.reason = "FAIL", f"run.py exited {result.exit_code}"
    return row


def _failed_step(run_dir: Path | None) -> str:
    """'step start_server failed: <detail>' from the run's manifest, else where to look."""
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
        step = next(s for s in manifest.get("steps", []) if s.get("status") == "failed")
        return f"step {step['name']} failed: {_short(str(step.get('detail') or 'no detail'))}"
    except (OSError, ValueError, StopIteration, TypeError, KeyError, AttributeError):
        return f"see {run_dir}/run.log"


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(tier: Tier, rows: list[SupportRow], host: str, interrupted: bool) -> str:
    counts = {v: sum(1 for r in rows if r.verdict == v) for v in VERDICTS}
    lines = [f"# Model support: tier {tier.name}", "",
             f"{tier.description}. Workflow {tier.workflow}; generated "
             f"{datetime.now(timezone.utc).isoformat(timespec='seconds')} on {host}.", "",
             "Summary: " + ", ".join(f"{n} {v}" for v, n in counts.items()) + ".", ""]
    if interrupted:
        lines += ["**Interrupted (Ctrl-C): rows after the running spec were not run.**", ""]
    headers = ["Model", "Device", "Impl", "Status", "Verdict", "Headline figures", "Comparison", "Run id", "Date"]
    lines += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for r in rows:
        verdict = r.verdict + (f": {r.reason}" if r.reason else "")
        lines.append("| " + " | ".join(_cell(c) for c in (r.model, r.device, r.impl, r.status, verdict, r.figures,
                                                          r.comparison, r.run_id, r.date)) + " |")
    lines += ["", "Verdict: PASS, FAIL or INCONCLUSIVE as the run's report decided it (FAIL with its first "
              "blockers); NOT RUN with the reason this host could not run the spec. Comparison: the report's "
              "comparison with the last run of the spec on this host that ended with nothing failed (per-metric "
              "decisions; inconclusive when the host was not equally busy in both runs).", ""]
    return "\n".join(lines)


def spec_decisions(matrix: Matrix, tier: Tier, rows: list[SupportRow]) -> list[dict]:
    out = []
    for r in rows:
        required = matrix.required_for(r.device)
        entry = {"model": r.model, "device": r.device, "impl": r.impl, "catalog_status": r.status,
                 "tier": tier.name, "verdict": r.verdict, "measured_status": r.measured_status,
                 "required_tiers": list(required), "run_id": r.run_id or None, "run_dir": r.run_dir or None}
        current = STATUS_ORDER.index(r.status)
        if r.verdict == "NOT RUN":
            entry.update(decision="unverified", status=r.status, reason=r.reason)
        elif r.verdict == "INCONCLUSIVE":
            entry.update(decision="keep", status=r.status, reason=f"INCONCLUSIVE ({r.reason})")
        elif r.verdict == "FAIL":
            measured = STATUS_ORDER.index(r.measured_status) if r.measured_status else current - 1
            lower = STATUS_ORDER[max(0, min(current - 1, measured))]
            entry.update(decision="demote" if current > 0 else "keep", status=lower, reason=r.reason)
        else:
            measured = STATUS_ORDER.index(r.measured_status or r.status)
            missing = [t for t in required if t != tier.name]
            if measured > current and tier.name in required and not missing:
                entry.update(decision="promote", status=STATUS_ORDER[measured],
                             reason=f"PASS on {tier.name}; the measured tiers support {STATUS_ORDER[measured]}")
            elif measured > current:
                entry.update(decision="keep", status=r.status,
                             reason=f"measured tiers support {STATUS_ORDER[measured]}; promotion needs PASS on "
                                    f"{', '.join(required) or 'a required tier'}")
            else:
                entry.update(decision="keep", status=r.status, reason=f"PASS on {tier.name}")
        out.append(entry)
    return out


def write_outputs(out_dir: Path, matrix: Matrix, tier: Tier, results: list[EntryResult], host: str,
                  interrupted: bool) -> list[SupportRow]:
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [row_of(r) for r in results]
    (out_dir / "model_support.md").write_text(render_markdown(tier, rows, host, interrupted), encoding="utf-8")
    doc = {"schema": SPECS_SCHEMA, "tier": tier.name, "host": host, "interrupted": interrupted,
           "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "specs": spec_decisions(matrix, tier, rows)}
    (out_dir / "release_specs.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return rows
