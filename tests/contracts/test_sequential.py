"""The confidence sequences' formulas on hand-checkable inputs (contracts/sequential.py).

Their error rates under the benchmark's stop rule are shown by simulation in
tests/records/test_sequential_error_rates.py; here: the arithmetic, the shapes (centred, narrowing,
exact at n = N, never widening), the refusals and the errors.
"""
from __future__ import annotations

import itertools
import math
import random

import pytest

from contracts.intervals import Interval
from contracts.sequential import (
    BET_TRUNCATION,
    DEFAULT_T_OPT,
    METHOD_BOUNDED_CS,
    METHOD_BOUNDED_CS_WOR,
    METHOD_MEAN_CS,
    MIN_BATCHES,
    MIN_VALUES,
    TRUSTED_BATCHES,
    bounded_mean_cs,
    bounded_mean_cs_path,
    long_run_variance,
    mean_cs,
    mixture_rho2,
    normal_mixture_margin,
    student_t_equivalent,
)

Z975 = 1.959963984540054


# --- the normal-mixture boundary -------------------------------------------------------------------------

def test_the_normal_mixture_margin_matches_its_formula_by_hand():
    # t = 1, rho^2 = 1, alpha = 0.05: sqrt(2 * 2 / 1 * log(sqrt(2) / 0.05)) = sqrt(4 * 3.342306) = 3.65640
    assert normal_mixture_margin(1, 1.0, 0.05) == pytest.approx(3.65640, abs=1e-5)
    # it shrinks about as 1/sqrt(t), times a slowly changing log factor: 100x the observations, about 1/10
    assert 0.8 < 10 * normal_mixture_margin(100, 1.0) / normal_mixture_margin(1, 1.0) < 1.0


def test_rho_is_tuned_to_make_the_boundary_tightest_at_t_opt():
    alpha = 0.05
    rho2 = mixture_rho2(20, alpha)
    u = 20 * rho2 + 1   # the optimum solves u - 1 = log(u / alpha^2); about 9.2 for alpha = 0.05
    assert u - 1 == pytest.approx(math.log(u / alpha ** 2)) and 9.0 < u < 9.5
    best = normal_mixture_margin(20, rho2, alpha)
    assert best < normal_mixture_margin(20, rho2 * 1.2, alpha) and best < normal_mixture_margin(20, rho2 / 1.2, alpha)
    assert mixture_rho2(40, alpha) == pytest.approx(rho2 / 2)   # rho^2 scales as 1 / t_opt


@pytest.mark.parametrize("nu, expected", [(1, 12.7062), (2, 4.3027), (9, 2.2622), (29, 2.0452), (30, 2.0423),
                                          (120, 1.9799), (10_000, 1.9602)])
def test_the_student_t_equivalent_of_a_normal_quantile_is_the_t_table(nu, expected):
    assert student_t_equivalent(Z975, nu) == pytest.approx(expected, abs=2e-4)
    assert student_t_equivalent(3.5, nu) > 3.5   # an estimated spread always widens the margin


# --- mean_cs -----------------------------------------------------------------------------------------------

def _half(values, batch, s2, nu):
    """The documented half-width: sqrt(s2 / n) * t_nu(sqrt(k) * margin(k)), k = n / batch."""
    n = len(values)
    k = n / batch
    margin = math.sqrt(k) * normal_mixture_margin(k, mixture_rho2(DEFAULT_T_OPT))
    return math.sqrt(s2 / n) * student_t_equivalent(margin, nu)


def test_mean_cs_of_independent_values_is_the_documented_formula_centred_on_the_mean():
    values = [10.0, 12.0, 9.0, 11.0, 10.0, 13.0, 8.0, 11.0] * 4          # 32 values, batch 1: 32 batches
    mean = sum(values) / 32
    var = sum((v - mean) ** 2 for v in values) / 31
    assert long_run_variance(values, 1) == (pytest.approx(var), 31)
    got = mean_cs(values)
    assert isinstance(got, Interval) and got.method == METHOD_MEAN_CS
    assert (got.low + got.high) / 2 == pytest.approx(mean)
    assert got.half_width() == pytest.approx(_half(values, 1, var, 31))
    assert got.low < mean < got.high


def test_mean_cs_narrows_as_values_come_in():
    rng = random.Random(3)
    values = [rng.lognormvariate(4.6, 0.4) for _ in range(1024)]
    widths = [mean_cs(values[:n], batch=4).half_width() for n in (32, 128, 512, 1024)]
    assert widths == sorted(widths, reverse=True) and widths[-1] < widths[0] / 3


