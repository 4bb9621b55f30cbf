"""report.json round trip, rebuild-from-files and the entry point's exit codes."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reports import run_reports
from reports import REPORT_FILES, ReportRecord, SchemaError, build_report

REPO = Path(__file__).resolve().parents[2]


def _strip_timestamps(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    doc["metadata"].pop("generated_at")
    return doc


@pytest.mark.parametrize("fixture, status", [("release_run", "COMPLETE"),
                                             ("release_run", "TOP_PERF"),
                                             ("benchmarks_only_run", "EXPERIMENTAL")])
def test_json_round_trip(make_run, fixture, status):
    run = make_run(fixture)
    run.set_status(status)
    run.add_waiver("benchmarks", "isl-128_osl-128_con-1", "known slow first point")
    record = build_report(run.path)
    path = run.path / "report.json"
    record.write(path)
    back = ReportRecord.read(path)
    assert back == record
    assert back.to_json() == record.to_json()
    doc = json.loads(path.read_text())
    assert list(doc)[0] == "schema" and doc["schema"] == "tt-report/1"
    assert set(doc) >= {"metadata", "benchmarks", "targets", "evals", "tests", "stress_tests",
                        "sections_not_run", "verdict"}
    assert set(doc["verdict"]) >= {"result", "blockers", "waived"}


def test_reader_rejects_other_majors_and_bad_types(make_run):
    doc = build_report(make_run().path).to_dict()
    with pytest.raises(SchemaError, match="unsupported"):
        ReportRecord.from_dict({**doc, "schema": "tt-report/2"})
    with pytest.raises(SchemaError):
        ReportRecord.from_dict({**doc, "schema": "something-else/1"})
    bad = json.loads(json.dumps(doc))
    bad["benchmarks"][0]["isl"] = "128"
    with pytest.raises(SchemaError, match=r"benchmarks\[0\]\.isl"):
        ReportRecord.from_dict(bad)
    extra = json.loads(json.dumps(doc))
    extra["future_section"] = {"x": 1}  # additive change within the major: still readable
    assert ReportRecord.from_dict(extra) == ReportRecord.from_dict(doc)


def test_rebuild_from_files_is_identical(make_run):
    run = make_run()
    assert run_reports.main(["--run-dir", str(run.path)]) == 0
    first = {name: (run.path / "reports" / name).read_text() for name in REPORT_FILES}
    shutil.rmtree(run.path / "reports")
    assert run_reports.main(["--run-dir", str(run.path)]) == 0
    second = {name: (run.path / "reports" / name).read_text() for name in REPORT_FILES}
    assert _strip_timestamps(json.loads(first["report.json"])) == _strip_timestamps(
        json.loads(second["report.json"]))
    assert first["summary.csv"] == second["summary.csv"]
    outputs = json.loads((run.path / "reports/outputs.json").read_text())["outputs"]
    assert outputs == [f"reports/{n}" for n in REPORT_FILES] + ["reports/outputs.json"]


def test_exit_codes(make_run, tmp_path, capsys):
    run = make_run()
    assert run_reports.main(["--run-dir", str(run.path), "--server-url", "http://127.0.0.1:1",
                             "--disable-trace-capture",
                             "--workflow-args-json", '{"mode": "smoke"}']) == 0
    run.set_status("TOP_PERF")
    assert run_reports.main(["--run-dir", str(run.path)]) == 3
    assert run_reports.main(["--run-dir", str(run.path), "--ignore-verdict"]) == 0
    assert run_reports.main(["--run-dir", str(run.path), "--workflow-args-json",
                             '{"ignore_verdict": true}']) == 0
    assert json.loads((run.path / "reports/report.json").read_text())["verdict"]["result"] == \
        "FAIL"
    assert run_reports.main(["--run-dir", str(tmp_path / "nope")]) == 2
    assert run_reports.main(["--run-dir", str(run.path), "--workflow-args-json", "[1"]) == 2
    assert run_reports.main([]) == 2
    (run.path / "manifest.json").unlink()
    assert run_reports.main(["--run-dir", str(run.path)]) == 2
    assert "no manifest.json" in capsys.readouterr().err


def test_model_spec_json_flag_only_fills_a_missing_snapshot(make_run, tmp_path):
    run = make_run()
    other = tmp_path / "other_spec.json"
    other.write_text(json.dumps({**run.read("model_spec.json"), "status": "TOP_PERF"}))
    assert build_report(run.path, other).verdict.model_status == "COMPLETE"
    (run.path / "model_spec.json").unlink()
    assert build_report(run.path, other).verdict.model_status == "TOP_PERF"


def test_entry_script_runs_as_a_child_process(make_run):
    """The orchestrator runs the entry as a script with PYTHONPATH=<repo root>."""
    run = make_run()
    run.set_status("TOP_PERF")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "reports.run_reports",
                           "--run-dir", str(run.path), "--model-spec-json",
                           str(run.path / "model_spec.json")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.strip().splitlines()[-1].startswith("VERDICT: FAIL")
    for name in REPORT_FILES:
        assert (run.path / "reports" / name).is_file()
