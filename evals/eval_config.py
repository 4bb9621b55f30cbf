"""Eval configuration entry point: the config registry and the workflow-args contract.

Stdlib only: the orchestrator's CLI imports this module (in its own venv) to validate
``--workflow-args`` (``WORKFLOW_ARG_KEYS``) and to know which models have evals (``EVAL_CONFIGS``).
The types are in ``evals.eval_spec``; per-model task lists are in ``evals.offline_config`` (the
offline CPU task set) and ``evals.model_configs`` (standard lm-eval tasks for the catalog's LLMs).
"""

from __future__ import annotations

from evals.eval_spec import (  # noqa: F401  (re-exported API)
    DEFAULT_MODE,
    DEFAULT_TOLERANCE,
    ENGINE_CAPABILITIES,
    GENERATE,
    LOCAL_CHAT_COMPLETIONS,
    LOCAL_COMPLETIONS,
    LOGLIKELIHOOD,
    MODES,
    STANDARD_LIMITS,
    WORKFLOW_ARG_KEYS,
    EvalConfig,
    EvalTask,
    ScoreSpec,
    engine_supports_loglikelihood,
    parse_workflow_args,
)
from evals.model_configs import MODEL_EVAL_CONFIGS
from evals.offline_config import OFFLINE_EVAL_CONFIGS


def _build_registry() -> dict[str, EvalConfig]:
    configs: dict[str, EvalConfig] = {}
    for cfg in (*OFFLINE_EVAL_CONFIGS, *MODEL_EVAL_CONFIGS):
        if cfg.model_name in configs:
            raise ValueError(f"two eval configs for {cfg.model_name}")
        configs[cfg.model_name] = cfg
    return configs


#: model_name -> EvalConfig, for every model that has evals.
EVAL_CONFIGS: dict[str, EvalConfig] = _build_registry()

