"""The one judge (check_tier), error-rate blockers, status enforcement and waivers, without files."""
from __future__ import annotations

import pytest

from contracts.intervals import bootstrap_ratio
from contracts.sequential import mean_cs
from records import judge
from records.bench import BenchMetrics, BenchPoint, PointParams
from records.report import BenchmarkRow, EvalRow, Section, StepSummary, TargetRow
from tests.helpers import model_spec


@pytest.mark.parametrize("status, tiers, evals", [
    ("EXPERIMENTAL", [], False),
    ("FUNCTIONAL", ["functional"], True),
    ("COMPLETE", ["functional", "complete"], True),
    ("TOP_PERF", ["functional", "complete", "target"], True),
    ("ModelStatus.COMPLETE", ["functional", "complete"], True),
    ("complete", ["functional", "complete"], True),
    ("BOGUS", [], False),
])
def test_required_tiers_follow_status(status, tiers, evals):
    assert judge.required_tiers(status) == tiers
    assert judge.evals_required(status) is evals


def point(ttft=None, tput_user=None, tput=None, completed=8, failures=None, not_sent=0,
          isl=128, osl=128, con=4, n=8):
    """A point record with the given measurements (the derived ones left as given)."""
    failures = failures or {}
    return BenchPoint(model_id="m", tool="tt-bench",
                      point=PointParams(isl=isl, osl=osl, max_concurrency=con, num_prompts=n),
                      metrics=BenchMetrics(completed=completed, failed=sum(failures.values()),
                                           failures_by_class=failures, mean_ttft_ms=ttft,
                                           tput_user=tput_user, decode_throughput=tput),
                      not_sent=not_sent)


def test_check_tier_ratios_and_boundaries():
    t = {"ttft_ms": 100.0, "tput_user": 20.0, "tput": 80.0}
    exact = judge.check_tier("complete", True, t, point(100.0, 20.0, 80.0))
    assert exact.passed is True and exact.ttft_ratio == 1.0 and exact.tput_ratio == 1.0
    slow = judge.check_tier("complete", True, t, point(100.1, 25.0, 90.0))
    assert slow.ttft_pass is False and slow.tput_user_pass is True and slow.passed is False
    assert slow.ttft_ratio == pytest.approx(1.001)


def test_check_tier_missing_target_is_not_checked_and_says_so():
    c = judge.check_tier("functional", True, {"ttft_ms": 500.0, "tput_user": None}, point(60.0, 1.0))
    assert c.ttft_pass is True and c.tput_user_pass is None and c.tput_pass is None
    assert c.passed is True and c.unchecked == ["tput_user", "tput"] and c.missing == []
    empty = judge.check_tier("functional", True, {}, point(60.0, 1.0))
    assert empty.passed is None and empty.unchecked == ["ttft_ms", "tput_user", "tput"]
    zero = judge.check_tier("functional", True, {"ttft_ms": 0, "tput": 0.0}, point(60.0, 1.0, 0.0))
    assert zero.passed is None and zero.unchecked == ["ttft_ms", "tput_user", "tput"]


def test_check_tier_missing_measurement_fails_and_not_run_is_none():
    c = judge.check_tier("functional", True, {"ttft_ms": 500.0, "tput_user": 5.0}, point(None, 6.0))
    assert c.ttft_pass is False and c.passed is False and c.missing == ["ttft_ms"]
    assert c.ttft_ratio is None and c.tput_user_pass is True
    not_run = judge.check_tier("functional", True, {"ttft_ms": 500.0}, None)
    assert not_run.passed is None and not_run.ttft_ratio is None and not_run.ttft_ms == 500.0
    assert not_run.error_rate_pass is None


def test_a_mean_ttft_of_zero_is_a_measurement():
    c = judge.check_tier("target", True, {"ttft_ms": 20.0}, point(0.0))
    assert c.ttft_pass is True and c.passed is True and c.ttft_ratio == 0.0 and c.missing == []


