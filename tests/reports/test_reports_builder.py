"""Reports built from fixture run directories: verdicts, waivers, sections, exit codes."""
from __future__ import annotations

import csv
import io
import json
import re

import pytest

from reports import run_reports
from reports import build_report

CON1 = "isl-128_osl-128_con-1"
CON4 = "isl-128_osl-128_con-4"


def blockers(record):
    return [(b.category, b.item, b.tier) for b in record.verdict.blockers]


# -- status tiers ----------------------------------------------------------------------------

@pytest.mark.parametrize("status, result, tiers", [
    ("EXPERIMENTAL", "PASS", []),
    ("FUNCTIONAL", "PASS", ["functional"]),
    ("COMPLETE", "PASS", ["functional", "complete"]),
    ("TOP_PERF", "FAIL", ["functional", "complete", "target"]),
])
def test_verdict_follows_status(make_run, status, result, tiers):
    run = make_run()
    run.set_status(status)
    record = build_report(run.path)
    assert record.verdict.result == result
    assert record.verdict.required_tiers == tiers
    assert record.verdict.evals_required is (status != "EXPERIMENTAL")
    for row in record.targets:
        assert [t.required for t in row.tiers] == [t.tier in tiers for t in row.tiers]
    if status == "TOP_PERF":  # the fixture misses only the "target" tier, at both points
        assert blockers(record) == [("benchmarks", CON1, "target"), ("benchmarks", CON4, "target")]
        assert "TTFT 60.00 ms > target 20.00 ms" in record.verdict.blockers[0].detail


def test_complete_tier_miss_fails_complete_but_not_functional(make_run):
    run = make_run()
    run.edit("model_spec.json", lambda s: s["device_model_spec"]["perf_reference"][1]["targets"]
             ["complete"].update(tput=150.0))
    assert blockers(build_report(run.path)) == [("benchmarks", CON4, "complete")]
    run.set_status("FUNCTIONAL")
    assert build_report(run.path).verdict.result == "PASS"


def test_targets_carry_ratios_and_extra_points_are_reported(make_run):
    record = build_report(make_run().path)
    assert [r.key for r in record.benchmarks] == [CON1, "isl-128_osl-128_con-2", CON4]
    assert [t.key for t in record.targets] == [CON1, CON4]
    complete = next(t for t in record.targets[1].tiers if t.tier == "complete")
    assert complete.ttft_ratio == pytest.approx(150 / 200)
    assert complete.tput_ratio == pytest.approx(100 / 80)
    assert complete.passed is True


# -- missing points, evals, waivers ------------------------------------------------------------

def test_missing_perf_point_is_a_blocker_and_can_be_waived(make_run):
    run = make_run()
    run.remove("benchmarks/point_isl-128_osl-128_con-4_*")
    record = build_report(run.path)
    assert blockers(record) == [("benchmarks", CON4, "functional"), ("benchmarks", CON4,
                                                                     "complete")]
    assert record.targets[1].ran is False
    run.add_waiver("benchmarks", CON4, "OOM at concurrency 4, issue #42")
    record = build_report(run.path)
    assert record.verdict.result == "PASS"
    assert {w.waiver_reason for w in record.verdict.waived} == {"OOM at concurrency 4, issue #42"}


def test_failed_eval_blocks_and_waiver_keeps_reason(make_run):
    run = make_run()
    run.edit("evals/gsm8k_tiny/eval_record.json",
             lambda r: r.update(value=0.1, ratio_to_reference=0.1 / 0.31, passed=False,
                                status="failed"))
    record = build_report(run.path)
    assert blockers(record) == [("evals", "gsm8k_tiny", None)]
    run.add_waiver("evals", "gsm8k_tiny", "needs chat template, issue #7")
    record = build_report(run.path)
    assert record.verdict.result == "PASS"
    assert record.verdict.waived[0].item == "gsm8k_tiny"
    assert record.verdict.waived[0].waiver_reason == "needs chat template, issue #7"
    md = (run_reports.main(["--run-dir", str(run.path)]),
          (run.path / "reports/report.md").read_text())
    assert md[0] == 0 and "needs chat template, issue #7" in md[1]


def test_eval_error_blocks_unless_experimental(make_run):
    run = make_run()
    run.edit("evals/arc_easy_tiny/eval_record.json",
             lambda r: r.update(value=None, passed=None, status="error", error="lm_eval died"))
    assert blockers(build_report(run.path)) == [("evals", "arc_easy_tiny", None)]
    run.set_status("EXPERIMENTAL")
    assert build_report(run.path).verdict.result == "PASS"


