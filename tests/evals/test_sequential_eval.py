"""The sequential eval stop (evals/sequential_eval.py): looks, decisions, the paired serving check.

Error rates of the anytime-valid intervals themselves are measured by simulation in
tests/records/test_sequential_error_rates.py; these tests pin the eval-specific rules."""

from __future__ import annotations

import random

import pytest

from evals import sequential_eval as se
from records.evals import EvalRecord

N = 120


def reference(seed: int = 3, share: float = 0.7) -> list[float]:
    rng = random.Random(seed)
    return [1.0 if rng.random() < share else 0.0 for _ in range(N)]


def test_a_server_that_answers_like_in_process_is_decided_before_the_last_item():
    ref = reference()
    target = round(sum(ref) / N * 0.8, 6)
    decided_at = None
    for n in range(se.CHUNK_ITEMS, N + 1, se.CHUNK_ITEMS):
        state = se.look(ref[:n], target, ref)
        if se.stop_reason(state, None) is not None:
            decided_at = n
            break
    assert decided_at is not None and decided_at < N
    assert state.accuracy_decision == se.PASS and state.serving_decision == se.PASS and state.disagreements == 0
    assert state.accuracy.low <= sum(ref) / N <= state.accuracy.high


def test_a_template_bug_that_flips_a_fifth_of_the_items_fails_the_serving_check():
    ref = reference()
    served = [1.0 - v if i % 5 == 0 else v for i, v in enumerate(ref)]
    states = [se.look(served[:n], 0.5, ref) for n in range(se.CHUNK_ITEMS, N + 1, se.CHUNK_ITEMS)]
    first_fail = next(s.n for s in states if s.serving_decision == se.FAIL)
    assert first_fail < N
    assert all(s.serving_decision != se.PASS for s in states)


def test_every_item_scored_makes_the_score_exact():
    ref = reference()
    served = list(ref)
    served[0] = 1.0 - served[0]
    state = se.look(served, 0.5, ref)
    exact = sum(served) / N
    assert state.accuracy.low == pytest.approx(exact) == state.accuracy.high
    assert se.stop_reason(state, None) == se.STOP_ALL_ITEMS


def test_without_per_item_reference_the_served_scores_alone_decide():
    served = reference()
    state = se.look(served[:48], 0.2, None, population=N)
    assert state.serving_decision is None and state.accuracy_decision == se.PASS
    assert se.look(served[:8], 0.6, None, population=N).accuracy_decision == "inconclusive"


def test_the_budget_stops_an_undecided_task_and_limits_never_pass_it():
    ref = reference()
    state = se.look(ref[:25], round(sum(ref) / N * 0.99, 6), ref)
    assert se.stop_reason(state, 25) == se.STOP_BUDGET
    assert se.stop_reason(state, None) is None
    # a pass for a last item or two is not worth lm-eval's set-up: straight to the budget or the end
    assert [se.next_limit(0, 25, N), se.next_limit(0, None, N), se.next_limit(96, None, N)] == [25, 24, 120]
    assert [se.next_limit(96, None, 108), se.next_limit(100, None, 108), se.next_limit(0, 10, N)] == [108, 108, 10]


def test_more_served_items_than_the_reference_is_refused():
    with pytest.raises(ValueError, match="in-process item scores"):
        se.look([1.0] * 5, 0.5, [1.0] * 4)


class _Score:
    reference_score, published_score, tolerance = 0.7, None, 0.2


class _Reference:
    value, stderr, samples, task_config_sha256, source = 0.7, 0.04, N, "x", "in process"


def test_apply_look_writes_the_full_set_decision_and_a_serving_fail_fails_the_task():
    ref = reference()
    served = [1.0 - v if i % 3 == 0 else v for i, v in enumerate(ref)][:72]
    state = se.look(served, se.full_set_target(_Score()), ref)
    rec = EvalRecord(model_id="m", task="t", metric="acc,none", mode="ci", lm_eval_command="lm_eval", value=0.6,
                     samples=72, status="passed")
    se.apply_look(rec, state, 3, se.STOP_DECIDED, _Score(), _Reference(), suspects="the chat template")
    assert rec.target == 0.56 and rec.items_total == N and rec.looks == 3 and rec.stopped == se.STOP_DECIDED
    assert rec.serving_decision == se.FAIL and rec.status == "failed" and "chat template" in rec.serving_detail
    assert rec.disagreements == 24 and rec.max_disagreement == se.MAX_SERVING_DISAGREEMENT
    assert EvalRecord.from_dict(rec.to_dict()).disagreement_ci95 == rec.disagreement_ci95
