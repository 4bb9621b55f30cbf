"""Adaptive sample size: the stop rule on known numbers, then run_benchmarks against the stub, whose
TTFTs are known (evenly spread over [20, 220] ms: mean 120 ms), and the report's verdict on that run."""
from __future__ import annotations

import json
import os

from benchmarking.run_control import goal_checks, sampling_stop
from records.bench import STOP_REASONS
from records.sampling import DEFAULT_PRECISION, SampleGoal
from reports import run_reports
from tests.benchmarking.test_bench_stub_runs import _run
from tests.helpers import model_spec


def goal(target=None, con=4, n=8, **kw):
    checks = [("ttft_ms p functional", "ttft_ms", target)] if target else []
    return SampleGoal(checks=checks, min_requests=n, concurrency=con, users=min(con, n), **kw)


SPREAD = [20.0 + 20.0 * ((k * 0.6180339887) % 1.0) for k in range(1, 400)]  # the stub's TTFTs


def test_goal_checks_are_the_required_tiers_targets_named_as_the_verdict_names_them():
    targets = {"functional": {"ttft_ms": 500, "tput_user": 2.0, "tput": None},
               "complete": {"ttft_ms": 100}, "target": {"ttft_ms": 1}}
    assert goal_checks("isl-1_osl-2_con-4", targets, ["functional", "complete"]) == [
        ("ttft_ms isl-1_osl-2_con-4 functional", "ttft_ms", 500.0),
        ("tput_user isl-1_osl-2_con-4 functional", "tput_user", 2.0),
        ("ttft_ms isl-1_osl-2_con-4 complete", "ttft_ms", 100.0)]


def test_a_point_without_checks_stops_at_its_minimum_and_a_clear_target_is_decided_there():
    assert sampling_stop(goal(), SPREAD[:8], [], sent=8, failed=0, elapsed_s=1).stop_reason == "no_checks"
    clear = sampling_stop(goal(1000.0), SPREAD[:8], [], sent=8, failed=0, elapsed_s=1)
    assert clear.stop_reason == "decided" and clear.decisions == {"ttft_ms p functional": "pass"}
    assert sampling_stop(goal(5.0), SPREAD[:8], [], sent=8, failed=0, elapsed_s=1).decisions == {
        "ttft_ms p functional": "fail"}


def test_too_few_samples_ask_for_a_round_in_whole_multiples_of_the_concurrency():
    state = sampling_stop(goal(1000.0, con=1, n=4), SPREAD[:4], [], sent=4, failed=0, elapsed_s=1)
    assert state.stop_reason is None and state.next_round == 4  # 8 samples decide
    assert state.decisions == {"ttft_ms p functional": "inconclusive"}


def test_a_target_inside_the_interval_samples_until_the_precision_goal_then_says_so():
    near = sampling_stop(goal(31.0), SPREAD[:8], [], sent=8, failed=0, elapsed_s=1)
    assert near.stop_reason is None and near.next_round == 8  # at most doubling per round
    precise = sampling_stop(goal(30.0), SPREAD[:200], [], sent=200, failed=0, elapsed_s=1)
    assert precise.stop_reason == "precision" and "still undecided" in precise.detail


def test_budget_cap_and_failures_stop_the_sampling():
    slow = sampling_stop(goal(31.0, budget_s=10.0), SPREAD[:8], [], sent=8, failed=0, elapsed_s=8.0)
    assert slow.stop_reason == "sample_budget" and "would overrun 10 s" in slow.detail
    # below the fewest samples that can decide, the sampling budget does not stop a point (a busy host's
    # smoke point of 4 slow requests still gets its 8); the point's own budget bounds it
    busy = sampling_stop(goal(1000.0, con=1, n=4, budget_s=10.0), SPREAD[:4], [], sent=4, failed=0, elapsed_s=9.0)
    assert busy.stop_reason is None and busy.next_round == 4
    capped = sampling_stop(goal(31.0, max_requests=8), SPREAD[:8], [], sent=8, failed=0, elapsed_s=1)
    assert capped.stop_reason == "max_requests"
    assert sampling_stop(goal(31.0), SPREAD[:7], [], sent=8, failed=1, elapsed_s=1).stop_reason == "failed_requests"
    assert set(STOP_REASONS) >= {"no_checks", "decided", "precision", "failed_requests", "sample_budget",
                                 "max_requests", "cut_short"}
    assert DEFAULT_PRECISION == 0.05


def _spec_with(targets_by_con):
    return model_spec(model_id="stub-id", hf_model_repo="org/stub", served_model_name="stub-model", status="FUNCTIONAL",
                      device_model_spec={"max_context": 1024, "max_concurrency": 4, "perf_reference": [
                          {"isl": 16, "osl": 4, "max_concurrency": con, "num_prompts": 4, "task_type": "text",
                           "targets": {"functional": {"ttft_ms": t}}} for con, t in targets_by_con]}).to_dict()


