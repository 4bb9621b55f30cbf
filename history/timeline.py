"""The releases in the run history as one document over time (``history.json``, drawn by history.html).

Why: the store indexes every run for the regression gate (``--compare-to last``) and the support table,
but nobody can look at it; "how has this model done over its last releases, and when did it change?"
needs each release's judged numbers with their 95% intervals, where the regression gate decided a
regression or an improvement, and where the host changed, side by side.

What it reads: the store's index (which runs, their spec identity, host fingerprint and headline values:
``history.store``, no second store) and each run's own ``reports/report.json``, the source of truth for
what its verdict judged (every check with its interval) and what its comparison decided. A run whose
directory is gone keeps its place with the store's headline values, without intervals, and says so.

One entry per release (workflow ``release``), oldest first; ``--model`` and ``--device`` narrow them.
"""
from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import Any

from contracts.typed_record import RecordError
from history.store import HistoryStore, RunEntry, shown_url
from records.report import ReportRecord

SCHEMA = "tt-history/1"
RELEASE = "release"
TIER_WORDS = ("functional", "complete", "target")
#: Gate decisions worth a mark on the plot (``ComparisonMetric.decision``).
MARKED = ("regressed", "improved")


def series_of(check_name: str) -> tuple[str, str | None]:
    """A check's series and tier: 'ttft_ms isl-128_osl-32_con-1 complete' -> ('ttft_ms isl-128_osl-32_con-1',
    'complete'). The tiers of one target share the measured value and interval; only the target differs."""
    head, _, last = check_name.rpartition(" ")
    return (head, last) if head and last in TIER_WORDS else (check_name, None)


def _comparison_series(name: str) -> str:
    """A comparison metric '<point> <metric>' as the series name checks use, '<metric> <point>'."""
    point, _, metric = name.rpartition(" ")
    return f"{metric} {point}" if point else name


def judged_metrics(record: ReportRecord) -> list[dict[str, Any]]:
    """Every number the run's verdict decided on its interval (the regression checks aside: they are the
    gate's marks), one entry per check, with the series it belongs to."""
    out = []
    for c in record.verdict.checks:
        if c.category == "comparison" or c.value is None:
            continue
        series, tier = series_of(c.name)
        out.append({"series": series, "check": c.name, "tier": tier, "category": c.category, "value": c.value,
                    "ci95": c.ci95, "ci_method": c.ci_method, "n": c.n, "target": c.target,
                    "decision": c.decision, "required": c.required})
    return out


def gate_marks(record: ReportRecord) -> list[dict[str, Any]]:
    """The metrics the regression gate decided regressed or improved against the run's baseline."""
    c = record.comparison
    if c is None:
        return []
    return [{"series": _comparison_series(m.name), "decision": m.decision, "ratio": m.ratio, "ci95": m.ci95,
             "value": m.value, "n": m.n, "baseline_run": c.baseline_run, "tolerance": c.tolerance}
            for m in c.metrics if m.decision in MARKED]


def comparison_summary(record: ReportRecord) -> dict[str, Any] | None:
    """What the run's comparison decided, in one line for the history table, and how it was judged.

    ``summary``: 'regressed: ttft_ms <point> x1.40' (each regressed metric with its ratio, value over
    baseline), else 'improved: ...', else 'within noise' (with how many stayed undecided), else
    'inconclusive'; 'not compared' when the comparison found no metric in common (its first note says why).
    ``gated``: a regression failed the verdict (``on_regression=fail``: a blocker of category comparison);
    a ``warn`` regression is shown only. None when the run was compared with nothing."""
    c = record.comparison
    if c is None:
        return None
    counts: dict[str, int] = {}
    for m in c.metrics:
        counts[m.decision] = counts.get(m.decision, 0) + 1

    def named(decision: str) -> str:
        return ", ".join(f"{_comparison_series(m.name)}" + (f" x{m.ratio:.2f}" if m.ratio is not None else "")
                         for m in c.metrics if m.decision == decision)
    undecided = counts.get("inconclusive", 0)
    if counts.get("regressed"):
        summary = f"regressed: {named('regressed')}"
    elif counts.get("improved"):
        summary = f"improved: {named('improved')}"
    elif counts.get("within_noise"):
        summary = "within noise" + (f" ({undecided} inconclusive)" if undecided else "")
    elif undecided:
        summary = "inconclusive"
    else:
        summary = "not compared" + (f": {c.notes[0]}" if c.notes else "")
    gated = any(b.category == "comparison" for b in record.verdict.blockers)
    return {"summary": summary, "decisions": counts, "baseline_run": c.baseline_run,
            "on_regression": c.on_regression, "gated": gated}


