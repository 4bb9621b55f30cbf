"""Tier checks, status enforcement and waiver matching, without touching files."""
from __future__ import annotations

import pytest

from reports import acceptance
from reports.schema import EvalRow, Section, StepSummary, TargetRow


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
    assert acceptance.required_tiers(status) == tiers
    assert acceptance.evals_required(status) is evals


def test_check_tier_ratios_and_boundaries():
    t = {"ttft_ms": 100.0, "tput_user": 20.0, "tput": 80.0}
    exact = acceptance.check_tier("complete", True, t, True, 100.0, 20.0, 80.0)
    assert exact.passed is True and exact.ttft_ratio == 1.0 and exact.tput_ratio == 1.0
    slow = acceptance.check_tier("complete", True, t, True, 100.1, 25.0, 90.0)
    assert slow.ttft_pass is False and slow.tput_user_pass is True and slow.passed is False
    assert slow.ttft_ratio == pytest.approx(1.001)


def test_check_tier_undefined_targets_are_not_checked():
    c = acceptance.check_tier("functional", True, {"ttft_ms": 500.0, "tput_user": None}, True,
                              60.0, 1.0, None)
    assert c.ttft_pass is True and c.tput_user_pass is None and c.tput_pass is None
    assert c.passed is True
    empty = acceptance.check_tier("functional", True, {}, True, 60.0, 1.0, None)
    assert empty.passed is None


def test_check_tier_missing_measurement_fails_and_not_run_is_none():
    c = acceptance.check_tier("functional", True, {"ttft_ms": 500.0}, True, None, None, None)
    assert c.ttft_pass is False and c.passed is False
    not_run = acceptance.check_tier("functional", True, {"ttft_ms": 500.0}, False, None, None,
                                    None)
    assert not_run.passed is None and not_run.ttft_ratio is None and not_run.ttft_ms == 500.0


def test_waivers_without_reason_are_ignored_with_a_note():
    waivers, notes = acceptance.parse_waivers([
        {"workflow": "evals", "task": "gsm8k", "reason": ""},
        {"workflow": "evals", "task": "arc", "reason": "tokenizer bug"},
        {"workflow_type": "benchmarks", "task_name": "*", "reason": "HEAD spelling"},
        "junk",
    ])
    assert [(w.workflow, w.task) for w in waivers] == [("evals", "arc"), ("benchmarks", "*")]
    assert len(notes) == 2 and "no reason" in notes[0]


def _decide(**kw):
    base = dict(model_status="COMPLETE", steps=[], targets=[], evals=[EvalRow("t", "passed",
                passed=True)], tests=Section(ran=False), stress_tests=Section(ran=False),
                benchmarks_judged=True, evals_judged=True, known_issues=[])
    base.update(kw)
    return acceptance.decide(**base)


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
    row.tiers = [acceptance.check_tier(t, t in ("functional", "complete"), {"ttft_ms": 1.0},
                                       False, None, None, None)
                 for t in ("functional", "complete", "target")]
    v = _decide(targets=[row])
    assert v.result == "FAIL" and [b.tier for b in v.blockers] == ["functional", "complete"]
    assert _decide(targets=[row], benchmarks_judged=False).result == "PASS"
    assert _decide(targets=[row], model_status="EXPERIMENTAL").result == "PASS"


def test_evals_required_only_when_they_ran():
    assert _decide(evals=[]).blockers[0].item == "no-records"
    assert _decide(evals=[], evals_judged=False).result == "PASS"
    assert _decide(evals=[], model_status="EXPERIMENTAL").result == "PASS"
    err = _decide(evals=[EvalRow("x", "error", error="boom")])
    assert err.result == "FAIL" and "boom" in err.blockers[0].detail
    na = _decide(evals=[EvalRow("x", "passed", passed=None)])
    assert na.result == "PASS"
