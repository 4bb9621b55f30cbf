"""The benchmarks a requirements document asks for (``--requirements``; ``records.requirements``): its sweep
points sample until their mean targets are decided, and its agentic session sets run as agentic points.

Why here: run.py hands the document's points to the benchmarks as ``points=`` and keeps the document in the
run directory (``requirements.json``); this module reads that copy, so the adaptive stop of each point
(``records.sampling.sampling_stop``) samples until the requirements it feeds are decided (instead of the spec's
tiers: the document is the run's contract): a latency or throughput mean
is decided on the same anytime-valid estimate the report judges it on (``records.judge.target_estimates``).
A mean TPOT bound is fed as the equivalent t/s/u bound (t/s/u is 1000 / mean TPOT, and its interval is the
TPOT interval mapped through it). Percentiles and shares are judged by the report on what was measured;
they do not extend a point.
"""
from __future__ import annotations

import json
from pathlib import Path

from benchmarking.sweeps import Point
from records.requirements import Requirements, parse_requirements

FILE = "requirements.json"


def read_run_requirements(run_dir: str | Path | None) -> Requirements | None:
    """The run's requirements document, or None (no document; a copy that does not read is run.py's to refuse)."""
    if not run_dir:
        return None
    path = Path(run_dir) / FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    source = str(data.pop("_source", FILE))
    return parse_requirements(data, source=source)


def goal_checks(reqs: Requirements, point: Point) -> list[tuple[str, str, float]]:
    """(check name, target metric key, target) of every mean target the document sets at ``point``."""
    key = f"isl-{point.isl}_osl-{point.osl}_con-{point.max_concurrency}"
    out = []
    for req in reqs.benchmarks:
        if req.key != key:
            continue
        for t in req.targets:
            if t.stat != "mean" or t.bound <= 0:
                continue
            if t.metric == "ttft_ms":
                out.append((f"requirement {t.id}", "ttft_ms", t.bound))
            elif t.metric == "tpot_ms":
                out.append((f"requirement {t.id}", "tput_user", 1000.0 / t.bound))
            elif t.metric in ("tput_user", "throughput"):
                out.append((f"requirement {t.id}", "tput_user" if t.metric == "tput_user" else "tput", t.bound))
    return out


def attach(reqs: Requirements | None, points: list[Point]) -> None:
    """Give every point the requirement checks it feeds (``Point.requirement_checks``)."""
    if reqs is None:
        return
    for point in points:
        point.requirement_checks = goal_checks(reqs, point)


def agentic_points(reqs: Requirements | None, osl: int = 24) -> list[Point]:
    """One agentic point per session set of the document (``benchmarking.workloads.agentic``)."""
    if reqs is None or not reqs.agentic:
        return []
    from benchmarking.workloads import agentic

    out = []
    for group in reqs.agentic:
        path = Path(group.trace) if group.trace else agentic.BUNDLED
        out.append(agentic.session_point(agentic.read_sessions(path), group.sessions, group.concurrency, osl,
                                         group.name, label=group.name))
    return out
