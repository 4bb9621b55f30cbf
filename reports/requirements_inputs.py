"""What the report's "Requirements" section is decided from: the run's requirements document
(``requirements.json``, written by run.py from ``--requirements``) and the per-request rows of its
benchmark points and agentic sessions.

Why a reader of its own: the judge (``records.judge_requirements``) reads no files; this module turns the
run directory into its inputs (``PointSamples`` per sweep point, ``SessionSamples`` per agentic session set)
and hands back the section and its judgement for ``reports.builder``. A run without the document has no
section (None).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from contracts.typed_record import RecordError
from records.bench import BenchPoint
from records.judge_checks import SectionJudgement
from records.judge_requirements import PointSamples, SessionSamples, judge_requirements
from records.report import EvalRow
from records.requirements import RequirementsError, RequirementsSection, parse_requirements
from reports.comparison_data import measured_rows

FILE = "requirements.json"


def read_requirements_section(run_dir: Path, evals: Sequence[EvalRow], problems: list[str]
                              ) -> tuple[RequirementsSection | None, SectionJudgement | None]:
    """The run's requirements judged, or (None, None) when the run was given no document. A document that
    no longer reads is a record problem (it blocks: the run cannot show what was required)."""
    path = run_dir / FILE
    if not path.is_file():
        return None, None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        source = str(data.pop("_source", FILE))
        reqs = parse_requirements(data, source=source)
    except (OSError, ValueError, RequirementsError, AttributeError) as exc:
        problems.append(f"{FILE}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
        return None, None
    points, sessions = _samples(run_dir, problems)
    section, judgement = judge_requirements(reqs, points, evals, sessions)
    return section, judgement


def _rows(path: Path | None) -> list[dict]:
    """The measured (non-warm-up) rows of a per-request file (``comparison_data.measured_rows``), in request
    order."""
    return sorted(measured_rows(path), key=lambda r: r.get("index") if isinstance(r.get("index"), int) else 0)


def _num(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _samples(run_dir: Path, problems: list[str]) -> tuple[dict[str, PointSamples], dict[str, SessionSamples]]:
    points: dict[str, PointSamples] = {}
    sessions: dict[str, SessionSamples] = {}
    for path in sorted((run_dir / "benchmarks").glob("point_*.json")):
        if "." in path.stem:
            continue
        try:
            rec = BenchPoint.read(path)
        except (RecordError, OSError, ValueError, KeyError, TypeError) as exc:
            problems.append(f"{path.relative_to(run_dir).as_posix()}: {exc}")
            continue
        req = run_dir / rec.requests_file if rec.requests_file else path.with_name(path.stem + ".requests.jsonl")
        rows = _rows(req)
        workload = rec.workload or {}
        if workload.get("kind") == "agentic":
            sessions[str(workload.get("name") or "agentic")] = _sessions(str(workload.get("name")), rows)
            continue
        if rec.workload is not None:
            continue
        p = rec.point
        key = f"isl-{p.isl}_osl-{p.osl}_con-{p.max_concurrency}"
        samples = _point(key, p.users, rows, rec)
        if key not in points or len(samples.pairs) > len(points[key].pairs):
            points[key] = samples
    return points, sessions


def _point(key: str, users: int, rows: list[dict], rec: BenchPoint) -> PointSamples:
    ok = [r for r in rows if r.get("success")]
    pairs = [(_num(r.get("ttft_ms")), _num(r.get("tpot_ms"))) for r in ok]
    failed = sum(rec.failure_classes().values()) or int(rec.metrics.failed or 0) or (len(rows) - len(ok))
    reconciliation = rec.reconciliation
    not_deciding = None
    if reconciliation is not None and not reconciliation.decides:
        not_deciding = f"the point's measurement does not decide ({reconciliation.status}): {reconciliation.detail}"
    return PointSamples(key=key, users=max(1, int(users or 1)), ttfts_ms=[t for t, _ in pairs if t is not None],
                        tpots_ms=[t for _, t in pairs if t is not None], pairs=pairs, failed=failed,
                        not_deciding=not_deciding)


def _sessions(name: str, rows: list[dict]) -> SessionSamples:
    """Per session: every turn answered, and its worst turn TTFT; a session with a failed turn fails."""
    by_session: dict[object, list[dict]] = {}
    for r in rows:
        by_session.setdefault(r.get("session"), []).append(r)
    out = SessionSamples(name=name)
    for turns in by_session.values():
        planned = max((int(t.get("turns_planned") or 0) for t in turns), default=0)
        ok = all(t.get("success") for t in turns) and len(turns) >= planned
        ttfts = [v for v in (_num(t.get("ttft_ms")) for t in turns if t.get("success")) if v is not None]
        out.sessions.append((ok, max(ttfts) if ttfts else None))
        out.turn_ttfts_ms += ttfts
        out.failed_turns += sum(1 for t in turns if not t.get("success")) + max(0, planned - len(turns))
        out.turns += max(planned, len(turns))
    return out