def run_setup_of(run_dir: Path, record: ReportRecord | None) -> tuple[str | None, str]:
    """(mode, server) of a run, from what its directory records.

    mode: ``--workflow-args mode=`` in cli_args.json (smoke, ci, full; ci when not given), None when the file
    is gone. server: the engine the run recorded (``environment.engine``: 'local engine-vllm-cpu', 'docker
    <image>', 'external'), else the server flags in cli_args.json (--local-server, --docker-server, else an
    external server). Rule: only a server this run started (local or docker) is a real engine of the spec;
    ``external`` is any server it attached to (--server-url, a running one): a stub, a fake or another
    machine's engine, which the run directory cannot tell apart, so the page marks them all."""
    import json

    from contracts.workflow_args import parse_workflow_args

    try:
        cli = json.loads((run_dir / "cli_args.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cli = None
    mode = None
    if isinstance(cli, dict):
        try:
            mode = str(parse_workflow_args(str(cli.get("workflow_args") or "")).get("mode", "ci"))
        except ValueError:
            mode = "?"
    engine = record.metadata.environment.engine if record is not None else None
    if engine is not None:
        return mode, engine.server + (f" {engine.name}" if engine.name else "")
    if not isinstance(cli, dict):
        return mode, "?"
    return mode, "local" if cli.get("local_server") else "docker" if cli.get("docker_server") else "external"


def _headline(entry: RunEntry, covered: set[str]) -> list[dict[str, Any]]:
    """The store's headline values (no interval) of series the verdict did not judge (TPOT, output
    throughput), so a gate mark on them has a point to sit on."""
    out = []
    for name, value in sorted(entry.metrics.items()):
        series = _comparison_series(name) if not name.startswith("accuracy ") else name
        if series not in covered:
            out.append({"series": series, "check": None, "tier": None, "category": "headline", "value": value,
                        "ci95": None, "ci_method": None, "n": None, "target": None, "decision": None,
                        "required": False})
    return out


def _report_link(run_dir: Path, output_dir: Path) -> str | None:
    html = run_dir / "reports" / "report.html"
    if not html.is_file():
        return None
    try:
        return os.path.relpath(html, output_dir)
    except ValueError:  # another drive (Windows): an absolute link still opens it
        return html.resolve().as_uri()


def run_entry(entry: RunEntry, output_dir: Path) -> dict[str, Any]:
    """One release as history.json holds it: identity, host, verdict, judged metrics and gate marks."""
    run_dir = Path(entry.run_dir)
    doc: dict[str, Any] = {
        "run_id": entry.run_id, "run_dir": entry.run_dir, "report": _report_link(run_dir, output_dir),
        "spec": {"key": entry.spec_key, "model": entry.model, "device": entry.device, "impl": entry.impl,
                 "engine": entry.engine, "version": entry.spec_version},
        "commit": {}, "host_fingerprint": entry.host_fingerprint, "host_facts": entry.host_facts,
        "host_changes": [], "started": entry.started, "ended": entry.ended, "run_status": entry.run_status,
        "verdict": entry.verdict, "metrics": [], "gate": [], "comparison": None, "mode": None, "server": "?",
        "note": None}
    try:
        record = ReportRecord.read(run_dir / "reports" / "report.json")
    except (OSError, ValueError, RecordError) as exc:
        doc["note"] = (f"its report.json cannot be read ({type(exc).__name__}): the history store's headline "
                       f"values are shown, without intervals")
        doc["metrics"] = _headline(entry, set())
        doc["mode"], doc["server"] = run_setup_of(run_dir, None)
        return doc
    doc["mode"], doc["server"] = run_setup_of(run_dir, record)
    doc["comparison"] = comparison_summary(record)
    m = record.metadata
    doc["commit"] = {"tt_metal": m.tt_metal_commit, "vllm": m.vllm_commit, "docker_image": m.docker_image}
    doc["verdict"] = record.verdict.result
    doc["metrics"] = judged_metrics(record)
    doc["metrics"] += _headline(entry, {x["series"] for x in doc["metrics"]})
    doc["gate"] = gate_marks(record)
    return doc


def _host_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return [f"{key}: {before.get(key)} -> {after.get(key)}" for key in sorted(set(before) | set(after))
            if before.get(key) != after.get(key)]


def history_document(store: HistoryStore, output_dir: Path, model: str | None = None,
                     device: str | None = None) -> dict[str, Any]:
    """history.json: every release of the store (of ``model`` on ``device`` when given), oldest first,
    with ``specs`` grouping their ids per spec identity; a release on another host than the spec's previous
    one names the host facts that changed (``host_changes``)."""
    runs: list[dict[str, Any]] = []
    specs: dict[str, dict[str, Any]] = {}
    last_host: dict[str, tuple[str, dict[str, Any]]] = {}
    for entry in store.runs():
        if entry.workflow != RELEASE or (model and entry.model != model) or (device and entry.device != device):
            continue
        doc = run_entry(entry, output_dir)
        previous = last_host.get(entry.spec_key)
        if previous is not None and previous[0] != entry.host_fingerprint:
            doc["host_changes"] = _host_changes(previous[1], entry.host_facts) or ["host fingerprint changed"]
        last_host[entry.spec_key] = (entry.host_fingerprint, entry.host_facts)
        specs.setdefault(entry.spec_key, {**doc["spec"], "runs": []})["runs"].append(entry.run_id)
        runs.append(doc)
    for spec in specs.values():
        spec.pop("version", None)  # a spec's releases span versions; each run keeps its own
    return {"schema": SCHEMA, "generated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "store": shown_url(store.url), "filters": {"model": model, "device": device},
            "specs": list(specs.values()), "runs": runs}
