"""Status from evidence: the catalog status each spec's last releases on one host class support.

Why not from one run (``workflows.support_table.spec_decisions`` decides per run): one lucky run on a
quiet host would promote a spec that the next busy run fails, and the catalog would flap. Here the
evidence is the run history (``history.store``): the spec's last ``releases`` runs of the tier's
workflow on one host class (one host fingerprint: the newest run's), counting only runs made while the
spec held its current catalog status (a run's report records the status it was judged at), so a status
change starts a fresh count and applying the same evidence twice changes nothing.

The rules, applied to that window, newest run first:

* The newest run FAILED, or its comparison with the previous release decided a metric regressed:
  demote one status (to the status the failed run measured when lower), naming the run; a regression
  names each regressed metric with its ratio (value over baseline) and whether the regression gate failed
  the verdict with it (``on_regression=fail``: a blocker of category ``comparison``).
* The newest run is INCONCLUSIVE: keep; an undecided run neither promotes nor demotes.
* The last ``releases`` runs all PASSed with no regression: promote to the lowest status all of them
  measured (``support_table.measured_status``: every required tier of it passed on its interval at every
  reference point), when that is above the catalog's. Fewer runs, or an INCONCLUSIVE among them: keep.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from history.store import HistoryStore, RunEntry
from workflows.release_matrix import STATUS_ORDER

SCHEMA = "tt-promotions/1"
#: How many consecutive clean releases a promotion needs when the matrix file names none.
DEFAULT_RELEASES = 2


@dataclass(frozen=True)
class Evidence:
    """One release of a spec as the promotion reads it (from the store's row and the run's report)."""

    run_id: str
    started: str
    verdict: str                      # PASS, FAIL or INCONCLUSIVE
    measured_status: str | None       # what its measured tiers support; None when its report is gone
    judged_status: str | None = None  # the catalog status the run was judged at
    regressed: tuple[str, ...] = ()   # metrics its comparison decided regressed
    regressions: tuple[str, ...] = ()  # the same, each with its ratio: '<point> ttft_ms x1.40'
    gated: bool = False               # a regression failed the verdict (on_regression=fail)
    improved: tuple[str, ...] = ()
    within_noise: int = 0
    inconclusive: int = 0             # metrics the comparison could not decide (too few requests, a busy host)
    baseline_run: str | None = None
    blocker: str = ""                 # the first blocker of a FAIL
    host_fingerprint: str = ""
    engines: dict[str, str] = field(default_factory=dict)
    spec_version: str = ""

    @property
    def clean(self) -> bool:
        return self.verdict == "PASS" and not self.regressed


@dataclass(frozen=True)
class Proposal:
    """What the evidence says a spec's status should be."""

    spec_id: str
    model: str
    device: str
    impl: str
    from_status: str
    to_status: str
    evidence: tuple[str, ...]
    reason: str

    @property
    def decision(self) -> str:
        step = STATUS_ORDER.index(self.to_status) - STATUS_ORDER.index(self.from_status)
        return "promote" if step > 0 else "demote" if step < 0 else "keep"

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec_id, "model": self.model, "device": self.device, "impl": self.impl,
                "from": self.from_status, "to": self.to_status, "decision": self.decision,
                "evidence": list(self.evidence), "reason": self.reason}


def propose(spec_id: str, model: str, device: str, impl: str, current: str, evidence: list[Evidence],
            releases: int = DEFAULT_RELEASES) -> Proposal:
    """The proposal for one spec from its evidence (newest first, already narrowed to its current status)."""
    def out(to: str, runs: Iterable[Evidence], reason: str) -> Proposal:
        return Proposal(spec_id, model, device, impl, current, to, tuple(e.run_id for e in runs), reason)

    if not evidence:
        return out(current, (), "no release of it at this status on this host class in the run history")
    newest, level = evidence[0], STATUS_ORDER.index(current)
    if newest.verdict == "FAIL" or newest.regressed:
        measured = STATUS_ORDER.index(newest.measured_status) if newest.measured_status else level - 1
        lower = STATUS_ORDER[max(0, min(level - 1, measured))]
        return out(lower, [newest], demotion_reason(newest) + ("" if level else " (already the lowest status)"))
    if newest.verdict != "PASS":
        return out(current, [newest], f"run {newest.run_id} is {newest.verdict}: an undecided release neither "
                                      f"promotes nor demotes")
    window = evidence[:releases]
    broken = next((e for e in window if not e.clean), None)
    if broken is not None or len(window) < releases:
        streak = window.index(broken) if broken is not None else len(window)
        tail = f"; run {broken.run_id} was {broken.verdict}" if broken is not None else ""
        return out(current, window, f"{streak} clean PASS(es) in a row; a status change needs {releases}{tail}")
    supported = min(STATUS_ORDER.index(e.measured_status or current) for e in window)
    if supported > level:
        return out(STATUS_ORDER[supported], window,
                   f"PASS with no regression in the last {releases} releases, each measuring "
                   f"{STATUS_ORDER[supported]} or better")
    return out(current, window, f"PASS in the last {releases} releases; the measured tiers support no higher "
                                f"status than {STATUS_ORDER[supported]}")