def test_evals_step_ran_but_no_records_is_a_blocker(make_run):
    run = make_run()
    run.remove("evals")
    assert blockers(build_report(run.path)) == [("evals", "no-records", None)]


def test_benchmarks_workflow_does_not_fail_for_missing_evals(make_run):
    record = build_report(make_run("benchmarks_only_run").path)
    assert record.verdict.result == "PASS"
    assert record.evals == []
    not_run = {s.section: s.reason for s in record.sections_not_run}
    assert not_run["evals"] == "not part of the benchmarks workflow"
    assert set(not_run) == {"evals", "tests", "stress_tests"}
    env = record.metadata.environment
    assert env.source == "manifest" and env.packages["vllm"] == "0.9.2"
    assert env.host.cpu == "Test CPU @ 2GHz" and record.metadata.duration_s == 70.0


def test_skipped_sections_are_listed_not_failed(make_run):
    run = make_run()
    run.set_step("evals", "skipped", "--skip-evals")
    run.remove("evals")
    record = build_report(run.path)
    assert record.verdict.result == "PASS"
    reasons = {s.section: s.reason for s in record.sections_not_run}
    assert reasons == {"evals": "skipped: --skip-evals",
                       "tests": "skipped: spec tests are not implemented yet",
                       "stress_tests": "skipped: stress tests are not implemented yet"}
    assert record.tests.ran is False and record.stress_tests.ran is False


def test_failed_step_blocks(make_run):
    run = make_run()
    # Without any missed target in the records nothing explains the failure: it is a crash.
    def drop_target_tier(spec: dict) -> None:
        for ref in spec["device_model_spec"]["perf_reference"]:
            del ref["targets"]["target"]

    run.edit("model_spec.json", drop_target_tier)
    run.set_step("benchmarks", "failed", "exit code 1")
    run.set_step("evals", "not_run")
    run.remove("evals")
    record = build_report(run.path)
    assert blockers(record) == [("benchmarks", "step-failed", None)]
    assert "exit code 1" in record.verdict.blockers[0].detail
    assert ("evals", "not run: an earlier step failed") in [
        (s.section, s.reason) for s in record.sections_not_run]


def test_test_and_stress_records_are_summarised(make_run):
    from records.server_tests import CaseResult, TestsRecord

    run = make_run()
    run.set_step("tests", "passed")
    rec = TestsRecord(cases=[CaseResult("a.py::t_ok", "passed"),
                             CaseResult("a.py::t_long", "failed", message="timeout")])
    rec.summarise()
    rec.write(run.path / "tests" / "tests_record.json")
    record = build_report(run.path)
    assert record.tests.ran and [i.name for i in record.tests.items] == ["api_conformance"]
    assert blockers(record) == [("tests", "api_conformance", None)]
    assert "t_long" in record.tests.items[0].detail
    assert "stress_tests" in [s.section for s in record.sections_not_run]


def test_a_json_file_that_is_not_a_section_record_is_a_problem_not_a_guess(make_run):
    run = make_run()
    run.set_step("tests", "passed")
    run.write("tests/spec_smoke.json", {"name": "spec_smoke", "status": "passed"})
    record = build_report(run.path)
    assert [b.category for b in record.verdict.blockers] == ["records"]
    assert "tests/spec_smoke.json: not a tests record" in record.verdict.blockers[0].detail


def test_unreadable_record_is_a_blocker_not_a_crash(make_run):
    run = make_run()
    (run.path / "benchmarks/point_isl-128_osl-128_con-2_n-8.json").write_text("{not json")
    record = build_report(run.path)
    assert [b.category for b in record.verdict.blockers] == ["records"]
    assert len(record.benchmarks) == 2


def test_nothing_is_read_outside_the_run_dir(make_run, tmp_path):
    run = make_run()
    outside = tmp_path / "outside.requests.jsonl"
    outside.write_text(json.dumps({"ttft_ms": 99999.0}) + "\n")
    run.edit("benchmarks/point_isl-128_osl-128_con-2_n-8.json",
             lambda r: r.update(requests_file="../outside.requests.jsonl"))
    run.remove("benchmarks/point_isl-128_osl-128_con-2_n-8.requests.jsonl")
    # A stale run next to this one must not leak in either (a report that globbed run dirs would).
    stale = tmp_path / "stale_run" / "benchmarks"
    stale.mkdir(parents=True)
    (stale / "point_isl-999_osl-1_con-1_n-1.json").write_text("{}")
    record = build_report(run.path)
    row = record.benchmarks[1]
    assert row.requests_file is None and row.ttft_dist.source == "metrics"
    assert row.ttft_dist.max is None
    assert all(r.isl == 128 for r in record.benchmarks)