def test_missing_measurement_blocks_with_a_blocker_that_says_so():
    row = TargetRow("isl-128_osl-128_con-4", 128, 128, 4, 8, ran=True, measured_tput_user=6.0)
    row.tiers = [judge.check_tier("functional", True, {"ttft_ms": 500.0, "tput_user": 5.0},
                                       point(None, 6.0))]
    v = _decide(targets=[row])
    assert v.result == "FAIL"
    assert [b.detail for b in v.blockers] == ["functional tier: TTFT not measured (target 500.00 ms)"]


def test_error_rate_above_the_allowance_fails_every_tier():
    p = point(90.0, 30.0, 120.0, completed=5, failures={"http_5xx": 2, "connection_reset": 1})
    assert p.metrics.error_rate == pytest.approx(3 / 8)
    t = {"ttft_ms": 1000.0, "tput_user": 1.0, "tput": 1.0}
    checks = [judge.check_tier(tier, True, t, p) for tier in judge.TIERS]
    assert all(c.ttft_pass and c.tput_user_pass and c.tput_pass for c in checks)  # targets met ...
    assert [(c.error_rate_pass, c.passed) for c in checks] == [(False, False)] * 3  # ... by the survivors
    assert judge.check_tier("target", True, t, p, max_error_rate=0.5).passed is True


def _bench_row(p):
    return BenchmarkRow(key=p.key, isl=p.point.isl, osl=p.point.osl, max_concurrency=p.point.max_concurrency,
                        num_prompts=p.point.num_prompts, completed=p.metrics.completed,
                        failed=p.metrics.failed, failures_by_class=p.failure_classes(),
                        error_rate=p.metrics.error_rate)


@pytest.mark.parametrize("status", ["EXPERIMENTAL", "COMPLETE", "TOP_PERF"])
def test_failed_requests_block_with_their_classes_for_every_status(status):
    p = point(90.0, 30.0, 120.0, completed=5, failures={"http_5xx": 2, "connection_reset": 1})
    row = TargetRow(p.key, 128, 128, 4, 8, ran=True, measured_ttft_ms=90.0, measured_tput_user=30.0,
                    measured_tput=120.0, ci95={"ttft_ms": [80.0, 100.0]}, samples={"ttft_ms": 8})

    def verdict(allowed):
        row.tiers = [judge.check_tier(t, t in judge.required_tiers(status), {"ttft_ms": 1000.0}, p,
                                           allowed) for t in judge.TIERS]
        return _decide(model_status=status, targets=[row], benchmarks=[_bench_row(p)], max_error_rate=allowed)

    v = verdict(0.0)
    assert v.result == "FAIL"
    assert [(b.item, b.tier, b.detail) for b in v.blockers] == [
        ("isl-128_osl-128_con-4", None,
         "isl 128/osl 128/con 4: 3 of 8 requests failed (http_5xx 2, connection_reset 1) > allowed 0")]
    assert all(c.passed is False for c in row.tiers)
    error = next(c for c in v.checks if c.name == "error_rate isl-128_osl-128_con-4")
    assert (error.value, error.n, error.decision, error.required) == (0.375, 8, "fail", True)
    assert error.ci95[0] > 0 and "Wilson" in error.ci_method
    # 3 of 8 against an allowance of 37.5%: the Wilson interval (14%..69%) holds it, so 8 requests cannot tell
    undecided = verdict(0.375)
    assert undecided.result == "INCONCLUSIVE" and not undecided.blockers
    assert [c.decision for c in undecided.checks if c.name.startswith("error_rate")] == ["inconclusive"]
    assert verdict(0.75).result == "PASS"  # the whole interval is within the spec's allowance


def test_point_with_no_successful_request_names_the_failure_classes():
    p = point(completed=0, failures={"connect_error": 8})
    row = TargetRow(p.key, 128, 128, 4, 8, ran=True)
    row.tiers = [judge.check_tier("functional", True, {"ttft_ms": 500.0, "tput_user": 5.0}, p)]
    v = _decide(targets=[row], benchmarks=[_bench_row(p)])
    details = [b.detail for b in v.blockers]
    assert details[0] == "isl 128/osl 128/con 4: 8 of 8 requests failed (connect_error 8) > allowed 0"
    assert details[1] == "functional tier: TTFT not measured (target 500.00 ms); t/s/u not measured (target 5.00)"
    assert not any("n/a" in d for d in details)


