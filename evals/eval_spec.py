"""Eval config types: which lm-eval tasks run against a model, and what score must come back.

Stdlib only. The registry of configs is ``evals.eval_config.EVAL_CONFIGS``; the types live here so
that the per-model config modules can import them without an import cycle.

Conventions that keep the rest of the evals code simple:

* Every score is a fraction in [0, 1], the way lm-eval reports it. Published scores that model
  cards give in percent are stored divided by 100.
* ``tolerance`` is relative: a task passes when ``score >= basis * (1 - tolerance)``, where the
  basis is the reference score (our own measurement on known-good hardware/software), else the
  published score. See ``records.evals.accuracy_check``.
* Sample limits are per mode (``smoke`` / ``ci`` / ``full``), so one config serves a 1-minute CI
  smoke run and a full release run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from contracts.workflow_keys import EVAL_ARGS

MODES = ("smoke", "ci", "full")
DEFAULT_MODE = "ci"
DEFAULT_TOLERANCE = 0.05

#: Keys accepted in ``--workflow-args`` for the evals workflow (declared in contracts.workflow_keys).
WORKFLOW_ARG_KEYS = frozenset(EVAL_ARGS)

LOCAL_COMPLETIONS = "local-completions"
LOCAL_CHAT_COMPLETIONS = "local-chat-completions"
MODEL_CLASSES = (LOCAL_COMPLETIONS, LOCAL_CHAT_COMPLETIONS)

GENERATE = "generate_until"
LOGLIKELIHOOD = "loglikelihood"

#: What each serving engine can do for lm-eval. ``loglikelihood`` needs /v1/completions with
#: ``echo: true`` + legacy ``logprobs`` (prompt-token logprobs), which vLLM provides and llama.cpp's
#: servers do not (llama-server rejects echo; llama-cpp-python returns logprob 0 for every prompt
#: token, which would silently score garbage).
ENGINE_CAPABILITIES: dict[str, frozenset[str]] = {
    "vllm": frozenset({"completions", "chat", LOGLIKELIHOOD}),
    "llamacpp": frozenset({"completions", "chat"}),
    "media": frozenset(),
}

#: Default sample limits per mode for standard (downloaded) tasks; None = every sample.
STANDARD_LIMITS: Mapping[str, int | None] = {"smoke": 20, "ci": 200, "full": None}


@dataclass(frozen=True)
class InProcessScore:
    """The task's score from lm-eval's in-process ``hf`` backend on the weights the server serves.

    Measured by ``scripts/measure_inprocess_reference.py`` with the served eval's own task settings
    (same YAML, sample subset, few-shot and chat template), no server in between; kept in
    ``evals/reference_scores.json``. ``task_config_sha256`` hashes the task's YAML, data and helper
    code at measurement time: when it no longer matches the checkout, the score no longer describes
    the task and cannot judge a served score. ``source`` is one line of provenance (engine, versions,
    weights hash, CPU, date); the file holds the full record and the command. ``items`` holds each
    item's in-process score by doc_id (empty when not measured): the served answers are compared with
    them item by item, which decides a serving bug on the first items that differ.
    """

    value: float
    stderr: float | None
    samples: int
    task_config_sha256: str
    source: str
    items: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.value <= 1:
            raise ValueError(f"scores are fractions in [0, 1], got {self.value}")
        if self.samples < 1:
            raise ValueError(f"an in-process score needs at least one sample, got {self.samples}")
        if self.items and (len(self.items) != self.samples or any(not 0 <= v <= 1 for v in self.items)):
            raise ValueError(f"per-item scores must be {self.samples} fractions in [0, 1], got {len(self.items)}")


@dataclass(frozen=True)
class ScoreSpec:
    """How to turn lm-eval's ``results[task]`` into one score, and what that score must reach.

    ``metric_keys`` are lm-eval's ``"metric,filter"`` keys. ``score_func`` is ``"single"`` (the
    first key) or ``"mean"`` (mean of all keys, e.g. Meta's IFEval number is the mean of the four
    strict/loose prompt/instruction accuracies). ``mode_reference_scores`` holds references measured
    on exactly the sample subset a mode runs (e.g. the smoke subset), which are compared with the
    plain tolerance; a reference measured on a different sample set gets a sample-size margin.
    ``in_process_scores`` (per mode) are the same subsets scored in process by lm-eval's ``hf``
    backend: a served score outside their 95% interval is a serving bug (``records.evals.serving_check``).
    """

    metric_keys: tuple[str, ...]
    score_func: str = "single"
    published_score: float | None = None
    published_source: str | None = None
    reference_score: float | None = None
    reference_source: str | None = None
    mode_reference_scores: Mapping[str, float] = field(default_factory=dict)
    tolerance: float = DEFAULT_TOLERANCE
    in_process_scores: Mapping[str, InProcessScore] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if set(self.in_process_scores) - set(MODES):
            raise ValueError(f"unknown modes in in_process_scores {sorted(self.in_process_scores)}")
        if not self.metric_keys or any("," not in k for k in self.metric_keys):
            raise ValueError(f"metric keys must look like 'metric,filter': {self.metric_keys!r}")
        if self.score_func not in ("single", "mean"):
            raise ValueError(f"unknown score_func {self.score_func!r}")
        if not 0 <= self.tolerance < 1:
            raise ValueError(f"tolerance must be in [0, 1): {self.tolerance}")
        for v in (self.published_score, self.reference_score, *self.mode_reference_scores.values()):
            if v is not None and not 0 <= v <= 1:
                raise ValueError(f"scores are fractions in [0, 1], got {v}")


@dataclass(frozen=True)
class EvalTask:
    """One lm-eval task run against the served endpoint.

    ``model_class`` is lm-eval's API model: ``local-completions`` for loglikelihood/multiple-choice
    (and plain-prompt generation), ``local-chat-completions`` with ``apply_chat_template`` for
    chat generation. ``output_type`` says whether the task needs loglikelihood, so an engine that
    cannot serve it is refused before lm-eval starts. ``max_retries`` counts total attempts
    (lm-eval uses tenacity ``stop_after_attempt``). ``dataset`` names the dataset the task loads,
    for the one-line error when it cannot be reached offline. ``offline`` tasks live in
    ``evals/tasks/`` and need no network.
    """

    task_name: str
    model_class: str = LOCAL_COMPLETIONS
    output_type: str = GENERATE
    apply_chat_template: bool = False
    fewshot_as_multiturn: bool = False
    num_fewshot: int | None = None
    gen_kwargs: Mapping[str, str] = field(default_factory=dict)
    limits: Mapping[str, int | None] = field(default_factory=lambda: dict(STANDARD_LIMITS))
    seed: int = 42
    num_concurrent: int = 8
    max_retries: int = 3
    timeout_s: int = 300
    batch_size: int = 1
    max_length: int | None = None
    dataset: str | None = None
    offline: bool = False
    score: ScoreSpec | None = None

    def __post_init__(self) -> None:
        if self.model_class not in MODEL_CLASSES:
            raise ValueError(f"{self.task_name}: unknown model class {self.model_class!r}")
        if self.output_type not in (GENERATE, LOGLIKELIHOOD):
            raise ValueError(f"{self.task_name}: unknown output_type {self.output_type!r}")
        if self.model_class == LOCAL_CHAT_COMPLETIONS:
            if self.output_type == LOGLIKELIHOOD:
                raise ValueError(f"{self.task_name}: chat completions cannot score loglikelihood")
            if not self.apply_chat_template:
                raise ValueError(f"{self.task_name}: local-chat-completions needs apply_chat_template")
        if set(self.limits) - set(MODES):
            raise ValueError(f"{self.task_name}: unknown modes in limits {sorted(self.limits)}")
        if self.max_retries < 1 or self.num_concurrent < 1:
            raise ValueError(f"{self.task_name}: max_retries and num_concurrent must be >= 1")

    @property
    def needs_loglikelihood(self) -> bool:
        return self.output_type == LOGLIKELIHOOD

    def limit_for(self, mode: str) -> int | None:
        """Sample limit for a mode; modes not listed run every sample."""
        return self.limits.get(mode)


@dataclass(frozen=True)
class EvalConfig:
    """All eval tasks for one model (keyed by ``model_name`` in ``EVAL_CONFIGS``)."""

    model_name: str
    hf_model_repo: str
    tasks: tuple[EvalTask, ...]

    def __post_init__(self) -> None:
        names = [t.task_name for t in self.tasks]
        if len(names) != len(set(names)):
            raise ValueError(f"{self.model_name}: duplicate task names {names}")

    def task(self, name: str) -> EvalTask:
        for t in self.tasks:
            if t.task_name == name:
                return t
        raise KeyError(name)


def engine_supports_loglikelihood(engine: str) -> tuple[bool, str]:
    """(supported, reason) for the spec's engine (``ModelSpec.engine``), from the capability table."""
    caps = ENGINE_CAPABILITIES.get(engine)
    if caps is None:
        return False, f"engine {engine!r} is not in the evals capability table"
    if LOGLIKELIHOOD in caps:
        return True, f"engine {engine!r} serves /v1/completions with echo+logprobs"
    return False, f"engine {engine!r} cannot serve loglikelihood (no /v1/completions echo+logprobs)"


def parse_workflow_args(args: Mapping[str, str]) -> tuple[str, set[str] | None, int | None]:
    """Validate evals workflow args -> (mode, task filter or None, limit override or None).

    Raises ValueError with a message fit for the user on bad values. Keys the workflow does not own
    pass through to lm-eval (``evals.passthrough``), which checks them.
    """
    mode = str(args.get("mode") or DEFAULT_MODE)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    tasks = None
    if args.get("tasks"):
        tasks = {t.strip() for t in str(args["tasks"]).split(",") if t.strip()}
    limit = None
    if args.get("limit") not in (None, ""):
        try:
            limit = int(str(args["limit"]))
        except ValueError:
            raise ValueError(f"limit must be a positive integer, got {args['limit']!r}") from None
        if limit < 1:
            raise ValueError(f"limit must be a positive integer, got {limit}")
    return mode, tasks, limit
