"""Typed eval records and the accuracy check that fills their verdict fields.

Stdlib only: the reports workflow reads these records in its own venv, and the media evals write
them too. Parsing lm-eval's results files lives with the eval client (``evals/lm_eval_results.py``).
``EvalRecord`` is a ``contracts.typed_record.TypedRecord`` (schema ``tt-eval-record/1``,
docs/architecture.md); the report is rebuilt from these files alone, so everything a reader needs to
judge a task (score, basis, tolerance, command, files) is in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Mapping, Protocol

from contracts.intervals import FAIL, INCONCLUSIVE, PASS, Interval, decide, from_stderr, wilson
from contracts.typed_record import RecordError, TypedRecord, described

__all__ = ["SCHEMA", "EvalRecord", "RecordError", "ScoreTarget", "accuracy_check", "score_interval",
           "InProcessReference", "ServingCheck", "serving_check", "MIN_SERVING_SAMPLES"]

SCHEMA = "tt-eval-record/1"
STATUS_PASSED, STATUS_FAILED, STATUS_ERROR = "passed", "failed", "error"
#: Scored, but the interval holds the target: the samples cannot tell pass from fail.
STATUS_INCONCLUSIVE = "inconclusive"
#: Status of a scored task by its decision.
STATUS_BY_DECISION = {PASS: STATUS_PASSED, FAIL: STATUS_FAILED, INCONCLUSIVE: STATUS_INCONCLUSIVE}


@dataclass
class EvalRecord(TypedRecord):
    """One task's outcome, written as ``RUN_DIR/evals/<task>/eval_record.json``.

    Every writer (run_evals.py) and reader (resume, the report) goes through this class; the
    field descriptions are the legend a report prints.
    """

    SCHEMA: ClassVar[str] = SCHEMA

    model_id: str = described("model spec id the task ran against")
    task: str = described("lm-eval task name")
    metric: str = described("lm-eval metric key the score is read from (mean(a; b) when several are averaged)")
    mode: str = described("workflow mode that sized the sample set: smoke, ci or full")
    lm_eval_command: str = described("the equivalent lm-eval command line, secrets replaced by ***")
    value: float | None = described("the task's score, as a fraction (lm-eval's scale); null when not scored",
                                    None)
    stderr: float | None = described("lm-eval's standard error of the score; null when it gave none", None)
    samples: int | None = described("number of items scored", None)
    published_score: float | None = described("score published for the model, as a fraction", None)
    published_source: str | None = described("where the published score comes from", None)
    reference_score: float | None = described("our measured reference score for this sample set, as a fraction",
                                              None)
    reference_source: str | None = described("how and where the reference score was measured", None)
    tolerance: float = described("relative tolerance: the target is the basis (reference, else published) "
                                 "* (1 - tolerance)", 0.05)
    target: float | None = described("the lowest acceptable score, as a fraction: basis * (1 - tolerance)", None)
    ci95: list[float] | None = described("95% interval of the score [low, high]; how it was made is in ci_method",
                                         None)
    ci_method: str | None = described("how ci95 was made: from lm-eval's standard error (normal), a Wilson "
                                      "interval of a rate, or a bootstrap over items", None)
    decision: str | None = described("pass when the whole interval is at or above the target, fail when it is "
                                     "wholly below, inconclusive when the samples cannot tell; null when not "
                                     "judged", None)
    reference_conditions: dict[str, str] = described(
        "what the reference score depends on (data set hash and generator version, CPU ISA, compute type)",
        factory=dict)
    condition_differences: list[str] = described(
        "conditions of this run that differ from those the reference score was measured in: a score may then "
        "move for reasons other than a serving bug", factory=list)
    in_process_score: float | None = described(
        "the same task, sample set, few-shot and chat-template settings scored in process by lm-eval's hf backend "
        "on the weights the server serves, no server in between (evals/reference_scores.json); null when none "
        "was measured", None)
    in_process_ci95: list[float] | None = described(
        "95% interval of the in-process score [low, high]: its value +- 1.96 x lm-eval's standard error (a Wilson "
        "interval when that is 0); a served score outside it is a serving bug", None)
    in_process_samples: int | None = described("number of items behind the in-process score", None)
    in_process_source: str | None = described(
        "how the in-process score was measured: engine and versions, weights hash, CPU, date, item subset", None)
    serving_decision: str | None = described(
        "served vs in-process: pass when the served score lies inside the in-process 95% interval, fail (a "
        "serving bug) when outside, inconclusive when the two cannot be compared (different item sets, a task "
        "changed since the in-process measurement, too few items); null when there is no in-process score", None)
    serving_detail: str | None = described("what the served vs in-process comparison found, and what to look at "
                                           "when it failed", None)
    disagreements: int | None = described(
        "paired serving check: items (of samples) whose served score differs from the in-process engine's score "
        "of the same item; null without per-item in-process scores", None)
    disagreement_ci95: list[float] | None = described(
        "anytime-valid 95% interval of the task's share of such items (a without-replacement confidence sequence "
        "over the items scored so far); the serving check fails when it lies wholly above max_disagreement", None)
    max_disagreement: float | None = described("share of items whose served score may differ from the in-process "
                                               "one (near-ties another CPU's kernels flip)", None)
    items_total: int | None = described("items in the task's whole set when known (the population the score's "
                                        "interval is about; at samples == items_total the score is exact)", None)
    looks: int | None = described("lm-eval passes whose items were judged: the task stopped after the look where "
                                  "its checks were decided (evals.sequential_eval); 1 for a single fixed pass", None)
    stopped: str | None = described("why scoring stopped: decided (every check decided), all_items (every item "
                                    "scored), budget (the mode's item limit); null for a single fixed pass", None)
    ratio_to_reference: float | None = described("value / reference_score", None)
    ratio_to_published: float | None = described("value / published_score", None)
    passed: bool | None = described("decision is pass (true) or fail (false); null when inconclusive or when "
                                    "there is nothing to compare with", None)
    status: str = described("passed, failed or inconclusive (by decision; failed also when the serving check "
                            "fails), or error (not scored)", STATUS_ERROR)
    error: str | None = described("one line saying why the task was not scored", None)
    results_file: str | None = described("lm-eval's results JSON, relative to the run directory", None)

    @property
    def is_finished(self) -> bool:
        """Finished = lm-eval produced a score (passed or failed its check); errors are retried."""
        return self.status in (STATUS_PASSED, STATUS_FAILED, STATUS_INCONCLUSIVE) and self.value is not None

    def apply(self, check: "AccuracyCheck") -> None:
        """Copy an accuracy check's outcome into the record (status included)."""
        self.reference_score, self.tolerance, self.target = check.reference_score, check.tolerance, check.target
        self.ratio_to_reference, self.ratio_to_published = check.ratio_to_reference, check.ratio_to_published
        self.ci95 = check.interval.as_list() if check.interval else None
        self.ci_method = check.interval.method if check.interval else None
        self.decision = check.decision
        self.passed = {PASS: True, FAIL: False}.get(check.decision or "")
        self.status = STATUS_BY_DECISION.get(check.decision or "", STATUS_PASSED)

    def apply_serving(self, check: "ServingCheck | None") -> None:
        """Copy the served vs in-process comparison into the record; a serving bug fails the task."""
        if check is None:
            return
        ref = check.in_process
        self.in_process_score, self.in_process_samples, self.in_process_source = ref.value, ref.samples, ref.source
        self.in_process_ci95 = check.interval.as_list() if check.interval else None
        self.serving_decision, self.serving_detail = check.decision, check.detail
        if check.decision == FAIL:
            self.status = STATUS_FAILED