def test_requests_never_sent_count_as_failed():
    p = point(90.0, completed=4, failures={"budget_exceeded": 2}, not_sent=2)
    assert p.metrics.error_rate == 0.5 and p.failure_classes() == {"budget_exceeded": 2, "not_sent": 2}
    assert judge.error_rate_detail(_bench_row(p), 0.1).endswith(
        "4 of 8 requests failed (budget_exceeded 2, not_sent 2) > allowed 0.1")


@pytest.mark.parametrize("value, allowed, noted", [
    (None, 0.0, False), (0.05, 0.05, False), (1, 1.0, False), (-1, 0.0, True), ("5%", 0.0, True),
    (True, 0.0, True)])
def test_max_error_rate_comes_from_the_device_spec(value, allowed, noted):
    got, note = judge.max_error_rate(model_spec(device_model_spec={"max_error_rate": value}))
    assert got == allowed and (note is not None) is noted


def test_waivers_without_reason_are_ignored_with_a_note():
    waivers, notes = judge.parse_waivers([
        {"workflow": "evals", "task": "gsm8k", "reason": ""},
        {"workflow": "evals", "task": "arc", "reason": "tokenizer bug"},
        {"workflow_type": "benchmarks", "task_name": "*", "reason": "HEAD spelling"},
        "junk",
    ])
    assert [(w.workflow, w.task) for w in waivers] == [("evals", "arc"), ("benchmarks", "*")]
    ignored = [n for n in notes if n.startswith("ignored")]
    assert len(ignored) == 2 and "no reason" in ignored[0]
    # The two that waive name no owner and no end: they still waive, each with a note saying so.
    assert sum("names no accepted_by and no expires" in n for n in notes) == 2


WAIVED_B = {"workflow": "evals", "task": "b", "reason": "small set", "accepted_by": "eval owners"}


@pytest.mark.parametrize("expires, judged_on, waives", [
    ("2026-12-31", "2026-12-31T23:00:00Z", True),   # the last day it waives
    ("2026-12-31", "2027-01-01T00:00:01Z", False),  # the day after: expired
    ("99.0.0", None, True),                         # a release not reached yet
    ("0.1.0", None, False),                         # reached (VERSION is at least 0.1.0)
    ("soon", None, False),                          # unreadable: waives nothing rather than for ever
])
def test_a_waiver_stops_waiving_when_it_expires_and_the_verdict_says_so(expires, judged_on, waives):
    v = _decide(evals=[_scored("b", "fail", value=0.3, ci95=(0.2, 0.4))],
                known_issues=[{**WAIVED_B, "expires": expires}], judged_on=judged_on)
    assert v.result == ("PASS" if waives else "FAIL")
    if not waives:
        note = next(n for n in v.notes if "evals/b no longer waives" in n)
        assert expires in note and "small set" in note
        assert ("accepted by eval owners" in note) is (expires != "soon") or "neither a date" in note


def test_a_rebuilt_report_judges_a_waiver_on_the_runs_date_not_today():
    waiver = [{**WAIVED_B, "expires": "2026-01-31"}]
    failing = [_scored("b", "fail", value=0.3, ci95=(0.2, 0.4))]
    assert _decide(evals=failing, known_issues=waiver, judged_on="2026-01-15T10:00:00+00:00").result == "PASS"
    assert _decide(evals=failing, known_issues=waiver, judged_on=None).result == "FAIL"  # judged today
    assert _decide(evals=failing, known_issues=waiver, judged_on="unknown").result == "FAIL"


def _decide(**kw):
    base = {"model_status": "COMPLETE", "steps": [], "targets": [],
            "evals": [EvalRow("t", "passed", passed=True)], "tests": Section(ran=False),
            "stress_tests": Section(ran=False), "benchmarks_judged": True, "evals_judged": True, "known_issues": []}
    base.update(kw)
    return judge.decide(**base)


def _scored(task, decision, mode="ci", value=0.6, ci95=(0.5, 0.7), target=0.55):
    return EvalRow(task, {"pass": "passed", "fail": "failed"}.get(decision, "inconclusive"), value=value,
                   samples=100, mode=mode, target=target, ci95=list(ci95), ci_method="normal", decision=decision,
                   passed={"pass": True, "fail": False}.get(decision))


