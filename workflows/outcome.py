"""The last lines of a run that did not pass: what went wrong, read back from the run directory.

Why from the files: by the time a run ends, the cause may be fifty lines up the console (a child's
table, a server log tail). The user needs it at the bottom, beside ``Run directory:``. Everything
here is read from what the run wrote (manifest, point files, eval records, report), so the
summary says exactly what the report will say.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contracts.run_dir import Manifest, RunStatus, StepStatus
from workflows.servers.log_errors import quote_server_error

MAX_BLOCKERS = 5


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def benchmark_failures(run_dir: Path) -> list[str]:
    """One line per point with failed requests: '<point>: 3 of 8 requests failed (http_5xx 2, ...)'."""
    lines = []
    for path in sorted((run_dir / "benchmarks").glob("point_*.json")):
        if path.name.endswith(".prom.json"):
            continue
        summary = _point_failure_summary(path)
        if summary:
            lines.append(f"{path.stem}: {summary}")
    return lines


def _point_failure_summary(path: Path) -> str:
    try:
        from records.bench import BenchPoint

        return BenchPoint.read(path).failure_summary()
    except Exception:  # noqa: BLE001 - an older or partial file: read the raw keys instead
        pass
    data = _read_json(path)
    if not isinstance(data, dict):
        return "unreadable point file"
    metrics = data.get("metrics") if isinstance(data.get("metrics"), dict) else data
    classes = dict(metrics.get("failures_by_class") or {})
    failed = sum(int(v) for v in classes.values() if isinstance(v, (int, float)))
    if not failed:
        return ""
    total = failed + int(metrics.get("completed") or 0)
    by = ", ".join(f"{k} {v}" for k, v in sorted(classes.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{failed} of {total} requests failed ({by})"


def _not_required_evals(run_dir: Path) -> set[str]:
    """Eval tasks the verdict shows as checks it does not require (smoke mode's scores, perf_tiers caps)."""
    report = _read_json(run_dir / "reports" / "report.json")
    verdict = report.get("verdict") if isinstance(report, dict) else None
    checks = verdict.get("checks") if isinstance(verdict, dict) else None
    return {str(c.get("item")) for c in checks or []
            if isinstance(c, dict) and c.get("category") == "evals" and c.get("required") is False}


def eval_failures(run_dir: Path) -> list[str]:
    """One line per eval task that did not pass, unless the verdict does not require its score (the
    report still shows it): a closing line names what decided the run, not every undecided figure.
    An eval that could not run at all is always named."""
    lines = []
    not_required = _not_required_evals(run_dir)
    for path in sorted((run_dir / "evals").glob("*/eval_record.json")):
        data = _read_json(path)
        if not isinstance(data, dict) or data.get("status") in ("passed", None):
            continue
        if not data.get("error") and str(data.get("task") or path.parent.name) in not_required:
            continue
        ci = data.get("ci95")
        interval = f" in {ci}" if isinstance(ci, list) else ""
        versus = (f"target {data.get('target')}" if data.get("target") is not None
                  else f"reference {data.get('reference_score')}")
        why = data.get("error") or (f"score {data.get('value')}{interval} vs {versus} (n={data.get('samples')})"
                                    if data.get("status") in ("failed", "inconclusive") else data.get("status"))
        lines.append(f"eval {data.get('task') or path.parent.name}: {data.get('status')}: {why}")
    return lines


def verdict_blockers(run_dir: Path) -> list[str]:
    report = _read_json(run_dir / "reports" / "report.json")
    if not isinstance(report, dict) or not isinstance(report.get("verdict"), dict):
        return []
    verdict = report["verdict"]
    if verdict.get("result") == "INCONCLUSIVE":
        return undecided_checks(verdict)
    if verdict.get("result") != "FAIL":
        return []
    blockers = [_blocker_text(b) for b in verdict.get("blockers") or []]
    shown = [f"verdict FAIL: {b}" for b in blockers[:MAX_BLOCKERS]]
    if len(blockers) > MAX_BLOCKERS:
        shown.append(f"verdict FAIL: ... and {len(blockers) - MAX_BLOCKERS} more blockers (reports/report.md)")
    return shown or ["verdict FAIL (reports/report.md)"]


def undecided_checks(verdict: dict) -> list[str]:
    """One line per required check whose 95% interval still holds its target, and what decides it."""
    lines = []
    for check in verdict.get("checks") or []:
        if not isinstance(check, dict) or not check.get("required") or check.get("decision") != "inconclusive":
            continue
        number = (f"{check.get('value')} in {check.get('ci95')} vs target {check.get('target')} (n={check.get('n')}): "
                  if check.get("value") is not None else "")  # a record's own undecided check carries no number
        lines.append(f"verdict INCONCLUSIVE: {check.get('name')}: {number}{check.get('detail') or 'undecided'}")
    return lines or ["verdict INCONCLUSIVE (reports/report.md)"]


def _blocker_text(blocker: Any) -> str:
    if not isinstance(blocker, dict):
        return str(blocker)
    where = " ".join(str(blocker[k]) for k in ("category", "item", "tier") if blocker.get(k))
    return f"{where}: {blocker.get('detail', '')}" if where else str(blocker.get("detail", blocker))


def failed_steps(manifest: Manifest) -> list[str]:
    """Failed steps, except a reports step whose only failure is the verdict (its blockers follow)."""
    return [f"step {s.name} {s.status.value}: {s.detail or 'see run.log'}" for s in manifest.steps
            if s.status is StepStatus.FAILED
            and not (s.name == "reports" and s.detail in ("verdict FAIL", "verdict INCONCLUSIVE"))]


def server_error(run_dir: Path, manifest: Manifest) -> list[str]:
    """The server's own last error (from server.log) when a step failed, requests failed or the run was
    cut short.

    A verdict FAIL on scores alone is not a server fault, so it is not quoted then. When the server
    died or answered 5xx, the clients saw only the symptom; this line names the cause and where to
    read more.
    """
    if (not failed_steps(manifest) and manifest.status is not RunStatus.INTERRUPTED
            and not benchmark_failures(run_dir)):
        return []
    line = quote_server_error(run_dir / "server.log")
    return [line] if line else []


def summary_lines(run_dir: Path, manifest: Manifest, cause: str | None = None) -> list[str]:
    """The closing lines of a run that did not pass (empty when it passed)."""
    if manifest.status is RunStatus.PASSED and cause is None:
        return []
    head = {RunStatus.INTERRUPTED: "run interrupted", RunStatus.FAILED: "run failed",
            RunStatus.INCONCLUSIVE: "run inconclusive"}.get(manifest.status, "run failed")
    lines = [f"{head}: {cause}" if cause else head]
    lines += [line for line in failed_steps(manifest) if not cause or line.partition(": ")[2] not in cause]
    lines += server_error(run_dir, manifest)
    lines += benchmark_failures(run_dir)
    lines += eval_failures(run_dir)
    lines += verdict_blockers(run_dir)
    return list(dict.fromkeys(lines))  # keep order, drop repeats