def test_batch_means_widen_the_interval_of_values_correlated_within_a_round():
    # each round of 4 requests shares a queueing delay: the rounds, not the requests, are what vary
    rng = random.Random(5)
    values = [d + rng.gauss(0, 1) for d in (rng.gauss(100, 10) for _ in range(64)) for _ in range(4)]
    n = len(values)
    mean = sum(values) / n
    iid_var = sum((v - mean) ** 2 for v in values) / (n - 1)
    as_if_independent = _half(values, 1, iid_var, n - 1)
    batched = mean_cs(values, batch=4)
    assert batched.half_width() > 1.5 * as_if_independent
    s2, nu = long_run_variance(values, 4)   # 64 batches: trusted; the largest of the 1x/2x/4x batch variances
    assert nu in (63, 31, 15) and s2 > 2 * iid_var
    # told nothing (batch 1), the longer batch sizes (2, 4) still see the rounds' shared delay
    assert mean_cs(values, batch=1).half_width() > 1.5 * as_if_independent


def test_with_few_batches_the_interval_allows_for_fully_correlated_rounds():
    values = [100.0, 110.0, 90.0, 100.0] * 2       # two rounds of 4 with the same mean: no spread between rounds
    var = sum((v - 100.0) ** 2 for v in values) / 7
    assert 8 // 4 < TRUSTED_BATCHES and long_run_variance(values, 4) == (pytest.approx(4 * var), 7)
    got = mean_cs(values, batch=4)
    assert got.half_width() == pytest.approx(_half(values, 4, 4 * var, 7)) and got.low < min(values)
    assert got.high > max(values)


def test_mean_cs_refuses_too_few_values_or_batches():
    assert MIN_VALUES == 8 and MIN_BATCHES == 2
    assert mean_cs([]) is None and mean_cs([1.0] * (MIN_VALUES - 1)) is None
    assert mean_cs([1.0, 2.0] * 4, batch=8) is None              # one batch of 8: no spread between batches
    assert mean_cs([1.0, 2.0] * 8, batch=8) is not None          # two batches
    assert mean_cs([5.0] * 8) == Interval(5.0, 5.0, METHOD_MEAN_CS)   # no spread at all: nothing to be unsure of