def test_every_judged_eval_is_a_check_with_its_interval_and_decision():
    v = _decide(evals=[_scored("a", "pass", ci95=(0.56, 0.7)), _scored("b", "fail", value=0.3, ci95=(0.2, 0.4))])
    assert v.result == "FAIL" and [b.item for b in v.blockers] == ["b"]
    assert "clearly below target 0.55" in v.blockers[0].detail
    checks = {c.item: c for c in v.checks}
    assert (checks["a"].decision, checks["a"].ci95, checks["a"].n, checks["a"].required) == ("pass", [0.56, 0.7],
                                                                                               100, True)
    assert set(checks["b"].to_dict()) >= {"name", "required", "value", "ci95", "n", "target", "decision"}


def test_an_undecided_required_check_makes_the_run_inconclusive_not_a_pass():
    v = _decide(evals=[_scored("a", "pass", ci95=(0.56, 0.7)), _scored("b", "inconclusive")])
    assert v.result == "INCONCLUSIVE" and v.blockers == []
    assert "100 samples cannot decide it" in next(c for c in v.checks if c.item == "b").detail
    # A failure outranks an undecided check.
    assert _decide(evals=[_scored("b", "inconclusive"), _scored("c", "fail", ci95=(0.2, 0.4))]).result == "FAIL"


def test_smoke_decides_only_what_its_samples_can():
    v = _decide(evals=[_scored("a", "inconclusive", mode="smoke")])
    assert v.result == "PASS" and v.checks[0].required is False and "smoke" in v.checks[0].detail
    assert _decide(evals=[_scored("a", "fail", mode="smoke", ci95=(0.0, 0.2))]).result == "FAIL"


def test_a_waiver_covers_an_undecided_check_and_keeps_it_visible():
    v = _decide(evals=[_scored("b", "inconclusive")],
                known_issues=[{"workflow": "evals", "task": "b", "reason": "small set"}])
    assert v.result == "PASS" and v.checks[0].decision == "waived"


def test_step_failure_blocks_and_star_waiver_does_not_hide_it():
    steps = [StepSummary("benchmarks", "failed", detail="crashed"),
             StepSummary("reports", "failed")]
    v = _decide(steps=steps, known_issues=[{"workflow": "benchmarks", "task": "*",
                                            "reason": "slow points"}])
    assert v.result == "FAIL"
    assert [(b.category, b.item) for b in v.blockers] == [("benchmarks", "step-failed")]
    named = _decide(steps=steps, known_issues=[{"workflow": "benchmarks", "task": "step-failed",
                                                "reason": "flaky host"}])
    assert named.result == "PASS" and named.waived[0].waiver_reason == "flaky host"


def test_unrun_point_blocks_only_for_required_tiers():
    row = TargetRow("isl-1_osl-1_con-1", 1, 1, 1, 8, ran=False)
    row.tiers = [judge.check_tier(t, t in ("functional", "complete"), {"ttft_ms": 1.0}, None)
                 for t in ("functional", "complete", "target")]
    v = _decide(targets=[row])
    assert v.result == "FAIL" and [b.tier for b in v.blockers] == ["functional", "complete"]
    assert _decide(targets=[row], benchmarks_judged=False).result == "PASS"
    assert _decide(targets=[row], model_status="EXPERIMENTAL").result == "PASS"


def test_points_a_benchmarks_user_chose_waive_the_targets_left_out_visibly():
    row = TargetRow("isl-1_osl-1_con-1", 1, 1, 1, 8, ran=False)
    row.tiers = [judge.check_tier(t, True, {"ttft_ms": 1.0}, None) for t in ("functional", "complete")]
    chosen = "the run measured only the points chosen with workload=trace"
    v = _decide(targets=[row], points_chosen=chosen)
    assert v.result == "PASS" and v.blockers == []
    assert {c.decision for c in v.checks if c.category == "benchmarks"} == {"waived"}
    assert all(chosen in c.detail for c in v.checks if c.category == "benchmarks")
    assert any("targets not judged" in n for n in v.notes)
    assert _decide(targets=[row]).result == "FAIL"   # without a choice, a missing point still blocks