def demotion_reason(newest: Evidence) -> str:
    """Why the newest release demotes: its first blocker, or, when its comparison decided a regression,
    each regressed metric with its ratio and whether the gate failed the verdict with it (another blocker
    of the same run is named too)."""
    if newest.verdict == "FAIL" and not newest.gated:
        return f"run {newest.run_id} FAILED: {newest.blocker or 'verdict FAIL'}"
    why = (f"run {newest.run_id} regressed against {newest.baseline_run}: "
           f"{', '.join(newest.regressions or newest.regressed)}")
    if newest.gated:
        why += " (the regression gate failed its verdict)"
        if newest.blocker and not newest.blocker.startswith("[comparison]"):
            why += f"; first blocker {newest.blocker}"
    return why


# ---------------------------------------------------------------------------------- reading the history


def report_path(entry: RunEntry, search: tuple[Path, ...] = ()) -> Path:
    """Where the run's report is: its run directory as indexed, else a directory named after the run id
    under one of ``search`` (at most one level down): the run directories another runner made, collected
    as artifacts, where the indexed path exists only on that runner."""
    indexed = Path(entry.run_dir) / "reports" / "report.json"
    if indexed.is_file():
        return indexed
    for root in search:
        for candidate in (root / entry.run_id, *root.glob(f"*/{entry.run_id}")):
            if (candidate / "reports" / "report.json").is_file():
                return candidate / "reports" / "report.json"
    return indexed


def evidence_of(entry: RunEntry, search: tuple[Path, ...] = ()) -> Evidence | None:
    """The run as evidence, read from its report (None when the report is gone or unreadable: a run
    whose judged status and measurements cannot be read proves nothing either way)."""
    from records.report import ReportRecord
    from workflows.support_table import measured_status

    try:
        record = ReportRecord.read(report_path(entry, search))
    except (OSError, ValueError):
        return None
    verdict = record.verdict
    comparison = record.comparison
    metrics = comparison.metrics if comparison is not None else []
    first = verdict.blockers[0] if verdict.blockers else None
    return Evidence(
        run_id=entry.run_id, started=entry.started or "", verdict=verdict.result,
        measured_status=measured_status(record), judged_status=record.metadata.model_status,
        regressed=tuple(m.name for m in metrics if m.decision == "regressed"),
        regressions=tuple(m.name + (f" x{m.ratio:.2f}" if m.ratio is not None else "")
                          for m in metrics if m.decision == "regressed"),
        gated=any(b.category == "comparison" for b in verdict.blockers),
        improved=tuple(m.name for m in metrics if m.decision == "improved"),
        within_noise=sum(1 for m in metrics if m.decision == "within_noise"),
        inconclusive=sum(1 for m in metrics if m.decision == "inconclusive"),
        baseline_run=comparison.baseline_run if comparison is not None else None,
        blocker=f"[{first.category}] {first.item}: {first.detail}"[:200] if first is not None else "",
        host_fingerprint=entry.host_fingerprint, spec_version=entry.spec_version,
        engines={k.split(" ", 1)[1] if k.startswith("package ") else k: str(v) for k, v in entry.host_facts.items()
                 if k.startswith("package ") or k == "engine"})  # 'engine': local <venv>, docker, external


def host_class_runs(entries: list[RunEntry]) -> list[RunEntry]:
    """The runs of one spec on the host class of its newest run, newest first."""
    ordered = sorted(entries, key=lambda e: e.started or "", reverse=True)
    if not ordered:
        return []
    return [e for e in ordered if e.host_fingerprint == ordered[0].host_fingerprint]


def spec_key_of(spec) -> str:
    """The history's key of a catalog spec (``history.fingerprint.SpecIdentity.key``)."""
    return f"{spec.model_name}|{spec.device_type.value}|{spec.impl.impl_name}|{spec.engine.value}"


def spec_evidence(store: HistoryStore, specs: list, workflow: str, limit: int = 10,
                  search: tuple[Path, ...] = ()) -> dict[str, list[Evidence]]:
    """Per spec id: its releases (runs of ``workflow``) on its host class at its current catalog status,
    newest first, at most ``limit`` (reports looked up under ``search`` too: ``report_path``)."""
    by_key: dict[str, list[RunEntry]] = {}
    for entry in store.runs():
        if entry.workflow == workflow and entry.verdict in ("PASS", "FAIL", "INCONCLUSIVE"):
            by_key.setdefault(entry.spec_key, []).append(entry)
    out: dict[str, list[Evidence]] = {}
    for spec in specs:
        found = []
        for entry in host_class_runs(by_key.get(spec_key_of(spec), [])):
            ev = evidence_of(entry, search)
            if ev is not None and ev.judged_status == spec.status.name:
                found.append(ev)
            if len(found) >= limit:
                break
        out[spec.model_id] = found
    return out


def proposals(specs: list, evidence: dict[str, list[Evidence]], releases: int) -> list[Proposal]:
    return [propose(s.model_id, s.model_name, s.device_type.value, s.impl.impl_name, s.status.name,
                    evidence.get(s.model_id, []), releases) for s in specs]


def write_promotions(out_dir: Path, tier: str, releases: int, found: list[Proposal],
                     evidence: dict[str, list[Evidence]]) -> Path:
    """``promotions.json``: every proposal (spec, from, to, evidence run ids, reason) and the evidence behind it."""
    from datetime import datetime, timezone

    doc = {"schema": SCHEMA, "tier": tier, "releases": releases,
           "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "promotions": [p.to_dict() for p in found],
           "evidence": {k: [asdict(e) for e in v] for k, v in evidence.items()}}
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "promotions.json"
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path
