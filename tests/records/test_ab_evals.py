"""Evals A/B decided on the paired items (``records.ab_evals``), checked by simulation against a known truth, and
as the one judge and the report read it."""
from __future__ import annotations

import random

import pytest

from records.ab import ABSection
from records.ab_evals import METHOD_BINARY, EvalAB, paired_eval, tango_paired
from records.judge_ab import ab_checks

DRAWS = 300


def _draw(rng: random.Random, items: int, flip: float, lost: float) -> tuple[list[float], list[float]]:
    """A baseline answering half the items right; the candidate answers alike but flips ``flip`` of the items
    either way (near-ties) and loses ``lost`` of the items the baseline got right (a broken build)."""
    baseline = [1.0 if rng.random() < 0.5 else 0.0 for _ in range(items)]
    candidate = []
    for b in baseline:
        c = 1.0 - b if rng.random() < flip else b
        candidate.append(0.0 if b == 1.0 and rng.random() < lost else c)
    return candidate, baseline


def _rates(items: int, flip: float, lost: float, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    decisions = [paired_eval("t", "acc,none", *_draw(rng, items, flip, lost), 0.05, "x").decision
                 for _ in range(DRAWS)]
    return {d: decisions.count(d) / DRAWS for d in ("regressed", "improved", "within_noise", "inconclusive")}


@pytest.mark.parametrize("items", [12, 72, 300])
def test_an_unchanged_model_is_never_called_regressed(items) -> None:
    rates = _rates(items, flip=0.02, lost=0.0, seed=items)
    assert rates["regressed"] <= 0.05 and rates["improved"] <= 0.05, rates


def test_a_model_that_loses_a_fifth_of_its_right_answers_is_caught_on_the_pairs() -> None:
    """A 10-point drop (0.50 -> 0.40): the pairs catch it at ci's 72 items most of the time and at 300 always,
    where two independent 72-item scores (binomial intervals 23 points wide) could not."""
    assert _rates(72, 0.0, 0.2, 1)["regressed"] >= 0.6
    assert _rates(300, 0.0, 0.2, 2)["regressed"] >= 0.95
    assert _rates(12, 0.0, 0.2, 3)["within_noise"] <= 0.05  # 12 items cannot show "no change": never passes it


def test_the_score_interval_keeps_its_width_without_discordant_pairs() -> None:
    """12 items answered alike do not show the difference is small: Tango's interval keeps the width 12 allow."""
    low, high = tango_paired([(1.0, 1.0)] * 6 + [(0.0, 0.0)] * 6)
    assert low < -0.2 and high > 0.2
    low, high = tango_paired([(1.0, 0.0)] * 10 + [(1.0, 1.0)] * 10)
    assert low > 0.25 and high <= 1.0


def test_a_record_without_items_or_baseline_score_says_why() -> None:
    empty = paired_eval("t", "acc,none", [], [1.0], 0.05, "x")
    assert empty.decision == "inconclusive" and "no item" in empty.note
    zero = paired_eval("t", "acc,none", [1.0, 0.0], [0.0, 0.0], 0.05, "x")
    assert zero.decision == "inconclusive" and zero.ratio is None and zero.difference_ci95 is not None
    soft = paired_eval("t", "f1,none", [0.5, 0.7, 0.9], [0.5, 0.7, 0.9], 0.05, "x")
    assert soft.method != METHOD_BINARY  # scores between 0 and 1: the bounded confidence sequences


def test_the_judge_gates_on_the_eval_pairs() -> None:
    rng = random.Random(5)
    broken = paired_eval("mmlu", "acc,none", *_draw(rng, 300, 0.0, 0.3), 0.05, "--baseline-url http://b")
    assert broken.decision == "regressed"
    section = ABSection(baseline="--baseline-url http://b", evals=[broken])
    judged = ab_checks(section)
    assert [c.name for c in judged.checks] == ["ab accuracy mmlu"] and judged.checks[0].required
    assert [b.item for b in judged.blockers] == ["accuracy mmlu"]
    again = EvalAB.from_dict(broken.to_dict())
    assert again.decision == "regressed" and again.gains == broken.gains


def test_an_undecided_task_says_how_many_items_would_decide_it() -> None:
    few = paired_eval("t", "acc,none", [1.0] * 9 + [0.0] * 3, [1.0] * 9 + [0.0] * 3, 0.05, "x")
    assert few.decision == "inconclusive" and few.items_to_decide is not None and few.items_to_decide > 12
    more = paired_eval("t", "acc,none", [1.0] * (few.items_to_decide * 3 // 4) + [0.0] * (few.items_to_decide // 4),
                       [1.0] * (few.items_to_decide * 3 // 4) + [0.0] * (few.items_to_decide // 4), 0.05, "x")
    assert more.decision == "within_noise", more