def test_distributions_come_from_request_files(make_run):
    row = build_report(make_run().path).benchmarks[0]
    assert row.requests_file == "benchmarks/point_isl-128_osl-128_con-1_n-8.requests.jsonl"
    assert row.ttft_dist.source == "requests" and row.ttft_dist.count == 8
    assert row.ttft_dist.min <= row.ttft_dist.p50 <= row.ttft_dist.max
    assert sum(row.tpot_dist.hist_counts) == 8
    assert 24.0 <= row.tpot_dist.p50 <= 36.0  # fixture TPOT 30 ms +-20%


# -- renderers -----------------------------------------------------------------------------

def test_markdown_has_every_section_and_legend(make_run):
    run = make_run()
    assert run_reports.main(["--run-dir", str(run.path)]) == 0
    md = (run.path / "reports/report.md").read_text()
    for heading in ("## Verdict", "## Metadata", "## Benchmarks", "## Performance targets",
                    "## Accuracy (evals)", "## Tests", "## Stress tests", "## Legend"):
        assert heading in md
    for label in ("TTFT (ms)", "TPOT (ms)", "t/s/u", "Decode (t/s)", "Prefill (t/s)",
                  "E2EL (ms)", "req/s", "ITL (ms)"):
        assert f"**{label}**" in md, label
    assert ("(E2EL - TTFT) / (output tokens - 1)" in md
            or "(e2el - ttft) / (output_tokens - 1)" in md)
    assert "python3 run.py --model SmolLM2-135M-Instruct --workflow release --device cpu" in md
    assert "Not run (skipped: spec tests are not implemented yet)" in md
    # completed and failed requests (what the numbers rest on), then the values by unit
    assert re.search(r"\| 128 \| 128 \| 4 \| 16 \| 0 \| 150 \| 40\.0 \| 25\.00 \| 100\.0 \|", md)


def test_csv_rows(make_run):
    run = make_run()
    run_reports.main(["--run-dir", str(run.path)])
    rows = list(csv.DictReader(io.StringIO((run.path / "reports/summary.csv").read_text())))
    sections = [r["section"] for r in rows]
    assert sections.count("benchmark") == 3 and sections.count("eval") == 2
    assert rows[-1]["section"] == "verdict" and rows[-1]["result"] == "PASS"
    con4 = next(r for r in rows if r["item"] == CON4)
    assert (con4["functional_result"], con4["complete_result"], con4["target_result"]) == (
        "PASS", "PASS", "FAIL")


def test_html_is_self_contained(make_run):
    run = make_run()
    run_reports.main(["--run-dir", str(run.path)])
    html = (run.path / "reports/report.html").read_text()
    assert "http://" not in html and "https://" not in html
    assert "<script" not in html and "<link" not in html and "@import" not in html
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#)""", html)
    for kind in ("throughput-latency", "ttft-distribution", "tpot-distribution", "accuracy"):
        assert f'data-plot="{kind}"' in html
    assert html.count("<circle") >= 3 and 'id="verdict" class="verdict PASS"' in html
    # results first: the verdict and every result section come before the metadata
    assert html.index("<h2>Verdict</h2>") < html.index("<h2>Benchmarks</h2>") < html.index("<h2>Metadata</h2>")


