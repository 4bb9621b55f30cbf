"""Config registry, workflow args, engine capabilities, and the stdlib-only import contract."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evals.eval_config import (
    EVAL_CONFIGS,
    WORKFLOW_ARG_KEYS,
    EvalTask,
    ScoreSpec,
    engine_supports_loglikelihood,
    parse_workflow_args,
)
from evals.eval_spec import LOCAL_CHAT_COMPLETIONS, LOGLIKELIHOOD

ROOT = Path(__file__).resolve().parents[2]

CATALOG_LLMS = [
    "Llama-3.1-8B-Instruct",
    "Llama-3.1-70B-Instruct",
    "Llama-3.3-70B-Instruct",
    "Llama-3.2-1B-Instruct",
    "Llama-3.2-3B-Instruct",
    "Qwen2.5-7B-Instruct",
    "Qwen2.5-72B-Instruct",
    "Qwen3-8B",
    "Qwen3-32B",
    "Mistral-7B-Instruct-v0.3",
    "Llama-3.2-11B-Vision-Instruct",
]


def test_stdlib_only_imports():
    """The orchestrator imports these in its own venv: no third-party module may be pulled in."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import evals.eval_config, records.evals, evals.lm_eval_command, evals.run_evals, evals.lm_eval_session;"
        "std = sys.stdlib_module_names;"
        "bad = sorted({m.split('.')[0] for m in sys.modules} - set(std)"
        " - {'evals', 'contracts', 'records', '__main__'});"
        "print(','.join(bad)); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-S", "-c", code, str(ROOT)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_registry_covers_catalog_and_offline_model():
    for name in CATALOG_LLMS + ["SmolLM2-135M-Instruct"]:
        assert name in EVAL_CONFIGS, name
        assert EVAL_CONFIGS[name].model_name == name


def test_real_model_tasks_name_their_dataset_and_scores_are_fractions():
    for name in CATALOG_LLMS:
        for task in EVAL_CONFIGS[name].tasks:
            assert task.dataset, (name, task.task_name)
            assert not task.offline
            s = task.score
            assert s is not None
            if s.published_score is not None:
                assert 0 < s.published_score < 1 and s.published_source


def test_offline_tasks_have_measured_references():
    cfg = EVAL_CONFIGS["SmolLM2-135M-Instruct"]
    assert [t.task_name for t in cfg.tasks] == ["tt_offline_mc", "tt_offline_qa", "tt_offline_chat"]
    for t in cfg.tasks:
        assert t.offline and t.score is not None
        assert set(t.score.mode_reference_scores) == {"smoke", "ci", "full"}
        # clearly above chance / zero: a reference this low could not catch a broken server
        assert min(t.score.mode_reference_scores.values()) >= 0.4
        assert "measured" in t.score.reference_source


def test_workflow_args():
    assert WORKFLOW_ARG_KEYS == {"mode", "tasks", "limit"}
    assert parse_workflow_args({}) == ("ci", None, None)
    assert parse_workflow_args({"mode": "smoke", "tasks": "a, b", "limit": "7"}) == ("smoke", {"a", "b"}, 7)
    # a key the workflow does not own passes through to lm-eval (evals.passthrough), so only values are checked here
    assert parse_workflow_args({"mode": "smoke", "max_tokens": "512"}) == ("smoke", None, None)
    for bad in ({"mode": "fast"}, {"limit": "0"}, {"limit": "x"}):
        with pytest.raises(ValueError):
            parse_workflow_args(bad)


def test_task_validation():
    with pytest.raises(ValueError, match="loglikelihood"):
        EvalTask("x", model_class=LOCAL_CHAT_COMPLETIONS, apply_chat_template=True, output_type=LOGLIKELIHOOD)
    with pytest.raises(ValueError, match="apply_chat_template"):
        EvalTask("x", model_class=LOCAL_CHAT_COMPLETIONS)
    with pytest.raises(ValueError):
        EvalTask("x", model_class="hf")
    with pytest.raises(ValueError, match="metric,filter"):
        ScoreSpec(metric_keys=("acc",))
    with pytest.raises(ValueError, match="fractions"):
        ScoreSpec(metric_keys=("acc,none",), published_score=80.4)


@pytest.mark.parametrize("engine, ok",
                         [("vllm", True), ("llamacpp", False), ("media", False), ("something-new", False)])
def test_engine_capabilities(engine, ok):
    supported, why = engine_supports_loglikelihood(engine)
    assert supported is ok and why