def test_evals_required_only_when_they_ran():
    assert _decide(evals=[]).blockers[0].item == "no-records"
    assert _decide(evals=[], evals_judged=False).result == "PASS"
    assert _decide(evals=[], model_status="EXPERIMENTAL").result == "PASS"
    err = _decide(evals=[EvalRow("x", "error", error="boom")])
    assert err.result == "FAIL" and "boom" in err.blockers[0].detail
    na = _decide(evals=[EvalRow("x", "passed", passed=None)])
    assert na.result == "PASS"


def _target_row(ttfts, tpots, users=4):
    """A judged row whose value and interval come from per-request samples, as the report builds it."""
    est = judge.target_estimates(ttfts, tpots, users)
    row = TargetRow("isl-128_osl-128_con-4", 128, 128, 4, 8, ran=True, measured_ttft_ms=est["ttft_ms"].value,
                    measured_tput_user=est["tput_user"].value, measured_tput=est["tput"].value,
                    ci95={k: e.interval.as_list() for k, e in est.items() if e.interval},
                    samples={k: e.n for k, e in est.items()}, ci_method=est["ttft_ms"].interval and
                    est["ttft_ms"].interval.method)
    return row


def test_target_estimates_follow_the_point_formulas_and_need_eight_requests():
    ttfts, tpots = [100.0, 110.0, 90.0, 100.0] * 2, [50.0, 40.0, 60.0, 50.0] * 2
    est = judge.target_estimates(ttfts, tpots, users=4)
    assert est["ttft_ms"].value == pytest.approx(100.0) and est["ttft_ms"].n == 8
    assert est["tput_user"].value == pytest.approx(20.0) and est["tput"].value == pytest.approx(80.0)
    ttft = est["ttft_ms"].interval
    # an anytime-valid interval over rounds of the 4 users: centred on the mean, and wider than a fixed-n
    # bootstrap of the same requests (the price of being valid at every round the adaptive stop looks at)
    boot = bootstrap_ratio(ttfts, [1.0] * 8, iterations=judge.BOOTSTRAP_ITERATIONS)
    assert ttft.low < boot.low < 100 < boot.high < ttft.high and (ttft.low + ttft.high) / 2 == pytest.approx(100.0)
    assert ttft.method == judge.TARGET_CI_METHOD and "confidence sequence" in ttft.method
    tpot = mean_cs(tpots, batch=4)      # t/s/u and decode throughput: the TPOT mean's interval mapped
    tu = est["tput_user"].interval
    assert (tu.low, tu.high) == pytest.approx((1000.0 / tpot.high, 1000.0 / tpot.low)) and tu.low < 20.0 < tu.high
    assert est["tput"].interval.low == pytest.approx(tu.low * 4)
    more = judge.target_estimates(ttfts * 4, tpots * 4, users=4)["ttft_ms"].interval   # 8 rounds: narrower
    assert ttft.low < more.low < 100 < more.high < ttft.high
    few = judge.target_estimates([100.0] * 7, [50.0] * 7, users=1)
    assert few["ttft_ms"].interval is None and few["ttft_ms"].n == 7
    one_round = judge.target_estimates([100.0] * 8, [50.0] * 8, users=8)   # one batch shows no spread between rounds
    assert one_round["ttft_ms"].interval is None and one_round["tput_user"].interval is None


@pytest.mark.parametrize("target, decision, result", [
    (200.0, "pass", "PASS"),            # the whole interval is below the TTFT target
    (100.0, "inconclusive", "INCONCLUSIVE"),  # the target sits inside the interval
    (50.0, "fail", "FAIL"),             # the whole interval misses it
])
def test_a_tier_target_is_decided_on_its_interval(target, decision, result):
    row = _target_row([80.0, 120.0, 90.0, 110.0, 100.0, 95.0, 105.0, 100.0] * 4, [50.0] * 32)
    row.tiers = [judge.check_tier("complete", True, {"ttft_ms": target}, point(row.measured_ttft_ms, 20.0))]
    v = _decide(targets=[row])
    check = next(c for c in v.checks if c.category == "benchmarks")
    assert check.name == f"ttft_ms {row.key} complete" and check.required and check.n == 32
    assert check.decision == decision and v.result == result
    assert check.ci95 == row.ci95["ttft_ms"] and "confidence sequence" in check.ci_method
    if decision == "fail":
        assert "95% CI" in v.blockers[0].detail and v.blockers[0].tier == "complete"
    if decision == "inconclusive":
        assert "more requests can decide it" in check.detail


