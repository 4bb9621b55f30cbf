"""Stop an eval task the moment its checks are decided: items in chunks, anytime-valid intervals.

Why: a fixed sample spends every item whatever the margin. A healthy model scores far above its
accuracy floor, and a served endpoint that answers like the in-process engine shows it on the first
items; a task whose checks are decided after 48 of 120 items need not score the other 72. Looking
after every chunk is only honest with intervals that hold at every look at once, so both checks use
anytime-valid confidence sequences (``contracts.sequential.bounded_mean_cs``), drawn *without
replacement* from the task's fixed item set: at the last item they shrink to the exact score.

The items are in a fixed seeded shuffled order (the offline data is written shuffled; lm-eval's
``--limit L`` takes the first L), so every prefix mixes every category.

Two checks per look, both on the same items:

* **Accuracy** (the full set's score against its target). With the in-process engine's per-item
  scores (``evals/reference_scores.json``: ``items``) the served full-set score is the in-process
  full-set score (known exactly) plus the share of items the server gains minus the share it loses;
  each share's confidence sequence runs at alpha/2 (a union bound keeps the pair at 95%). Losing no
  item bounds the loss share after few items, which decides far sooner than the score's own spread.
  Without per-item reference scores: the served scores' own confidence sequence.
* **Serving** (paired per item): the share of items whose served score differs from the in-process
  one, against ``MAX_SERVING_DISAGREEMENT``. A tokenisation or chat-template bug moves many items at
  once, a kernel difference a near-tie or two.

Stdlib only: the evals venv imports it with the repository root on its path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contracts.intervals import FAIL, INCONCLUSIVE, PASS, Interval, decide
from contracts.sequential import bounded_mean_cs
from records.evals import STATUS_BY_DECISION, STATUS_FAILED, EvalRecord, InProcessReference, ScoreTarget

#: Items per look: a multiple of the offline tasks' num_concurrent (4), and about a fifth of a 120-item task.
CHUNK_ITEMS = 24
#: Share of items whose served score may differ from the in-process one (near-ties that another CPU's
#: kernels flip); a template or tokenisation bug moves far more.
MAX_SERVING_DISAGREEMENT = 0.10
ALPHA = 0.05
#: Tolerance when comparing two scores of one item (lm-eval writes them as floats).
SAME_SCORE = 1e-9

STOP_DECIDED, STOP_ALL_ITEMS, STOP_BUDGET = "decided", "all_items", "budget"
STOP_REASONS = {
    STOP_DECIDED: "every check of the task was decided on its anytime-valid interval",
    STOP_ALL_ITEMS: "every item of the task was scored: the score is exact",
    STOP_BUDGET: "the mode's item budget ended before every check was decided",
}
METHOD_PAIRED = ("anytime-valid 95% interval of the full-set score: the in-process full-set score plus the "
                 "served-minus-in-process gain and loss shares, each a without-replacement confidence sequence "
                 "at alpha/2 (Waudby-Smith & Ramdas)")


@dataclass(frozen=True)
class TaskLook:
    """The checks of one task after ``n`` items: the full-set score's interval and decision, and the
    paired serving check (None without per-item in-process scores)."""

    n: int
    population: int | None
    accuracy: Interval | None
    accuracy_decision: str
    disagreements: int | None = None
    disagreement: Interval | None = None
    serving_decision: str | None = None

    @property
    def decided(self) -> bool:
        """Every check decided, or one failed: a failed check fails the task whatever the other says."""
        if FAIL in (self.accuracy_decision, self.serving_decision):
            return True
        return self.accuracy_decision != INCONCLUSIVE and self.serving_decision != INCONCLUSIVE


def paired_accuracy(served: Sequence[float], reference: Sequence[float], alpha: float = ALPHA) -> Interval:
    """The full-set score's interval from the first ``len(served)`` items paired with every item's
    in-process score (``reference``, the whole set, by doc_id); see the module docstring."""
    n, population = len(served), len(reference)
    gains = [max(0.0, s - r) for s, r in zip(served, reference)]
    losses = [max(0.0, r - s) for s, r in zip(served, reference)]
    gain = bounded_mean_cs(gains, alpha=alpha / 2, population=population)
    loss = bounded_mean_cs(losses, alpha=alpha / 2, population=population)
    base = sum(reference) / population
    if n >= population:
        exact = base + sum(gains) / population - sum(losses) / population
        return Interval(exact, exact, METHOD_PAIRED)
    return Interval(max(0.0, base + gain.low - loss.high), min(1.0, base + gain.high - loss.low), METHOD_PAIRED)


def look(served: Sequence[float], target: float | None, reference: Sequence[float] | None = None,
         population: int | None = None, alpha: float = ALPHA) -> TaskLook:
    """Both checks on the items scored so far (``served``: per-item scores in doc_id order)."""
    n = len(served)
    if reference and n > len(reference):
        raise ValueError(f"{n} served items but only {len(reference)} in-process item scores")
    if reference:
        population = len(reference)
        accuracy = paired_accuracy(served, reference, alpha) if n else None
        differ = [1.0 if abs(s - r) > SAME_SCORE else 0.0 for s, r in zip(served, reference)]
        disagreement = bounded_mean_cs(differ, alpha=alpha, population=population) if n else None
        serving = decide(disagreement, MAX_SERVING_DISAGREEMENT, higher_is_better=False)
        acc_decision = INCONCLUSIVE if target is None else decide(accuracy, target, higher_is_better=True)
        return TaskLook(n, population, accuracy, acc_decision, int(sum(differ)), disagreement, serving)
    accuracy = bounded_mean_cs(list(served), alpha=alpha, population=population) if n else None
    acc_decision = INCONCLUSIVE if target is None else decide(accuracy, target, higher_is_better=True)
    return TaskLook(n, population, accuracy, acc_decision)


def stop_reason(state: TaskLook, budget: int | None) -> str | None:
    """Why the task stops after this look (None: score the next chunk). A decided task stops; so does
    one whose every item is scored, or whose mode budget (``limit``) is spent."""
    if state.population is not None and state.n >= state.population:
        return STOP_ALL_ITEMS
    if state.decided:
        return STOP_DECIDED
    if budget is not None and state.n >= budget:
        return STOP_BUDGET
    return None


def next_limit(scored: int, budget: int | None, population: int | None, chunk: int = CHUNK_ITEMS) -> int:
    """lm-eval's ``--limit`` for the next look: one chunk more, never past the budget or the set, and
    straight to the end when less than half a chunk would be left (a pass costs lm-eval's set-up)."""
    limit = scored + chunk
    for cap in (budget, population):
        if cap is not None and cap - limit < chunk // 2:
            limit = min(limit, cap) if cap < limit else cap
    return limit


def full_set_target(score: ScoreTarget) -> float | None:
    """The accuracy target of the task's whole set: its full-set reference (else the published score)
    times (1 - tolerance), as ``records.evals.accuracy_check`` derives it for a full run."""
    basis = score.reference_score if score.reference_score is not None else score.published_score
    return None if basis is None else round(basis * (1 - score.tolerance), 6)


def apply_look(rec: EvalRecord, state: TaskLook, looks: int, reason: str, score: ScoreTarget,
               reference: InProcessReference, suspects: str) -> None:
    """Write the last look's decisions into the task's record: the full-set score's interval, target
    and decision (replacing the fixed-n ones of the items scored), the paired serving check, and how
    sampling stopped. A serving fail fails the task, as ``EvalRecord.apply_serving`` does."""
    rec.items_total, rec.looks, rec.stopped = state.population, looks, reason
    rec.reference_score, rec.tolerance, rec.target = score.reference_score, score.tolerance, full_set_target(score)
    rec.ratio_to_reference = (None if rec.value is None or not score.reference_score
                              else rec.value / score.reference_score)
    if state.accuracy is not None:
        rec.ci95, rec.ci_method = state.accuracy.as_list(), state.accuracy.method
    rec.decision = state.accuracy_decision
    rec.passed = {PASS: True, FAIL: False}.get(state.accuracy_decision)
    rec.status = STATUS_BY_DECISION.get(state.accuracy_decision, rec.status)
    rec.in_process_score, rec.in_process_samples = reference.value, reference.samples
    rec.in_process_source = reference.source
    rec.in_process_ci95 = None
    if state.serving_decision is not None and state.disagreement is not None:
        rec.disagreements, rec.disagreement_ci95 = state.disagreements, state.disagreement.as_list()
        rec.max_disagreement, rec.serving_decision = MAX_SERVING_DISAGREEMENT, state.serving_decision
        rec.serving_detail = describe(state, looks, reason)
        if state.serving_decision == FAIL:
            rec.serving_detail += f"; serving bug: look at {suspects}"
            rec.status = STATUS_FAILED


def describe(state: TaskLook, looks: int, reason: str) -> str:
    """One line for the log and the record: items, looks, why it stopped, each check's decision."""
    of = f" of {state.population}" if state.population else ""
    parts = [f"{state.n}{of} items in {looks} look(s), stopped: {reason}", f"accuracy {state.accuracy_decision}"]
    if state.serving_decision is not None and state.disagreement is not None:
        parts.append(f"serving {state.serving_decision} ({state.disagreements} of {state.n} items differ from "
                     f"in-process, 95% CI {state.disagreement.low:.3f}..{state.disagreement.high:.3f} vs allowed "
                     f"{MAX_SERVING_DISAGREEMENT:g})")
    return "; ".join(parts)


__all__ = ["ALPHA", "CHUNK_ITEMS", "FAIL", "MAX_SERVING_DISAGREEMENT", "METHOD_PAIRED", "PASS", "STOP_ALL_ITEMS",
           "STOP_BUDGET", "STOP_DECIDED", "STOP_REASONS", "TaskLook", "describe", "look", "next_limit",
           "paired_accuracy", "stop_reason"]
