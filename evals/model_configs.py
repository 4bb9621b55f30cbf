"""Standard lm-eval tasks with published scores for the catalog's LLMs (real hardware).

These tasks download their datasets from the HF hub. Offline (``HF_DATASETS_OFFLINE=1``) each one
fails in seconds with one line naming the dataset, and the other tasks go on.

Published scores are the model developers' numbers (fractions, i.e. percent / 100), with the
source each was read from. Their protocols differ from lm-eval's in places (prompt wording, shot
count, macro vs micro averages), which is why a task is compared first with a *reference* score
measured by us with exactly this command on known-good hardware, and only falls back to the
published number. No reference has been measured for these models yet (``reference_score=None``);
see evals/README.md "Adding a reference score".

Task choices, and why:
* ``ifeval`` (chat): instruction following, generation-only, so it works on any chat server.
  Meta reports the mean of the four strict/loose prompt/instruction accuracies; Qwen reports the
  strict prompt-level accuracy; the Open LLM Leaderboard the mean of the two strict ones.
* ``gsm8k_cot_llama`` (chat, 8-shot CoT as multi-turn): lm-eval's replica of Meta's GSM-8K setup.
* ``mmlu`` (completions, 5-shot, loglikelihood): needs echo+logprobs, so it is the task that
  exercises the refusal on engines that lack them.
* ``gpqa_diamond_cot_zeroshot`` (chat): the hard reasoning check; gated dataset on the hub.
"""

from __future__ import annotations

from evals.eval_spec import (
    LOCAL_CHAT_COMPLETIONS,
    LOCAL_COMPLETIONS,
    LOGLIKELIHOOD,
    EvalConfig,
    EvalTask,
    ScoreSpec,
)

IFEVAL_ALL = (
    "prompt_level_strict_acc,none",
    "inst_level_strict_acc,none",
    "prompt_level_loose_acc,none",
    "inst_level_loose_acc,none",
)
IFEVAL_STRICT = ("prompt_level_strict_acc,none", "inst_level_strict_acc,none")

LLAMA31_CARD = "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct (model card, instruction tuned table)"
LLAMA33_CARD = "https://huggingface.co/meta-llama/Llama-3.3-70B-Instruct (model card)"
LLAMA32_CARD = "https://huggingface.co/meta-llama/Llama-3.2-1B-Instruct (model card, instruction tuned table)"
QWEN25_BLOG = "https://qwenlm.github.io/blog/qwen2.5-llm/ (instruction-tuned model tables)"
QWEN3_REPORT = "Qwen3 Technical Report, arXiv:2505.09388 (thinking mode)"
OLLB = "https://huggingface.co/spaces/open-llm-leaderboard/open_llm_leaderboard (IFEval)"

GEN_DEFAULT = {"stream": "false", "max_gen_toks": "1024"}
# Qwen3 thinking mode, as recommended by the model card (sampling, long reasoning traces).
GEN_QWEN3_THINKING = {
    "stream": "false",
    "max_gen_toks": "32768",
    "do_sample": "true",
    "temperature": "0.6",
    "top_p": "0.95",
    "top_k": "20",
}


def ifeval(published: float | None, source: str | None, keys=IFEVAL_ALL) -> EvalTask:
    return EvalTask(
        task_name="ifeval",
        model_class=LOCAL_CHAT_COMPLETIONS,
        apply_chat_template=True,
        num_fewshot=0,
        gen_kwargs={"stream": "false", "max_gen_toks": "1280"},
        num_concurrent=16,
        dataset="google/IFEval",
        score=ScoreSpec(
            metric_keys=tuple(keys),
            score_func="mean" if len(keys) > 1 else "single",
            published_score=published,
            published_source=source,
        ),
    )


def gsm8k_cot_llama(published: float | None, source: str | None) -> EvalTask:
    return EvalTask(
        task_name="gsm8k_cot_llama",
        model_class=LOCAL_CHAT_COMPLETIONS,
        apply_chat_template=True,
        fewshot_as_multiturn=True,
        num_fewshot=8,
        gen_kwargs=GEN_DEFAULT,
        num_concurrent=16,
        dataset="openai/gsm8k",
        score=ScoreSpec(
            metric_keys=("exact_match,flexible-extract",),
            published_score=published,
            published_source=source,
        ),
    )


def gsm8k(published: float | None, source: str | None) -> EvalTask:
    return EvalTask(
        task_name="gsm8k",
        model_class=LOCAL_CHAT_COMPLETIONS,
        apply_chat_template=True,
        fewshot_as_multiturn=True,
        num_fewshot=5,
        gen_kwargs=GEN_DEFAULT,
        num_concurrent=16,
        dataset="openai/gsm8k",
        score=ScoreSpec(
            metric_keys=("exact_match,flexible-extract",),
            published_score=published,
            published_source=source,
        ),
    )


def mmlu(published: float | None, source: str | None) -> EvalTask:
    return EvalTask(
        task_name="mmlu",
        model_class=LOCAL_COMPLETIONS,
        output_type=LOGLIKELIHOOD,
        num_fewshot=5,
        num_concurrent=16,
        # lm-eval's limit applies per subtask: 57 subtasks x limit documents.
        limits={"smoke": 5, "ci": 50, "full": None},
        dataset="cais/mmlu",
        score=ScoreSpec(
            metric_keys=("acc,none",),
            published_score=published,
            # Meta/Qwen report a macro average; lm-eval's group score is sample-weighted.
            published_source=source,
        ),
    )