def test_too_few_requests_are_inconclusive_never_a_pass_and_a_waiver_keeps_it_visible():
    row = _target_row([100.0] * 4, [50.0] * 4)
    row.tiers = [judge.check_tier("functional", True, {"ttft_ms": 5000.0}, point(100.0, 20.0)),
                 judge.check_tier("target", False, {"ttft_ms": 1.0}, point(100.0, 20.0))]
    v = _decide(targets=[row])
    assert v.result == "INCONCLUSIVE" and [c.decision for c in v.checks[:2]] == ["inconclusive", "inconclusive"]
    assert [c.required for c in v.checks[:2]] == [True, False] and "fewer than 8" in v.checks[0].detail
    waived = _decide(targets=[row], known_issues=[{"workflow": "benchmarks", "task": row.key, "reason": "noisy"}])
    assert waived.result == "PASS" and v.checks[0].name == waived.checks[0].name
    assert waived.checks[0].decision == "waived"


def test_points_that_share_a_key_each_get_their_own_error_rate_check():
    clean = _bench_row(point(90.0, completed=8, n=8))
    broken = _bench_row(point(90.0, completed=15, failures={"http_5xx": 1}, n=16))
    clean.point_file, broken.point_file = (f"benchmarks/point_{clean.key}_n-{n}.json" for n in (8, 16))
    v = _decide(benchmarks=[clean, broken], model_status="EXPERIMENTAL")
    assert [(c.name, c.decision, c.n) for c in v.checks if c.name.startswith("error_rate")] == [
        (f"error_rate {clean.key}_n-8", "pass", 8), (f"error_rate {clean.key}_n-16", "fail", 16)]
    assert v.result == "FAIL" and [b.item for b in v.blockers] == [clean.key]


def test_perf_tiers_caps_the_required_tiers_and_keeps_the_higher_ones_decided_and_shown():
    """An image gate asks whether the server works: the complete tier's clear miss is shown, not required."""
    p = point(90.0, 6.0, 24.0)
    row = TargetRow(p.key, 128, 128, 4, 8, ran=True, measured_ttft_ms=90.0, measured_tput_user=6.0,
                    measured_tput=24.0, ci95={"ttft_ms": [80.0, 100.0], "tput_user": [5.4, 6.5]},
                    samples={"ttft_ms": 8, "tput_user": 8})
    row.tiers = [judge.check_tier("functional", True, {"ttft_ms": 1000.0}, p),
                 judge.check_tier("complete", True, {"tput_user": 7.5}, p)]
    assert _decide(targets=[row]).result == "FAIL"  # COMPLETE requires the complete tier
    capped = _decide(targets=[row], perf_tiers="functional")
    assert capped.result == "PASS" and not capped.blockers
    complete = next(c for c in capped.checks if c.name == f"tput_user {p.key} complete")
    assert (complete.decision, complete.required) == ("fail", False)
    assert any("perf_tiers=functional" in n for n in capped.notes)
    assert _decide(targets=[row], perf_tiers="target").result == "FAIL"  # a cap above the status changes nothing
    assert _decide(targets=[row], perf_tiers="bogus").result == "FAIL"  # ignored, with a note


def test_a_latency_interval_never_goes_below_zero():
    """A few widely spread TTFTs at concurrency 4 give a confidence sequence wider than the mean: the
    interval is cut at 0 (where a latency's mean can be), never shown as [-451, 2519] ms."""
    est = judge.target_estimates([5.0, 3000.0, 10.0, 2900.0, 8.0, 3100.0, 4.0, 2800.0], [50.0] * 8, users=4)
    assert est["ttft_ms"].interval is not None and est["ttft_ms"].interval.low == 0.0
