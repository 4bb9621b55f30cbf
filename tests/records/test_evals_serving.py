"""records.evals.serving_check: a served score judged against the in-process score of the same items."""

from __future__ import annotations

import pytest

from evals.eval_spec import InProcessScore
from records.evals import MIN_SERVING_SAMPLES, EvalRecord, serving_check

HASH = "a" * 64


def ref(value=0.69, stderr=0.042, samples=120, task_hash=HASH):
    return InProcessScore(value=value, stderr=stderr, samples=samples, task_config_sha256=task_hash,
                          source="in process test")


def check(served, served_n=120, in_process=None, task_hash=HASH):
    return serving_check(served, served_n, in_process or ref(), task_config_sha256=task_hash,
                         suspects="the chat template")


def test_a_served_score_inside_the_in_process_interval_passes():
    got = check(0.70)
    assert got.decision == "pass" and got.interval.low < 0.69 < got.interval.high
    assert got.interval.low == pytest.approx(0.69 - 1.96 * 0.042, abs=1e-3)
    assert "inside in-process 0.6900" in got.detail


@pytest.mark.parametrize("served", [0.55, 0.80, 0.0])
def test_a_served_score_outside_the_interval_fails_as_a_serving_bug_naming_what_to_look_at(served):
    got = check(served)
    assert got.decision == "fail"
    assert got.detail.startswith("serving bug:") and "the chat template" in got.detail


@pytest.mark.parametrize("served_n, in_process, task_hash, why", [
    (25, ref(), HASH, "different item sets"),                       # a limit override ran other items
    (120, ref(), "b" * 64, "changed since"),                         # the task's files changed
    (MIN_SERVING_SAMPLES - 1, ref(samples=MIN_SERVING_SAMPLES - 1), HASH, "fewer than"),
])
def test_what_cannot_be_compared_is_inconclusive_never_a_pass(served_n, in_process, task_hash, why):
    got = check(0.69, served_n, in_process, task_hash)
    assert got.decision == "inconclusive" and why in got.detail


def test_a_zero_stderr_score_gets_a_wilson_interval_not_a_point():
    got = check(0.95, 25, ref(value=1.0, stderr=0.0, samples=25))
    assert got.interval.method.startswith("Wilson") and got.interval.low < 0.9
    assert got.decision == "pass"


def test_nothing_to_compare_is_not_judged():
    assert serving_check(0.5, 10, None, task_config_sha256=HASH, suspects="x") is None
    assert serving_check(None, None, ref(), task_config_sha256=HASH, suspects="x") is None


def test_the_record_carries_the_comparison_and_a_serving_bug_fails_the_task():
    rec = EvalRecord(model_id="m", task="t", metric="acc,none", mode="ci", lm_eval_command="", value=0.3,
                     samples=120, status="passed")
    rec.apply_serving(check(0.3))
    assert (rec.status, rec.serving_decision, rec.in_process_score, rec.in_process_samples) == (
        "failed", "fail", 0.69, 120)
    assert rec.in_process_ci95[0] < 0.69 < rec.in_process_ci95[1] and rec.in_process_source == "in process test"
    kept = EvalRecord.from_dict(rec.to_dict())
    assert kept.serving_detail == rec.serving_detail
    ok = EvalRecord(model_id="m", task="t", metric="acc,none", mode="ci", lm_eval_command="", status="inconclusive")
    ok.apply_serving(check(0.69))
    assert ok.status == "inconclusive"  # a passing comparison does not decide the accuracy check
