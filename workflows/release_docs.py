"""What a release publishes: ``docs/model_support.md`` from the catalog, ``release_notes.md`` from the
catalog, the promotions and the run history.

Why generated: a support table typed by hand drifts from the catalog the tool actually serves, and
release notes written from memory name what someone remembers rather than what the runs measured.
Both are rendered here from the same records ``--promote`` decided on, so the catalog diff, the
support table and the notes of one release always agree.

``docs/model_support.md`` carries no timestamp: regenerating it from an unchanged catalog gives the
same file (no diff to review). The release notes do name when and from what: the commit, the engine
versions and the host fingerprint behind each row.
"""
from __future__ import annotations

import subprocess
from dataclasses import asdict
from datetime import date, datetime, timezone
from pathlib import Path

from contracts import REPO_ROOT
from contracts.model_spec import ModelSpec, read_known_issues
from workflows.promotion import Evidence, Proposal

DOC_PATH = Path("docs") / "model_support.md"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _row(cells: list[object]) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _order(specs: list[ModelSpec]) -> list[ModelSpec]:
    return sorted(specs, key=lambda s: (s.model_name, s.device_type.value, s.impl.impl_name))


def _evidence_cell(runs: list[Evidence]) -> str:
    return ", ".join(f"{e.verdict} {e.run_id}" + (" (regressed)" if e.regressed else "") for e in runs) or "none"


def render_support_doc(specs: list[ModelSpec], version: str, evidence: dict[str, list[Evidence]]) -> str:
    """docs/model_support.md: every catalog spec with its status and version, and the releases behind
    the status where the history has them (``evidence``: per spec id, newest first)."""
    lines = ["# Model support", "",
             "Generated from the catalog (`workflows/model_specs/*.yaml`) and the run history by "
             "`python3 scripts/release_matrix.py --tier TIER --promote --apply`; edit the catalog, not this file.", "",
             f"Release {version}. A status is earned by evidence: the highest of EXPERIMENTAL, FUNCTIONAL, "
             "COMPLETE and TOP_PERF whose required checks passed, on their intervals, in the spec's last releases "
             "on one host class with no regression; a FAIL or a regression demotes it.", "",
             _row(["Model", "Device", "Impl", "Default impl", "Status", "Spec version", "Latest releases"]),
             "|" + "---|" * 7]
    for s in _order(specs):
        runs = evidence.get(s.model_id, [])[:3]
        lines.append(_row([s.model_name, s.device_type.value, s.impl.impl_name,
                           "yes" if s.device_model_spec.default_impl else "", s.status.name, s.version,
                           _evidence_cell(runs) if runs else "not in this release's history"]))
    return "\n".join(lines) + "\n"


def repo_commit(root: Path = REPO_ROOT) -> str:
    """The commit the release is built from ('+ local changes' when the checkout differs from it)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return head + (" + local changes" if dirty else "")


def _since_last(e: Evidence | None) -> str:
    if e is None:
        return "no release in the history"
    if e.baseline_run is None:
        return "no comparison (no earlier clean release on this host class)"
    gated = " (failed the verdict)" if e.gated else ""
    parts = [f"regressed: {', '.join(e.regressions or e.regressed)}{gated}" if e.regressed else "",
             f"improved: {', '.join(e.improved)}" if e.improved else "",
             f"{e.within_noise} within noise" if e.within_noise else "",
             f"{e.inconclusive} undecided (too few requests or a busier host)" if e.inconclusive else ""]
    return f"vs {e.baseline_run}: " + ("; ".join(p for p in parts if p) or "no metric in common")


def _changes(found: list[Proposal]) -> list[str]:
    moved = [p for p in found if p.decision != "keep"]
    if not moved:
        return ["No status change: every spec keeps its status.", ""]
    lines = [_row(["Model", "Device", "Impl", "From", "To", "Evidence", "Reason"]), "|" + "---|" * 7]
    lines += [_row([p.model, p.device, p.impl, p.from_status, p.to_status, ", ".join(p.evidence), p.reason])
              for p in moved]
    return lines + [""]


def _rows(specs: list[ModelSpec], found: dict[str, Proposal], evidence: dict[str, list[Evidence]]) -> list[str]:
    lines = [_row(["Model", "Device", "Impl", "Status", "Spec version", "Latest release", "Since the last release",
                   "Engines", "Host fingerprint"]), "|" + "---|" * 9]
    for s in _order(specs):
        runs = evidence.get(s.model_id, [])
        newest = runs[0] if runs else None
        proposal = found.get(s.model_id)
        status = s.status.name if proposal is None or proposal.decision == "keep" else \
            f"{proposal.from_status} -> {proposal.to_status}"
        engines = ", ".join(f"{k} {v}" for k, v in sorted(newest.engines.items())) if newest else ""
        lines.append(_row([s.model_name, s.device_type.value, s.impl.impl_name, status, s.version,
                           f"{newest.verdict} {newest.run_id}" if newest else "not run",
                           _since_last(newest), engines or "n/a", newest.host_fingerprint if newest else "n/a"]))
    return lines + [""]


def _waivers(specs: list[ModelSpec], version: str, today: date) -> list[str]:
    active, lapsed = [], []
    for s in _order(specs):
        issues, notes = read_known_issues([asdict(k) for k in s.known_issues], on=today, version=version)
        active += [_row([s.model_name, s.device_type.value, s.impl.impl_name, f"{k.workflow}/{k.task}", k.reason,
                         k.accepted_by or "nobody named", k.expires or "no end"]) for k in issues]
        lapsed += [f"- {s.model_name} on {s.device_type.value} ({s.impl.impl_name}): {n}" for n in notes
                   if "no longer waives" in n]
    lines = ["## Waivers in force", ""]
    lines += ([_row(["Model", "Device", "Impl", "Waives", "Reason", "Accepted by", "Expires"]), "|" + "---|" * 7]
              + active if active else ["None."])
    if lapsed:
        lines += ["", "Expired (no longer waiving):", *lapsed]
    return lines + [""]


def render_release_notes(version: str, tier: str, releases: int, specs: list[ModelSpec], found: list[Proposal],
                         evidence: dict[str, list[Evidence]], commit: str, today: date | None = None) -> str:
    """release_notes.md: status changes, per spec what improved, regressed or stayed within noise since the
    last release (with the engines and host fingerprint behind it), and the waivers in force."""
    today = today or date.today()
    by_id = {p.spec_id: p for p in found}
    lines = [f"# Release {version}", "",
             f"Commit {commit}. Tier {tier}; a status change needs {releases} clean releases in a row on one host "
             f"class. Generated {datetime.now(timezone.utc).isoformat(timespec='seconds')}.", "",
             "## Status changes", "", *_changes(found),
             "## Per spec since the last release", "", *_rows(specs, by_id, evidence),
             *_waivers(specs, version, today)]
    return "\n".join(lines)