def gpqa_diamond(published: float | None, source: str | None, gen=GEN_DEFAULT) -> EvalTask:
    return EvalTask(
        task_name="gpqa_diamond_cot_zeroshot",
        model_class=LOCAL_CHAT_COMPLETIONS,
        apply_chat_template=True,
        num_fewshot=0,
        gen_kwargs=gen,
        num_concurrent=16,
        timeout_s=3600,
        dataset="Idavidrein/gpqa (gated)",
        score=ScoreSpec(
            metric_keys=("exact_match,flexible-extract",),
            published_score=published,
            published_source=source,
        ),
    )


def _cfg(name: str, repo: str, *tasks: EvalTask) -> EvalConfig:
    return EvalConfig(model_name=name, hf_model_repo=repo, tasks=tuple(tasks))


MODEL_EVAL_CONFIGS = (
    _cfg(
        "Llama-3.1-8B-Instruct",
        "meta-llama/Llama-3.1-8B-Instruct",
        ifeval(0.804, LLAMA31_CARD + ": IFEval 80.4"),
        gsm8k_cot_llama(0.845, LLAMA31_CARD + ": GSM-8K (CoT) 8-shot em_maj1@1 84.5"),
        mmlu(0.694, LLAMA31_CARD + ": MMLU 5-shot macro_avg/acc 69.4"),
    ),
    _cfg(
        "Llama-3.1-70B-Instruct",
        "meta-llama/Llama-3.1-70B-Instruct",
        ifeval(0.875, LLAMA31_CARD.replace("8B", "70B") + ": IFEval 87.5"),
        gsm8k_cot_llama(0.951, LLAMA31_CARD.replace("8B", "70B") + ": GSM-8K (CoT) 95.1"),
        mmlu(0.836, LLAMA31_CARD.replace("8B", "70B") + ": MMLU 5-shot 83.6"),
    ),
    _cfg(
        "Llama-3.3-70B-Instruct",
        "meta-llama/Llama-3.3-70B-Instruct",
        ifeval(0.921, LLAMA33_CARD + ": IFEval 92.1"),
        gpqa_diamond(0.505, LLAMA33_CARD + ": GPQA Diamond (CoT) 0-shot 50.5"),
    ),
    _cfg(
        "Llama-3.2-1B-Instruct",
        "meta-llama/Llama-3.2-1B-Instruct",
        ifeval(0.595, LLAMA32_CARD + ": IFEval 59.5"),
        gsm8k_cot_llama(0.444, LLAMA32_CARD + ": GSM8K (CoT) 8-shot 44.4"),
        mmlu(0.493, LLAMA32_CARD + ": MMLU 5-shot 49.3"),
    ),
    _cfg(
        "Llama-3.2-3B-Instruct",
        "meta-llama/Llama-3.2-3B-Instruct",
        ifeval(0.774, LLAMA32_CARD.replace("1B", "3B") + ": IFEval 77.4"),
        gsm8k_cot_llama(0.777, LLAMA32_CARD.replace("1B", "3B") + ": GSM8K (CoT) 8-shot 77.7"),
        mmlu(0.634, LLAMA32_CARD.replace("1B", "3B") + ": MMLU 5-shot 63.4"),
    ),
    _cfg(
        # Text-only checks through the chat endpoint; the card's image benchmarks (MMMU) need a
        # multimodal lm-eval class that this workflow does not drive yet.
        "Llama-3.2-11B-Vision-Instruct",
        "meta-llama/Llama-3.2-11B-Vision-Instruct",
        ifeval(None, None),
        gsm8k_cot_llama(None, None),
    ),
    _cfg(
        "Qwen2.5-7B-Instruct",
        "Qwen/Qwen2.5-7B-Instruct",
        ifeval(0.712, QWEN25_BLOG + ": IFEval strict-prompt 71.2", keys=("prompt_level_strict_acc,none",)),
        gsm8k(0.916, QWEN25_BLOG + ": GSM8K 91.6"),
    ),
    _cfg(
        "Qwen2.5-72B-Instruct",
        "Qwen/Qwen2.5-72B-Instruct",
        ifeval(0.841, QWEN25_BLOG + ": IFEval strict-prompt 84.1", keys=("prompt_level_strict_acc,none",)),
        gsm8k(0.958, QWEN25_BLOG + ": GSM8K 95.8"),
    ),
    _cfg(
        "Qwen3-8B",
        "Qwen/Qwen3-8B",
        ifeval(None, None, keys=("prompt_level_strict_acc,none",)),
        gpqa_diamond(0.620, QWEN3_REPORT + ": GPQA-Diamond 62.0", gen=GEN_QWEN3_THINKING),
    ),
    _cfg(
        "Qwen3-32B",
        "Qwen/Qwen3-32B",
        ifeval(None, None, keys=("prompt_level_strict_acc,none",)),
        gpqa_diamond(0.684, QWEN3_REPORT + ": GPQA-Diamond 68.4", gen=GEN_QWEN3_THINKING),
    ),
    _cfg(
        "Mistral-7B-Instruct-v0.3",
        "mistralai/Mistral-7B-Instruct-v0.3",
        ifeval(0.5465, OLLB + ": mean of strict prompt/instruction accuracy 54.65", keys=IFEVAL_STRICT),
        gsm8k(None, None),
    ),
)