# ----------------------------------------------------------------------------- accuracy check


class ScoreTarget(Protocol):
    """What the accuracy check reads from a task's score spec (``evals.eval_spec.ScoreSpec``)."""

    published_score: float | None
    reference_score: float | None
    mode_reference_scores: Mapping[str, float]
    tolerance: float


@dataclass(frozen=True)
class AccuracyCheck:
    basis: float | None  # the score the target derives from (reference, else published)
    reference_score: float | None
    tolerance: float  # relative: target == basis * (1 - tolerance)
    target: float | None
    interval: Interval | None
    decision: str | None  # pass / fail / inconclusive; None when there is nothing to compare with
    ratio_to_reference: float | None
    ratio_to_published: float | None

    @property
    def passed(self) -> bool | None:
        return {PASS: True, FAIL: False}.get(self.decision or "")


def score_interval(value: float, stderr: float | None, samples: int | None) -> Interval | None:
    """lm-eval's standard error when it gave one; else a Wilson interval when the score is a rate
    over ``samples`` items; None when neither is known (the check is then inconclusive)."""
    if stderr is not None and stderr > 0:
        return from_stderr(value, stderr)
    if samples:
        return wilson(value * samples, samples)
    return None


def accuracy_check(
    value: float | None,
    spec: ScoreTarget | None,
    mode: str | None,
    samples: int | None,
    stderr: float | None = None,
) -> AccuracyCheck:
    """Decide a score against the target derived from the mode's reference (else the full
    reference, else the published score), on the score's 95% interval.

    ``mode`` names the mode whose exact sample subset was run (None when a ``limit`` override made
    the subset differ from every mode's); a reference measured on that very subset is the basis,
    otherwise the full-set reference. Sampling noise lives in the interval, not in the tolerance:
    a small subset gets a wide interval and so an inconclusive decision, never a fail by chance.
    """
    if spec is None:
        return AccuracyCheck(None, None, 0.05, None, None, None, None, None)
    exact = mode is not None and mode in spec.mode_reference_scores
    ref = spec.mode_reference_scores[mode] if exact and mode is not None else spec.reference_score
    basis = ref if ref is not None else spec.published_score
    tol = spec.tolerance

    def ratio(b: float | None) -> float | None:
        return None if value is None or not b else value / b

    target = interval = decision = None
    if value is not None and basis is not None:
        target = round(basis * (1 - tol), 6)
        interval = score_interval(value, stderr, samples)
        decision = decide(interval, target, higher_is_better=True)
    return AccuracyCheck(basis, ref, round(tol, 6), target, interval, decision, ratio(ref),
                         ratio(spec.published_score))


