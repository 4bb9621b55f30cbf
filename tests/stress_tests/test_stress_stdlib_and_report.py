"""The workflow entry modules import with the standard library alone (run.py reads their
WORKFLOW_ARG_KEYS before any venv exists), and the report tables are built from the records."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from reports.section_tables import SectionTable, csv_rows, markdown_lines, stress_tables, conformance_tables
from records.server_tests import CaseResult, TestsRecord
from records.distribution import Distribution
from records.stress import CapacityLevel, CapacityRecord, StressPointRecord, StressRecord
from tests.helpers import write_model_spec

REPO = Path(__file__).resolve().parents[2]
STDLIB_ONLY = ["server_tests.run_tests", "records.server_tests", "server_tests.junit", "server_tests.capabilities",
               "stress_tests.run_stress_tests", "stress_tests.args", "stress_tests.plan", "records.stress",
               "stress_tests.saturation", "stress_tests.capacity", "stress_tests.drift", "stress_tests.judge",
               "reports.section_tables"]


def test_entry_modules_are_stdlib_only():
    code = ("import sys; sys.path[:] = [p for p in sys.path if 'site-packages' not in p]\n"
            + "".join(f"import {m}\n" for m in STDLIB_ONLY))
    result = subprocess.run([sys.executable, "-S", "-c", code], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_workflow_keys_are_registered():
    from contracts.workflow_args import NOT_YET_AVAILABLE, WorkflowType, accepted_keys
    assert WorkflowType.TESTS not in NOT_YET_AVAILABLE and WorkflowType.STRESS_TESTS not in NOT_YET_AVAILABLE
    assert {"markers", "test_name", "list_tests"} <= accepted_keys(WorkflowType.TESTS)
    assert {"run_mode", "slo", "endurance_s"} <= accepted_keys(WorkflowType.STRESS_TESTS)
    assert {"slo", "markers", "mode"} <= accepted_keys(WorkflowType.RELEASE)


def _stress_tables(run_dir: Path):
    base = run_dir / "stress_tests"
    return stress_tables(StressRecord.read(base / "stress_record.json"),
                         CapacityRecord.read(base / "capacity_record.json")
                         if (base / "capacity_record.json").is_file() else None)


def _write_records(tmp_path: Path) -> None:
    rec = TestsRecord(server_url="http://x", cases=[CaseResult("a.py::t_ok", "passed"),
                                                    CaseResult("a.py::t_bad", "failed", message="boom")])
    rec.summarise()
    rec.write(tmp_path / "tests" / "tests_record.json")
    point = StressPointRecord(name="single_x", mode="single", isl=8, osl=4, sent=2, completed=2,
                              ttft_ms=Distribution(count=2, mean=10.0, p5=5.0, p25=7.0, p50=9.0, p95=12.0, p99=13.0),
                              passed=True)
    StressRecord(points=[point], detail="1/1 load points passed", passed=True).write(
        tmp_path / "stress_tests" / "stress_record.json")
    CapacityRecord(slos=["ttft_p99:100"], capacity=2, target=4, target_met=False, levels=[
        CapacityLevel(1, True, slo_values_ms={"ttft_p99": 50.0}), CapacityLevel(3, False, reason="slow")]).write(
        tmp_path / "stress_tests" / "capacity_record.json")


def test_tables_from_records(tmp_path):
    _write_records(tmp_path)
    tests = conformance_tables(TestsRecord.read(tmp_path / "tests" / "tests_record.json"))
    assert tests[0].rows[0][:2] == ["a.py::t_bad", "FAILED"] and "1 failed" in tests[0].title
    stress = _stress_tables(tmp_path)
    assert [t.kind for t in stress] == ["load_points", "capacity"]
    assert stress[0].rows[0][8:13] == ["5", "7", "9", "12", "13"]  # TTFT p5..p99
    assert "SLO capacity: 2" in stress[1].title and "MISSED" in stress[1].title
    assert stress[1].rows[0][4] == "50" and stress[1].rows[1][4] == "n/a"
    md = "\n".join(markdown_lines(stress, lambda h, r: "|".join(h)))
    assert "Columns:" in md and "TTFT p99" in md
    assert csv_rows("stress_test", stress)[-1]["section"] == "stress_test:capacity"
    again = SectionTable.from_dict(json.loads(json.dumps(stress[1].to_dict())))
    assert again.rows == stress[1].rows
    assert conformance_tables(None) == [] and stress_tables(None, None) == []


def test_report_renders_the_section_tables(tmp_path):
    """Every renderer prints the tests and stress tables, and report.json reads back with them."""
    import io

    from reports.builder import build_report
    from reports.console import print_summary
    from reports.csv_renderer import render_csv
    from reports.html_renderer import render_html
    from reports.markdown import render_markdown
    from records.report import ReportRecord

    _write_records(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({
        "schema": "tt-run-manifest/1", "run_id": "r1", "model_id": "m", "workflow": "release", "status": "passed",
        "steps": [{"name": "tests", "status": "failed"}, {"name": "stress_tests", "status": "passed"}]}))
    write_model_spec(tmp_path / "model_spec.json", model_id="m", status="EXPERIMENTAL")
    record = build_report(tmp_path)
    assert [t.kind for t in record.stress_tests.tables] == ["load_points", "capacity"]
    assert record.tests.tables[0].kind == "cases"
    md, html = render_markdown(record), render_html(record)
    for text in (md, html):
        assert "SLO capacity: 2" in text and "a.py::t_bad" in text and "TTFT p99" in text
    assert "stress_test:capacity" in render_csv(record)
    out = io.StringIO()
    print_summary(record, file=out)
    assert "Load points" in out.getvalue()
    again = ReportRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again.stress_tests.tables[1].rows == record.stress_tests.tables[1].rows


def test_endurance_drift_windows_and_plot_in_the_report(tmp_path):
    """A timed point gets the judged drift table and a per-window table whose series the HTML plots."""
    from records.stress import Drift
    from reports.html_renderer import render_html
    from reports.builder import build_report

    windows = [{"t_end": float(t), "completed": 5, "failed": 0, "in_flight": 2, "ttft_p50_ms": 90.0,
                "tpot_p50_ms": None, "e2el_p50_ms": 100.0 + t, "memory_bytes": 400e6 + t * 1e5,
                "e2el_p95_ms": 150.0, "e2el_p99_ms": 180.0 + t} for t in range(5, 65, 5)]
    drift = Drift(memory_source="process_tree", memory_what="local server pid 1 and its descendants",
                  warmup_s=6.0, slice_s=27.0, slices=[{"n": 30}, {"n": 28}], latency_statistic="geometric mean",
                  latency_judged_first_ms=110.0, latency_judged_last_ms=131.0, latency_judged_drift_pct=19.1,
                  latency_judged_drift_ci=[2.0, 41.5], latency_p99_first_ms=185.0, latency_p99_last_ms=240.0,
                  latency_p99_n=[30, 28], latency_p99_drift_pct=29.7, latency_decision="inconclusive",
                  memory_baseline_mb=401.0,
                  memory_last_mb=406.0, memory_growth_after_warmup_pct=1.2, memory_growth_ci=[0.9, 1.5],
                  memory_decision="pass")
    point = StressPointRecord(name="endurance_speech_con-2_dur-60s", mode="endurance", kind="speech", sent=60,
                              completed=60, windows=windows, drift=drift, status="inconclusive", passed=None)
    StressRecord(points=[point], status="inconclusive", passed=None,
                 detail="0/1 load points passed; inconclusive: endurance_speech_con-2_dur-60s").write(
        tmp_path / "stress_tests" / "stress_record.json")
    tables = _stress_tables(tmp_path)
    assert [t.kind for t in tables] == ["load_points", "drift", "endurance_windows"]
    assert tables[0].rows[0][2] == "speech request" and tables[0].rows[0][-1] == "INCONCLUSIVE"
    row = dict(zip(tables[1].headers, tables[1].rows[0]))
    assert (row["Latency"], row["Memory"], row["Memory growth 95% CI"], row["n first/last"]) == (
        "INCONCLUSIVE", "PASS", "0.9..1.5", "30/28")
    # which percentile was judged, over which slices, is in the row beside its figures; the p99 is shown apart
    assert (row["Judged"], row["Slices"], row["First (ms)"], row["Drift %"], row["Drift 95% CI"]) == (
        "geometric mean", "2 x 27 s", "110", "19.1", "2.0..41.5")
    assert row["p99 first/last (ms)"] == "185/240" and "p99" in tables[1].legend["Judged"]
    assert len(tables[2].rows) == 12 and tables[2].series["p99_ms"][-1] == 240.0
    assert tables[2].series["memory_mb"][0] == 400.5
    (tmp_path / "manifest.json").write_text(json.dumps({
        "schema": "tt-run-manifest/1", "run_id": "r1", "model_id": "m", "workflow": "stress_tests",
        "status": "passed", "steps": [{"name": "stress_tests", "status": "passed"}]}))
    write_model_spec(tmp_path / "model_spec.json", model_id="m", status="EXPERIMENTAL")
    record = build_report(tmp_path)
    html = render_html(record)
    assert 'data-plot="endurance-latency"' in html and 'data-plot="endurance-memory"' in html
    # An inconclusive stress record is an undecided required check: the run is not a PASS.
    assert record.verdict.result == "INCONCLUSIVE"
    assert [c.item for c in record.verdict.checks if c.decision == "inconclusive"] == ["stress_load"]
