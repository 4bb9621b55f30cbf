"""evals.passthrough: --workflow-args keys the evals workflow does not own go to lm-eval."""

from __future__ import annotations

import pytest

from evals.eval_spec import WORKFLOW_ARG_KEYS, EvalTask
from evals.passthrough import apply_passthrough, check_passthrough, passthrough_args


def test_lm_eval_settings_replace_the_task_and_other_keys_are_generation_kwargs() -> None:
    task = EvalTask("t", gen_kwargs={"until": "\n", "max_tokens": "8"}, batch_size=1, num_concurrent=8)
    extra = passthrough_args({"mode": "smoke", "batch_size": "4", "max_tokens": "512", "temperature": "0.2",
                              "timeout": "60"}, WORKFLOW_ARG_KEYS)
    assert extra == {"batch_size": "4", "max_tokens": "512", "temperature": "0.2", "timeout": "60"}
    out = apply_passthrough(task, extra)
    assert (out.batch_size, out.timeout_s, out.num_concurrent) == (4, 60, 8)
    assert dict(out.gen_kwargs) == {"until": "\n", "max_tokens": "512", "temperature": "0.2"}
    assert apply_passthrough(task, {}) is task


@pytest.mark.parametrize("key, value, message", [
    ("batch_size", "four", "batch_size='four' must be an integer >= 1"),
    ("batch_size", "0", "batch_size='0' must be an integer >= 1"),
    ("stop", "a,b", "lm-eval settings cannot hold ','"),
    ("max_tokens", "", "max_tokens= has no value"),
])
def test_values_lm_eval_cannot_take_are_refused(key: str, value: str, message: str) -> None:
    assert message in check_passthrough(key, value)
    with pytest.raises(ValueError, match=message):
        passthrough_args({key: value}, WORKFLOW_ARG_KEYS)


def test_a_typo_of_an_owned_key_is_not_passed_through() -> None:
    with pytest.raises(ValueError, match="unknown evals workflow arg 'limt'; did you mean 'limit'"):
        passthrough_args({"limt": "5"}, WORKFLOW_ARG_KEYS)
