"""The interval maths every judged number uses: known values, seeded coverage, the decision rule."""
from __future__ import annotations

import random

import pytest

from contracts.intervals import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    Interval,
    bootstrap_ratio,
    decide,
    decide_share,
    from_stderr,
    percentile,
    quantile_interval,
    wilson,
)


def test_wilson_matches_the_textbook_values_and_never_collapses_at_the_edges():
    low, high = wilson(5, 10).as_list(4)
    assert (low, high) == (0.2366, 0.7634)
    assert wilson(0, 10).low == 0.0 and wilson(0, 10).high == pytest.approx(0.2775, abs=1e-4)
    assert wilson(10, 10).high == pytest.approx(1.0) and wilson(10, 10).low < 0.73


def test_from_stderr_is_clipped_to_the_score_range():
    assert from_stderr(0.98, 0.02).high == 1.0
    assert from_stderr(0.5, 0.1).as_list(4) == [0.304, 0.696]


def test_quantile_interval_covers_the_true_median_about_95_percent_of_the_time():
    rng = random.Random(7)
    covered = 0
    for _ in range(400):
        interval = quantile_interval([rng.gauss(0, 1) for _ in range(60)], 0.5)
        covered += interval.low <= 0.0 <= interval.high
    assert 0.92 <= covered / 400 <= 0.99


def test_a_p99_of_too_few_samples_has_no_interval():
    assert quantile_interval(list(range(100)), 0.99) is None
    assert quantile_interval(list(range(1000)), 0.99) is not None


def test_bootstrap_resamples_items_and_is_repeatable():
    errors, words = [0, 1, 4], [10, 10, 10]
    first = bootstrap_ratio(errors, words, seed=3)
    assert first == bootstrap_ratio(errors, words, seed=3)
    assert first.low == 0.0 and first.high >= 0.3  # three sentences decide little
    many = bootstrap_ratio(errors * 30, words * 30, seed=3)
    assert many.high - many.low < first.high - first.low


@pytest.mark.parametrize("interval, target, higher, expected", [
    (Interval(0.8, 0.9, "t"), 0.7, True, PASS),
    (Interval(0.5, 0.6, "t"), 0.7, True, FAIL),
    (Interval(0.6, 0.8, "t"), 0.7, True, INCONCLUSIVE),
    (Interval(0.7, 0.8, "t"), 0.7, True, PASS),          # on the target meets it
    (Interval(10, 20, "t"), 25, False, PASS),
    (Interval(30, 40, "t"), 25, False, FAIL),
    (Interval(20, 30, "t"), 25, False, INCONCLUSIVE),
    (None, 25, False, INCONCLUSIVE),
])
def test_decide_needs_the_whole_interval_on_one_side(interval, target, higher, expected):
    assert decide(interval, target, higher) == expected


def test_percentile_is_numpy_linear_and_none_for_no_values():
    assert percentile([], 99) is None
    assert percentile([5.0], 50) == 5.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([1, 2, 3, 4], 99) == pytest.approx(3.97)
    assert percentile([10, 0, 20], 100) == 20
    assert percentile([10, 0, 20], 0) == 0


def test_bootstrap_ratio_of_means_resamples_each_run_and_covers_the_true_ratio():
    import random

    from contracts.intervals import bootstrap_ratio_of_means

    rng = random.Random(3)
    covered = 0
    for _ in range(40):
        base = [rng.gauss(100, 10) for _ in range(30)]
        slow = [rng.gauss(130, 13) for _ in range(30)]
        ci = bootstrap_ratio_of_means(slow, base, iterations=400, seed=rng.randrange(10**6))
        covered += ci.low <= 1.3 <= ci.high
    assert covered >= 32  # about 95% of 40; a bug that pairs or pools the runs falls far below
    same = [50.0, 52.0, 48.0, 51.0]
    assert bootstrap_ratio_of_means(same, same) == bootstrap_ratio_of_means(same, same)  # seeded
    with pytest.raises(ValueError):
        bootstrap_ratio_of_means([], same)


def test_a_bootstrap_of_one_item_is_refused_not_a_zero_width_certainty():
    with pytest.raises(ValueError, match="at least 2 items"):
        bootstrap_ratio([3.0], [10.0])


def test_a_share_against_its_allowance_is_decided_on_the_wilson_interval():
    # 0 of 100 bad: Wilson high 3.7% clears an allowance of 5%; 0 of 8 (high 32%) cannot
    assert decide_share(0, 100, 0.05)[0] == PASS
    decision, interval = decide_share(0, 8, 0.05)
    assert decision == INCONCLUSIVE and interval.as_list(3) == [0.0, 0.324]
    assert decide_share(6, 8, 0.05)[0] == FAIL          # Wilson low 41% > 5%
    assert decide_share(1, 8, 0.05)[0] == INCONCLUSIVE  # 12.5% observed, but 2%..47% holds the allowance
    assert decide_share(0, 0, 0.05)[0] == INCONCLUSIVE


def test_an_allowance_of_zero_is_a_rule_about_the_runs_own_items():
    clean, some = decide_share(0, 4, 0.0), decide_share(1, 400, 0.0)
    assert clean[0] == PASS and clean[1].high > 0 and "exact" in clean[1].method
    assert some[0] == FAIL and some[1].low > 0
