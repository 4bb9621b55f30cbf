"""records.judge: the served vs in-process comparison as a verdict check."""

from __future__ import annotations

from records import judge
from records.report import EvalRow, Section


def _decide(evals):
    return judge.decide(model_status="COMPLETE", steps=[], targets=[], evals=evals, tests=Section(ran=False),
                        stress_tests=Section(ran=False), benchmarks_judged=False, evals_judged=True, known_issues=[])


def row(serving, status="passed", mode="ci", samples=120, in_process_samples=120):
    return EvalRow("tt_offline_mc", status, value=0.69, samples=samples, mode=mode, target=0.55,
                   ci95=[0.61, 0.77], decision="pass", passed=True, in_process_score=0.7,
                   in_process_ci95=[0.62, 0.78], in_process_samples=in_process_samples, serving_decision=serving,
                   serving_detail=f"detail {serving}")


def test_served_inside_the_in_process_interval_is_a_passed_required_check():
    v = _decide([row("pass")])
    serving = next(c for c in v.checks if c.name == "served vs in-process tt_offline_mc")
    assert (serving.decision, serving.required, serving.value, serving.ci95, serving.n, serving.target) == (
        "pass", True, 0.69, [0.62, 0.78], 120, 0.7)
    assert v.result == "PASS"


def test_a_serving_bug_blocks_with_its_own_detail_even_when_accuracy_passed():
    v = _decide([row("fail", status="failed")])
    assert v.result == "FAIL" and v.blockers[0].detail == "detail fail"
    assert next(c for c in v.checks if c.name.startswith("served vs")).decision == "fail"


def test_undecidable_comparisons_are_required_only_when_the_run_chose_the_reference_items():
    stale = _decide([row("inconclusive")])  # same items, reference stale or too small: the run is unverified
    assert stale.result == "INCONCLUSIVE"
    other_items = _decide([row("inconclusive", samples=40)])  # a limit override: shown, not required
    smoke = _decide([row("inconclusive", mode="smoke")])
    assert other_items.result == smoke.result == "PASS"
    assert not next(c for c in smoke.checks if c.name.startswith("served vs")).required


def test_no_in_process_score_adds_no_check():
    assert [c.name for c in _decide([row(None)]).checks] == ["accuracy tt_offline_mc"]