def test_run_benchmarks_samples_until_decided_and_records_why(stub_factory, tmp_path, monkeypatch):
    """con 1: target 1000 ms is decided (pass) once 8 samples exist; con 2: target 5 ms fails by 16;
    con 4: a 120 ms target sits on the stub's mean TTFT, so the point samples on until its precision
    goal (15% here, to keep the test short) is met, or its budget ends, and stays inconclusive."""
    stub = stub_factory("--ttft-ms", "20", "--ttft-spread-ms", "200", "--itl-ms", "1")
    run_dir = str(tmp_path / "run")
    spec = _spec_with([(1, 1000), (2, 5), (4, 120)])
    monkeypatch.setattr("tests.benchmarking.test_bench_stub_runs.SPEC", spec)
    p = _run(run_dir, stub.url, {"only_targets": "true", "sample_budget_s": "20", "precision": "0.15"},
             "--disable-trace-capture")
    assert p.returncode == 0, p.stdout + p.stderr
    bdir = os.path.join(run_dir, "benchmarks")
    rec = {con: json.load(open(os.path.join(bdir, f"point_isl-16_osl-4_con-{con}_n-4.json"))) for con in (1, 2, 4)}
    s1, s2, s4 = (rec[c]["sampling"] for c in (1, 2, 4))
    assert (s1["stop_reason"], s1["requests"], s1["rounds"], s1["min_requests"]) == ("decided", 8, 2, 4)
    assert s1["decisions"] == {"ttft_ms isl-16_osl-4_con-1 functional": "pass"}
    # anytime-valid intervals are wider at 8 than a bootstrap: the stub's spread decides it within two more rounds
    assert s2["stop_reason"] == "decided" and 8 <= s2["requests"] <= 16, s2
    assert s2["decisions"] == {"ttft_ms isl-16_osl-4_con-2 functional": "fail"}
    assert s4["stop_reason"] in ("precision", "sample_budget", "max_requests") and s4["requests"] > 16, s4
    assert s4["decisions"] == {"ttft_ms isl-16_osl-4_con-4 functional": "inconclusive"}
    rows = open(os.path.join(run_dir, rec[4]["requests_file"])).read().splitlines()
    assert len(rows) == s4["requests"] == rec[4]["metrics"]["completed"]
    assert len({json.loads(r)["request_id"] for r in rows}) == len(rows)  # rounds never reuse an id
    assert any(f"stopped: {why}" in p.stdout for why in ("precision", "sample_budget", "max_requests"))
    # the console table shows the report's one decision per tier, never a point value's ok beside an undecided check
    table = {line.split()[3]: line.split()[-1] for line in p.stdout.splitlines()
             if line.strip().startswith("tt-bench") and len(line.split()) > 4}
    assert table == {"1": "f:pass", "2": "f:FAIL", "4": "f:undecided"}, p.stdout
    _the_report_decides_the_same_checks(run_dir, rec)


def _the_report_decides_the_same_checks(run_dir, rec):
    """The run's report.json (built by the reports entry): one check per target with the point's requests as n
    and its 95% interval; the clearly missed 5 ms target fails the verdict, and with that target met the one
    sitting on the mean leaves it INCONCLUSIVE."""
    with open(os.path.join(run_dir, "manifest.json"), "w") as fh:
        json.dump({"schema": "tt-run-manifest/1", "run_id": "stub-run", "model_id": "stub-id", "workflow": "benchmarks",
                   "status": "passed", "steps": [{"name": "benchmarks", "status": "passed"}]}, fh)

    def report(expected_exit):
        assert run_reports.main(["--run-dir", run_dir]) == expected_exit
        report = json.load(open(os.path.join(run_dir, "reports", "report.json")))
        return report["verdict"], {c["name"]: c for c in report["verdict"]["checks"]}

    verdict, checks = report(run_reports.EXIT_FAIL)
    name = "ttft_ms isl-16_osl-4_con-{} functional".format
    for con, decision in ((1, "pass"), (2, "fail"), (4, "inconclusive")):
        check = checks[name(con)]
        assert (check["decision"], check["required"]) == (decision, True), check
        assert check["n"] == rec[con]["sampling"]["requests"] and check["ci95"][0] <= check["value"] <= check["ci95"][1]
        assert checks[f"error_rate isl-16_osl-4_con-{con}"]["decision"] == "pass"
    assert checks[name(2)]["ci95"][0] > 5.0  # the whole interval misses the tightened target
    assert checks[name(4)]["ci95"][0] <= 120.0 <= checks[name(4)]["ci95"][1]  # the target sits inside it
    assert verdict["result"] == "FAIL" and [b["item"] for b in verdict["blockers"]] == ["isl-16_osl-4_con-2"]
    assert "95% CI" in verdict["blockers"][0]["detail"]

    with open(os.path.join(run_dir, "model_spec.json")) as fh:
        spec = json.load(fh)
    spec["device_model_spec"]["perf_reference"][1]["targets"]["functional"]["ttft_ms"] = 1000  # con 2: now met
    with open(os.path.join(run_dir, "model_spec.json"), "w") as fh:
        json.dump(spec, fh)
    verdict, checks = report(run_reports.EXIT_INCONCLUSIVE)
    assert verdict["result"] == "INCONCLUSIVE" and not verdict["blockers"]
    assert [n for n, c in checks.items() if c["decision"] != "pass"] == [name(4)]
    md = open(os.path.join(run_dir, "reports", "report.md")).read()
    assert "VERDICT: INCONCLUSIVE" in md and f"| {name(4)} | yes |" in md and "| INCONCLUSIVE |" in md
