"""Typed eval records and the accuracy check that fills their verdict fields.

Stdlib only: the reports workflow reads these records in its own venv, and the media evals
write them too. Parsing lm-eval's results files lives with the eval client (``evals/lm_eval_results.py``). ``EvalRecord`` is a
``contracts.typed_record.TypedRecord`` (schema ``tt-eval-record/1``, docs/architecture.md); the
report is rebuilt from these files alone, so everything a reader needs to judge a task (score,
basis, tolerance, command, files) is in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Mapping, Protocol

from contracts.intervals import FAIL, INCONCLUSIVE, PASS, Interval, decide, from_stderr, wilson
from contracts.typed_record import RecordError, TypedRecord, described

__all__ = ["SCHEMA", "EvalRecord", "RecordError", "ScoreTarget", "accuracy_check", "score_interval"]

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
    ratio_to_reference: float | None = described("value / reference_score", None)
    ratio_to_published: float | None = described("value / published_score", None)
    passed: bool | None = described("decision is pass (true) or fail (false); null when inconclusive or when "
                                    "there is nothing to compare with", None)
    status: str = described("passed, failed or inconclusive (by decision), or error (not scored)", STATUS_ERROR)
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
    ref = spec.mode_reference_scores[mode] if exact else spec.reference_score
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
