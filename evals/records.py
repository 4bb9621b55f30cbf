"""Typed eval records, lm-eval result parsing, and the accuracy check.

Stdlib only: the reports workflow may read these records in its own venv. ``EvalRecord`` is a
``contracts.typed_record.TypedRecord`` (schema ``tt-eval-record/1``, docs/architecture.md); the
report is rebuilt from these files alone, so everything a reader needs to judge a task (score,
basis, tolerance, command, files) is in it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from contracts.typed_record import RecordError, TypedRecord, described
from evals.eval_spec import ScoreSpec

__all__ = ["SCHEMA", "EvalRecord", "RecordError", "ResultsError", "accuracy_check", "find_results_file",
           "score_results"]

SCHEMA = "tt-eval-record/1"
STATUS_PASSED, STATUS_FAILED, STATUS_ERROR = "passed", "failed", "error"
#: z-score for the sample-size margin when a reference was measured on a different sample set.
SAMPLE_MARGIN_Z = 2.0


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
    tolerance: float = described("relative tolerance: passed when value >= basis * (1 - tolerance)", 0.05)
    ratio_to_reference: float | None = described("value / reference_score", None)
    ratio_to_published: float | None = described("value / published_score", None)
    passed: bool | None = described("accuracy check result; null when there is nothing to compare with", None)
    status: str = described("passed, failed (scored below the tolerance) or error (not scored)", STATUS_ERROR)
    error: str | None = described("one line saying why the task was not scored", None)
    results_file: str | None = described("lm-eval's results JSON, relative to the run directory", None)

    @property
    def is_finished(self) -> bool:
        """Finished = lm-eval produced a score (passed or failed its check); errors are retried."""
        return self.status in (STATUS_PASSED, STATUS_FAILED) and self.value is not None


# ----------------------------------------------------------------------------- lm-eval results


class ResultsError(ValueError):
    """The lm-eval results file lacks what the score spec asks for."""


def find_results_file(output_dir: Path) -> Path | None:
    """Newest ``results_<datetime>.json`` lm-eval wrote under ``output_dir`` (it adds a model subdir)."""
    found = sorted(output_dir.rglob("results_*.json"), key=lambda p: (p.stat().st_mtime, p.name))
    return found[-1] if found else None


def _number(v: Any) -> float | None:
    """lm-eval writes "N/A" for stderrs it could not compute; treat anything non-numeric as None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return None if math.isnan(v) else float(v)


def _stderr_key(metric_key: str) -> str:
    metric, _, flt = metric_key.partition(",")
    return f"{metric}_stderr,{flt}"


def count_samples(results: Mapping[str, Any], task: str) -> int | None:
    """Effective sample count for a task, summing subtasks for a group such as ``mmlu``."""
    n_samples = results.get("n-samples") or {}
    if task in n_samples:
        return int(n_samples[task].get("effective", n_samples[task].get("original", 0)))
    subtasks = (results.get("group_subtasks") or {}).get(task)
    if subtasks:
        counts = [count_samples(results, sub) for sub in subtasks]
        if any(c is not None for c in counts):
            return sum(c or 0 for c in counts)
    return None


def score_results(results: Mapping[str, Any], task: str, spec: ScoreSpec) -> tuple[float, float | None, int | None]:
    """(value, stderr, samples) for ``task`` from a parsed lm-eval results JSON.

    ``single`` uses the first metric key (and its stderr); ``mean`` averages every key and reports
    no stderr, since the keys are computed on the same samples and are not independent.
    """
    per_task = (results.get("results") or {}).get(task)
    if per_task is None:
        have = sorted((results.get("results") or {}).keys())
        raise ResultsError(f"task {task!r} not in lm-eval results (have {have})")
    values = []
    for key in spec.metric_keys:
        v = _number(per_task.get(key))
        if v is None:
            have = sorted(k for k in per_task if "," in k and "_stderr" not in k)
            raise ResultsError(f"metric {key!r} missing for {task!r} (have {have})")
        values.append(v)
    if spec.score_func == "single":
        value, stderr = values[0], _number(per_task.get(_stderr_key(spec.metric_keys[0])))
    else:
        value, stderr = sum(values) / len(values), None
    return value, stderr, count_samples(results, task)


# ----------------------------------------------------------------------------- accuracy check


@dataclass(frozen=True)
class AccuracyCheck:
    basis: float | None  # the score compared against (reference, else published)
    reference_score: float | None
    tolerance: float  # effective relative tolerance: passed == value >= basis * (1 - tolerance)
    ratio_to_reference: float | None
    ratio_to_published: float | None
    passed: bool | None


def sample_margin_tolerance(basis: float, tolerance: float, samples: int | None) -> float:
    """Widen a relative tolerance for a score measured on ``samples`` items of a larger set.

    A reference measured on the full dataset says little about a 20-item subset: the subset's
    accuracy has a binomial spread of sqrt(p(1-p)/n). Subtracting ``SAMPLE_MARGIN_Z`` of those
    from the threshold keeps a correct server passing smoke runs while a broken one (score near
    zero or chance) still fails. Returned as an equivalent relative tolerance, capped below 1.
    """
    if not samples or basis <= 0:
        return tolerance
    margin = SAMPLE_MARGIN_Z * math.sqrt(basis * (1 - basis) / samples)
    threshold = basis * (1 - tolerance) - margin
    return min(0.95, max(tolerance, 1 - threshold / basis))


def accuracy_check(
    value: float | None,
    spec: ScoreSpec | None,
    mode: str | None,
    samples: int | None,
    ran_subset: bool,
) -> AccuracyCheck:
    """Compare a score with the mode's reference (else the full reference, else published).

    ``mode`` names the mode whose exact sample subset was run (None when a ``limit`` override made
    the subset differ from every mode's); a reference measured on that very subset is compared with
    the plain tolerance. Otherwise, when ``ran_subset`` (fewer items than the whole dataset), the
    tolerance gets the sample-size margin of ``sample_margin_tolerance``.
    ``passed`` is None when there is nothing to compare with (no score or no reference).
    """
    if spec is None:
        return AccuracyCheck(None, None, 0.05, None, None, None)
    exact = mode is not None and mode in spec.mode_reference_scores
    ref = spec.mode_reference_scores[mode] if exact else spec.reference_score
    subset_of_reference = ran_subset and not exact
    basis = ref if ref is not None else spec.published_score
    tol = spec.tolerance
    if basis is not None and subset_of_reference:
        tol = sample_margin_tolerance(basis, tol, samples)

    def ratio(b: float | None) -> float | None:
        return None if value is None or not b else value / b

    passed = None
    if value is not None and basis is not None:
        # A tiny epsilon keeps a score exactly on the threshold from failing on float rounding.
        passed = value >= basis * (1 - tol) - 1e-9
    return AccuracyCheck(basis, ref, round(tol, 6), ratio(ref), ratio(spec.published_score), passed)