# ----------------------------------------------------------------------------- served vs in process

#: Fewer items than this cannot show a serving bug: the in-process interval would hold almost any score.
MIN_SERVING_SAMPLES = 8

#: Where to look when a served score leaves the in-process interval, by what the task asks of the server.
SERVING_SUSPECTS = {
    "loglikelihood": "prompt logprobs (/v1/completions echo+logprobs) and tokenisation (/tokenize against the "
                     "checkpoint's tokenizer: BOS, whitespace at the context/continuation boundary)",
    "chat": "the chat template the server renders (system prompt, generation prompt, special tokens) and "
            "tokenisation",
    "generate": "tokenisation of the prompt, stop sequences and greedy sampling parameters (temperature, "
                "max tokens)",
}


class InProcessReference(Protocol):
    """What the serving check reads from an in-process score (``evals.eval_spec.InProcessScore``)."""

    value: float
    stderr: float | None
    samples: int
    task_config_sha256: str
    source: str


@dataclass(frozen=True)
class ServingCheck:
    in_process: InProcessReference
    interval: Interval | None  # the in-process score's 95% interval
    decision: str  # pass / fail / inconclusive
    detail: str


def serving_check(
    served: float | None,
    served_samples: int | None,
    in_process: InProcessReference | None,
    *,
    task_config_sha256: str | None,
    suspects: str,
) -> ServingCheck | None:
    """Judge a served score against the in-process score of the same items (None: nothing to compare).

    Both scores come from the same items with the same prompts, so sampling noise cannot separate
    them; a served score outside the in-process 95% interval (lm-eval's stderr) is more than any
    kernel difference moves a score, and fails as a serving bug. Undecidable, so inconclusive: item
    sets that differ (another limit), a task whose files changed since the in-process measurement
    (``task_config_sha256``), or fewer than ``MIN_SERVING_SAMPLES`` items. ``suspects`` names what
    to look at when it fails (``SERVING_SUSPECTS``).
    """
    if in_process is None or served is None:
        return None
    interval = score_interval(in_process.value, in_process.stderr, in_process.samples)
    shown = "no interval" if interval is None else f"[{interval.low:.4f}, {interval.high:.4f}]"
    about = f"in-process {in_process.value:.4f} (95% CI {shown}, n={in_process.samples})"
    if served_samples != in_process.samples:
        return ServingCheck(in_process, interval, INCONCLUSIVE,
                            f"served n={served_samples} vs {about}: different item sets cannot be compared; "
                            f"run a mode whose items the in-process reference measured")
    if task_config_sha256 is not None and task_config_sha256 != in_process.task_config_sha256:
        return ServingCheck(in_process, interval, INCONCLUSIVE,
                            f"the task's files changed since the in-process score was measured ({about}); "
                            f"re-measure it (scripts/measure_inprocess_reference.py)")
    if interval is None or in_process.samples < MIN_SERVING_SAMPLES:
        return ServingCheck(in_process, interval, INCONCLUSIVE,
                            f"{about}: fewer than {MIN_SERVING_SAMPLES} items cannot show a serving bug")
    eps = 1e-9
    if interval.low - eps <= served <= interval.high + eps:
        return ServingCheck(in_process, interval, PASS, f"served {served:.4f} inside {about}")
    return ServingCheck(in_process, interval, FAIL,
                        f"serving bug: served {served:.4f} outside {about} on the same items and weights; "
                        f"look at {suspects}")
