"""Which runs may be a baseline: ``last`` never picks an unfinished or failed run, a run named on
purpose must have finished whole (else exit 2 from run.py), on SQLite and on a real PostgreSQL."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from contracts.workflow_args import WorkflowType
from history.baseline import unusable_reason
from history.fingerprint import fingerprint, host_facts_of, spec_identity
from history.store import open_store
from records.report import ReportRecord
from reports import build_report, write_reports
from reports.comparison import CompareError, CompareSettings, baseline_from, build_comparison
from workflows.cli import UsageError, check_compare_to

FIXTURE = Path(__file__).resolve().parent.parent / "reports" / "fixtures" / "benchmarks_only_run"


def _run(root: Path, run_id: str, day: int, status: str, steps: dict[str, tuple[str, str]] | None = None,
         verdict: str | None = None) -> Path:
    """A copy of the fixture run as it ended: its manifest status, its steps' outcomes, its report."""
    dest = root / run_id
    shutil.copytree(FIXTURE, dest)
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest.update(run_id=run_id, started=f"2026-01-{day:02d}T00:00:00+00:00", status=status)
    for step in manifest["steps"]:
        step["status"], step["detail"] = (steps or {}).get(step["name"], ("passed", ""))
    (dest / "manifest.json").write_text(json.dumps(manifest))
    record = build_report(dest)
    if verdict is not None:
        record.verdict.result = verdict
    write_reports(record, dest)
    return dest


@pytest.fixture
def runs(tmp_path):
    """Runs of one spec on one host, oldest first; only ``base`` ended with nothing failed."""
    root = tmp_path / "runs"
    return {
        "base": _run(root, "base", 1, "passed"),
        "failed-verdict": _run(root, "failed-verdict", 2, "failed", {"reports": ("failed", "verdict FAIL")}, "FAIL"),
        "ignored-verdict": _run(root, "ignored-verdict", 3, "passed", verdict="FAIL"),  # --ignore-verdict
        "step-failed": _run(root, "step-failed", 4, "failed", {"benchmarks": ("failed", "exit code 1")}),
        "interrupted": _run(root, "interrupted", 5, "interrupted",
                            {"benchmarks": ("failed", "interrupted by SIGINT"), "reports": ("passed", "")}),
        "running": _run(root, "running", 6, "running", {"reports": ("running", "")}),  # in progress, or died
        "gone": _run(root, "gone", 7, "passed"),
        "current": _run(root, "current", 8, "running", {"reports": ("running", "")}),
    }


def _indexed(url: str, runs: dict[str, Path]) -> None:
    with open_store(url) as store:
        for path in runs.values():
            store.index(ReportRecord.read(path / "reports" / "report.json"), path)  # as its reports step did
    shutil.rmtree(runs["gone"])  # indexed as passed, then deleted: the index is stale


def test_the_rule_read_from_each_manifest(runs) -> None:
    assert unusable_reason(runs["base"], explicit=False) is None
    assert "verdict FAILED" in unusable_reason(runs["failed-verdict"], explicit=False)
    assert unusable_reason(runs["failed-verdict"], explicit=True) is None  # measurements whole, named on purpose
    assert "benchmarks failed (exit code 1)" in unusable_reason(runs["step-failed"], explicit=True)
    assert "interrupted" in unusable_reason(runs["interrupted"], explicit=True)
    assert "has not finished" in unusable_reason(runs["running"], explicit=True)
    assert "no manifest.json" in unusable_reason(runs["base"] / "nothing", explicit=True)


def test_last_picks_the_latest_run_that_ended_with_nothing_failed(url, runs) -> None:
    _indexed(url, runs)
    current = build_report(runs["current"])
    with open_store(url) as store:
        ident, host = spec_identity(current), fingerprint(host_facts_of(current))
        # the store's filter: ended with nothing failed as indexed (the deleted run still looks so)
        assert [e.run_id for e in store.finished(ident.key, host, before=current.metadata.run_started,
                                                 exclude="current")] == ["gone", "base"]
        skipped: list[str] = []
        path, baseline = baseline_from(CompareSettings("last"), current, store, skipped)
        assert baseline.metadata.run_id == "base" and path == runs["base"].resolve()
        assert len(skipped) == 1 and skipped[0].startswith("gone passed over:") and "no manifest.json" in skipped[0]
        # nothing earlier than the base run: no baseline at all, never an unfinished one
        first = build_report(runs["base"])
        assert baseline_from(CompareSettings("last"), first, store) is None


def test_a_run_named_on_purpose_must_have_finished_whole(url, runs) -> None:
    _indexed(url, runs)
    current = build_report(runs["current"])
    with open_store(url) as store:
        for name, why in (("interrupted", "was interrupted"), ("running", "has not finished"),
                          ("step-failed", "a step did not finish")):
            for requested in (name, str(runs[name])):  # a run id, a run directory
                with pytest.raises(CompareError, match=f"cannot be a baseline: .*{why}"):
                    baseline_from(CompareSettings(requested), current, store)
        settings = CompareSettings("failed-verdict")
        found = baseline_from(settings, current, store)
        comparison = build_comparison(settings, current, runs["current"], *found, store)
        assert comparison.baseline_run == "failed-verdict" and comparison.metrics
        assert any("baseline's own verdict was FAIL" in note for note in comparison.notes)


def test_run_py_refuses_an_unfinished_baseline_with_exit_2(url, runs, monkeypatch) -> None:
    """The command line checks a named baseline before any server starts (UsageError is exit 2)."""
    _indexed(url, runs)
    monkeypatch.setenv("TT_HISTORY_URL", url)
    for requested, message in ((str(runs["interrupted"]), "was interrupted"), ("running", "has not finished"),
                               ("step-failed", "benchmarks failed"), ("no-such-run", "no run with that id")):
        with pytest.raises(UsageError, match=message):
            check_compare_to(requested, WorkflowType.RELEASE)
    assert check_compare_to("failed-verdict", WorkflowType.RELEASE) == "failed-verdict"
    assert check_compare_to(str(runs["base"]), WorkflowType.RELEASE) == str(runs["base"].resolve())