@pytest.mark.parametrize("kwargs, message", [
    ({"values": [1.0] * 7 + [float("nan")]}, "value 7 is nan, not a finite number"),
    ({"values": [1.0] * 7 + [float("inf")]}, "value 7 is inf"),
    ({"values": [1.0] * 7 + ["2"]}, "value 7 is '2'"),
    ({"values": [1.0] * 7 + [True]}, "value 7 is True"),
    ({"values": [1.0] * 8, "batch": 0}, "batch must be a positive whole number"),
    ({"values": [1.0] * 8, "batch": 2.0}, "batch must be a positive whole number"),
    ({"values": [1.0] * 8, "alpha": 0.0}, "alpha must be a number strictly between 0 and 1"),
    ({"values": [1.0] * 8, "alpha": 1.5}, "alpha must be"),
    ({"values": [1.0] * 8, "t_opt": 0}, "t_opt must be > 0"),
])
def test_mean_cs_rejects_bad_input_with_a_clear_message(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        mean_cs(**kwargs)


# --- bounded_mean_cs ----------------------------------------------------------------------------------------

def _prpl_eb_by_hand(xs, alpha=0.05, population=None):
    """Waudby-Smith & Ramdas (2023) Thm 2 (and the 2020 WoR version) step by step, for the comparison."""
    out, lo, hi = [], 0.0, 1.0
    num = den = pen = s = sq = 0.0
    mu, s2 = 0.5, 0.25
    for t, x in enumerate(xs, start=1):
        lam = min(math.sqrt(2 * math.log(2 / alpha) / (s2 * t * math.log(1 + t))), BET_TRUNCATION)
        v = 4 * (x - mu) ** 2
        pen += v * (-math.log(1 - lam) - lam) / 4
        if population is None:
            num, den = num + lam * x, den + lam
        else:
            num += lam * (x + s / (population - t + 1))
            den += lam * (1 + (t - 1) / (population - t + 1))
        s += x
        c, m = num / den, (math.log(2 / alpha) + pen) / den
        c_lo, c_hi = c - m, c + m
        if population is not None:
            c_lo, c_hi = max(c_lo, s / population), min(c_hi, (s + population - t) / population)
        lo, hi = max(lo, c_lo), min(hi, c_hi)
        out.append((lo, hi))
        mu = (0.5 + s) / (t + 1)
        sq += (x - mu) ** 2
        s2 = (0.25 + sq) / (t + 1)
    return out


def test_the_first_step_of_prpl_eb_by_hand():
    # t = 1, x = 1: lambda = min(sqrt(2 log 40 / (1/4 * 1 * log 2)), 1/2) = 1/2; v = 4 (1 - 1/2)^2 = 1;
    # psi_E(1/2) = (log 2 - 1/2) / 4 = 0.048287; margin = (log 40 + 0.048287) / (1/2) = 7.47433: the whole range
    assert bounded_mean_cs([1.0]) == Interval(0.0, 1.0, METHOD_BOUNDED_CS)
    assert (math.log(40) + (math.log(2) - 0.5) / 4) / 0.5 == pytest.approx(7.47433, abs=1e-5)


@pytest.mark.parametrize("population", [None, 300])
def test_bounded_mean_cs_is_the_papers_formula_step_by_step(population):
    rng = random.Random(11)
    xs = [1.0 if rng.random() < 0.7 else 0.0 for _ in range(250)]
    path = bounded_mean_cs_path(xs, population=population)
    for got, (lo, hi) in zip(path, _prpl_eb_by_hand(xs, population=population)):
        assert (got.low, got.high) == pytest.approx((lo, hi), abs=1e-12)
    assert path[-1] == bounded_mean_cs(xs, population=population)
    assert path[99] == bounded_mean_cs(xs[:100], population=population)   # a look after 100 items saw this


def test_bounded_mean_cs_holds_the_mean_narrows_and_never_widens():
    rng = random.Random(2)
    xs = [1.0 if rng.random() < 0.8 else 0.0 for _ in range(2000)]
    path = bounded_mean_cs_path(xs)
    assert all(a.low <= b.low and b.high <= a.high for a, b in itertools.pairwise(path))   # running intersection
    for n in (100, 500, 2000):
        assert path[n - 1].low < sum(xs[:n]) / n < path[n - 1].high
    widths = [path[n - 1].half_width() for n in (100, 500, 2000)]
    assert widths == sorted(widths, reverse=True) and widths[-1] < 0.05
    assert path[-1].method == METHOD_BOUNDED_CS


def test_without_replacement_the_interval_collapses_to_the_exact_mean_at_n_equals_n():
    items = [1.0] * 60 + [0.0] * 40
    random.Random(4).shuffle(items)
    path = bounded_mean_cs_path(items, population=100)
    assert path[-1] == Interval(0.6, 0.6, METHOD_BOUNDED_CS_WOR)
    with_replacement = bounded_mean_cs_path(items)
    for n in (50, 90, 99):   # knowing the set is finite is worth more the more of it is seen
        assert path[n - 1].half_width() < with_replacement[n - 1].half_width()
        assert path[n - 1].low <= 0.6 <= path[n - 1].high
    # whatever the unseen items are, after 99 of 100 the mean is within 1/100
    assert path[98].high - path[98].low <= 0.01 + 1e-12


def test_a_range_other_than_0_1_is_the_same_interval_rescaled():
    rng = random.Random(8)
    scores = [rng.uniform(0, 10) for _ in range(300)]
    unit = bounded_mean_cs([s / 10 for s in scores])
    scaled = bounded_mean_cs(scores, lower=0.0, upper=10.0)
    assert (scaled.low, scaled.high) == pytest.approx((10 * unit.low, 10 * unit.high))


def test_bounded_mean_cs_covers_the_mean_at_every_look_at_least_95_percent_of_the_time():
    rng = random.Random(9)
    missed = 0
    for _ in range(200):
        path = bounded_mean_cs_path([1.0 if rng.random() < 0.3 else 0.0 for _ in range(300)])
        missed += any(not iv.low <= 0.3 <= iv.high for iv in path[15::16])   # a look every 16 items
    assert missed / 200 <= 0.05


def test_no_items_leave_the_whole_range():
    assert bounded_mean_cs([]) == Interval(0.0, 1.0, METHOD_BOUNDED_CS)
    assert bounded_mean_cs([], lower=-1, upper=1, population=5) == Interval(-1.0, 1.0, METHOD_BOUNDED_CS_WOR)


@pytest.mark.parametrize("kwargs, message", [
    ({"values": [0.5, 1.5]}, "value 1 is 1.5, outside the range [0.0, 1.0]"),
    ({"values": [0.5, float("nan")]}, "value 1 is nan, not a finite number"),
    ({"values": [0.5], "lower": 1.0, "upper": 1.0}, "upper (1.0) must be greater than lower (1.0)"),
    ({"values": [0.5], "upper": float("inf")}, "upper must be a finite number"),
    ({"values": [0.5, 0.5, 0.5], "population": 2}, "3 values drawn without replacement from a population of 2"),
    ({"values": [0.5], "population": 0}, "population must be a positive whole number"),
    ({"values": [0.5], "population": 2.0}, "population must be a positive whole number"),
    ({"values": [0.5], "alpha": 0}, "alpha must be a number strictly between 0 and 1"),
])
def test_bounded_mean_cs_rejects_bad_input_with_a_clear_message(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]").replace(".", r"\.")):
        bounded_mean_cs(**kwargs)