def test_html_escapes_record_text(make_run):
    run = make_run()
    run.add_waiver("benchmarks", "*", "<script>alert(1)</script>")
    run.set_status("TOP_PERF")
    run_reports.main(["--run-dir", str(run.path)])
    html = (run.path / "reports/report.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_console_summary_ends_with_verdict(make_run, capsys):
    run = make_run()
    run.set_status("TOP_PERF")
    assert run_reports.main(["--run-dir", str(run.path)]) == 3
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    assert lines[-1].startswith("VERDICT: FAIL")
    assert "2 blocker(s)" in lines[-1]
    assert any("Benchmarks" in ln for ln in lines) and any("Blockers" in ln for ln in lines)


def test_warmup_and_failed_requests_are_left_out_of_distributions(make_run):
    run = make_run()
    path = run.path / "benchmarks/point_isl-128_osl-128_con-1_n-8.requests.jsonl"
    with path.open("a") as fh:
        fh.write(json.dumps({"warmup": True, "success": True, "ttft_ms": 9e6}) + "\n")
        fh.write(json.dumps({"success": False, "error": "reset", "ttft_ms": 8e6}) + "\n")
        fh.write("not json\n")
    dist = build_report(run.path).benchmarks[0].ttft_dist
    assert dist.count == 8 and dist.max < 1000


def test_run_command_never_shows_secret_like_args(make_run):
    run = make_run()
    run.edit("cli_args.json", lambda a: a.update(hf_token="hf_abc", jwt_secret="s3cret"))
    command = build_report(run.path).metadata.run_command
    assert "hf_abc" not in command and "s3cret" not in command
    assert "--hf-token <redacted>" in command


def test_legend_rows_are_the_records_field_descriptions():
    from records.bench import BenchMetrics, PointParams
    from reports import legend
    from records.report import Verdict

    rows = {label: text for _, label, text in legend.legend()}
    assert rows["TTFT (ms)"] == BenchMetrics.legend()["mean_ttft_ms"]
    assert rows["ISL"] == PointParams.legend()["isl"]
    assert rows["Verdict"] == Verdict.legend()["result"]
    for label in ("TTFT (ms)", "TPOT (ms)", "ITL (ms)", "t/s/u", "Decode (t/s)", "Prefill (t/s)",
                  "E2EL (ms)", "req/s", "failures_by_class", "error_rate", "Ratio", "Tiers",
                  "Accuracy check", "Waived", "Verdict"):
        assert rows.get(label), label
    assert "(e2el - ttft) / (output_tokens - 1)" in rows["TPOT (ms)"]
    assert "min(max_concurrency, num_prompts)" in rows["Decode (t/s)"]


# -- failed requests ---------------------------------------------------------------------------

POINT4 = "benchmarks/point_isl-128_osl-128_con-4_n-16.json"


def _fail_requests(run, failures: dict, completed: int) -> None:
    def fn(rec: dict) -> None:
        rec["metrics"].update(completed=completed, failed=sum(failures.values()),
                              failures_by_class=failures)
        if completed == 0:  # what the client writes when nothing completed
            for key in list(rec["metrics"]):
                if key.endswith("_ms") or key in ("tput_user", "decode_throughput", "prefill_throughput"):
                    rec["metrics"][key] = None
    run.edit(POINT4, fn)


def test_failed_requests_block_with_their_classes(make_run):
    run = make_run()
    _fail_requests(run, {"http_5xx": 2, "connection_reset": 1}, completed=13)
    record = build_report(run.path)
    assert blockers(record) == [("benchmarks", CON4, None)]
    assert record.verdict.blockers[0].detail == (
        "isl 128/osl 128/con 4: 3 of 16 requests failed (http_5xx 2, connection_reset 1) > allowed 0")
    con4 = next(t for t in record.targets if t.key == CON4)
    assert [t.passed for t in con4.tiers] == [False, False, False]  # targets met only by the survivors
    assert run_reports.main(["--run-dir", str(run.path)]) == 3
    md = (run.path / "reports/report.md").read_text()
    # completed and failed requests beside each other; the planned prompt count last, named as such
    assert "| 4 | 13 | 3 |" in md and "| http_5xx 2, connection_reset 1 | 16 |" in md and "| none | 8 |" in md
    rows = list(csv.DictReader(io.StringIO((run.path / "reports/summary.csv").read_text())))
    assert next(r for r in rows if r["item"] == CON4)["failure_classes"] == "http_5xx 2, connection_reset 1"
    assert "http_5xx 2, connection_reset 1" in (run.path / "reports/report.html").read_text()
    # 3 of 16 (19%) against an allowance of 20%: the Wilson interval 7%..43% holds it, 16 requests cannot tell
    run.edit("model_spec.json", lambda s: s["device_model_spec"].update(max_error_rate=0.2))
    undecided = build_report(run.path).verdict
    assert undecided.result == "INCONCLUSIVE" and not undecided.blockers
    check = next(c for c in undecided.checks if c.name == f"error_rate {CON4}")
    assert (check.decision, check.n, check.value, check.target) == ("inconclusive", 16, 0.1875, 0.2)
    run.edit("model_spec.json", lambda s: s["device_model_spec"].update(max_error_rate=0.5))
    assert build_report(run.path).verdict.result == "PASS"  # the whole interval is within 50%


def test_experimental_model_still_fails_on_failed_requests(make_run):
    run = make_run("benchmarks_only_run")
    run.set_status("EXPERIMENTAL")
    _fail_requests(run, {"malformed_sse": 4}, completed=12)
    record = build_report(run.path)
    assert record.verdict.required_tiers == [] and record.verdict.result == "FAIL"
    assert "4 of 16 requests failed (malformed_sse 4)" in record.verdict.blockers[0].detail


def test_point_with_no_completed_request_names_the_classes(make_run, capsys):
    run = make_run()
    run.set_step("benchmarks", "failed", "exit code 1")
    _fail_requests(run, {"connect_error": 16}, completed=0)
    record = build_report(run.path)
    details = [b.detail for b in record.verdict.blockers]
    assert details == [
        "isl 128/osl 128/con 4: 16 of 16 requests failed (connect_error 16) > allowed 0",
        "functional tier: TTFT not measured (target 1000.00 ms); t/s/u not measured (target 4.00); "
        "decode tput not measured (target 16.00)",
        "complete tier: TTFT not measured (target 200.00 ms); t/s/u not measured (target 20.00); "
        "decode tput not measured (target 80.00)"]
    # the failed step is explained by the point's records, not a bare "step failed"
    assert "step-failed" not in [b.item for b in record.verdict.blockers]
    run_reports.main(["--run-dir", str(run.path)])
    out = capsys.readouterr().out
    assert "connect_error 16" in out and "n/a < target" not in out


def test_a_stored_judged_tier_is_only_a_fallback_for_targets(make_run):
    """Point files may carry the judge's own output; the report judges again from the spec."""
    run = make_run()
    run.edit(POINT4, lambda r: r.update(targets={"functional": {"tier": "functional", "passed": False,
                                                                "ttft_ms": 1000.0}}))
    con4 = next(t for t in build_report(run.path).targets if t.key == CON4)
    assert [t.passed for t in con4.tiers] == [True, True, False]


def test_failed_step_explained_by_its_records_follows_the_records(make_run):
    """evals exits 1 when a task misses its reference; the waiver must still clear it."""
    run = make_run()
    run.set_step("evals", "failed", "exit code 1")
    run.edit("evals/gsm8k_tiny/eval_record.json",
             lambda r: r.update(value=0.1, passed=False, status="failed"))
    assert blockers(build_report(run.path)) == [("evals", "gsm8k_tiny", None)]
    run.add_waiver("evals", "gsm8k_tiny", "known tokenizer issue")
    record = build_report(run.path)
    assert record.verdict.result == "PASS"
    assert any("exited non-zero" in n for n in record.verdict.notes)
    # The same failed step with nothing in the records to explain it is a crash: a blocker.
    run.edit("evals/gsm8k_tiny/eval_record.json", lambda r: r.update(passed=True, status="passed"))
    assert blockers(build_report(run.path)) == [("evals", "step-failed", None)]


def test_previous_reports_step_failure_is_not_a_blocker(make_run):
    run = make_run()
    run.set_step("reports", "failed", "verdict FAIL")
    assert build_report(run.path).verdict.result == "PASS"


def test_only_a_benchmarks_run_with_chosen_points_leaves_targets_unjudged():
    from reports.builder import _points_chosen

    assert "workload=trace" in _points_chosen("benchmarks", {"workflow_args": "workload=trace trace_file=t.jsonl"})
    assert "points=64x8x2" in _points_chosen("benchmarks", {"workflow_args": "mode=ci points=64x8x2"})
    assert _points_chosen("benchmarks", {"workflow_args": "mode=ci"}) is None
    assert _points_chosen("release", {"workflow_args": "points=64x8x2"}) is None   # a release judges its targets
    assert _points_chosen("benchmarks", {"workflow_args": "broken"}) is None


def test_a_running_release_with_overlapping_steps_lasts_until_its_last_finished_step(make_run):
    """The reports step runs while the run is still going (no ``ended``); evals and tests ran side by side,
    so the duration is the span up to the last finished step, not the sum of the steps' durations."""
    run = make_run()

    def overlapping(manifest: dict) -> None:
        manifest["status"], manifest["ended"] = "running", None
        manifest["started"] = "2026-01-11T09:00:00+00:00"
        manifest["steps"] = [
            {"name": "evals", "status": "passed", "started": "2026-01-11T09:00:00+00:00",
             "ended": "2026-01-11T09:00:33+00:00", "duration_s": 33.0, "outputs": [], "detail": ""},
            {"name": "tests", "status": "passed", "started": "2026-01-11T09:00:00+00:00",
             "ended": "2026-01-11T09:00:36+00:00", "duration_s": 36.0, "outputs": [], "detail": ""},
            {"name": "reports", "status": "running", "started": "2026-01-11T09:00:36+00:00", "ended": None,
             "duration_s": None, "outputs": [], "detail": ""}]

    run.edit("manifest.json", overlapping)
    assert build_report(run.path).metadata.duration_s == 36.0  # not 33 + 36
