"""``--workflow-args`` keys the evals workflow does not own: they configure lm-eval (stdlib only).

Why: the documented form ``--workflow-args "batch_size=4 max_tokens=512"`` tunes lm-eval itself, and
lm-eval takes far more settings than the evals workflow could whitelist. A key naming one of lm-eval's
own API-model settings (``LM_EVAL_SETTINGS``) replaces that setting of every task; any other key is a
generation kwarg, which lm-eval sends in each request body (``max_tokens``, ``temperature``, ``top_p`` ...).
Keys the workflow owns (``mode``, ``tasks``, ``limit``) keep their meaning and never reach here.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping

from contracts.workflow_keys import EVAL_PASSTHROUGH, LM_EVAL_SETTING_MINIMUMS
from evals.eval_spec import EvalTask

#: --workflow-args key -> the EvalTask field it sets (each one a flag or model arg of lm-eval); the keys
#: and their least values are declared in contracts.workflow_keys.
LM_EVAL_SETTINGS = {key: "timeout_s" if key == "timeout" else key for key in LM_EVAL_SETTING_MINIMUMS}


def check_passthrough(key: str, value: str) -> str | None:
    """Why ``key=value`` cannot pass through to lm-eval, or None when it can."""
    return EVAL_PASSTHROUGH.problem(key, value)


def passthrough_args(args: Mapping[str, str], owned: frozenset[str]) -> dict[str, str]:
    """The keys of ``args`` that are not the workflow's own, checked; ValueError names the first bad one."""
    extra = {k: str(v) for k, v in args.items() if k not in owned}
    for key, value in extra.items():
        close = difflib.get_close_matches(key, sorted(owned), n=1, cutoff=0.75)
        if close:
            raise ValueError(f"unknown evals workflow arg {key!r}; did you mean {close[0]!r}?")
        problem = check_passthrough(key, value)
        if problem:
            raise ValueError(problem)
    return extra


def apply_passthrough(task: EvalTask, extra: Mapping[str, str]) -> EvalTask:
    """``task`` with lm-eval's settings replaced and the generation kwargs merged over the task's own."""
    if not extra:
        return task
    settings = {LM_EVAL_SETTINGS[k]: int(v) for k, v in extra.items() if k in LM_EVAL_SETTINGS}
    gen = {**task.gen_kwargs, **{k: v for k, v in extra.items() if k not in LM_EVAL_SETTINGS}}
    return dataclasses.replace(task, gen_kwargs=gen, **settings)
