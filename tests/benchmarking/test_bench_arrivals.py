"""Arrival-time statistics of the open-loop schedule (gamma gaps normalized like vLLM)."""
from __future__ import annotations

import math
import statistics

import pytest

from benchmarking.arrivals import release_offsets


def gaps(offsets):
    return [b - a for a, b in zip([0.0] + offsets[:-1], offsets)]


def test_closed_loop_releases_everything_at_once():
    assert release_offsets(5) == [0.0] * 5


def test_poisson_is_normalized_to_n_over_rate_and_has_cv_one():
    n, rate = 4000, 20.0
    off = release_offsets(n, rate, 1.0, seed=3)
    assert off[-1] == pytest.approx(n / rate)
    assert all(b >= a for a, b in zip(off, off[1:]))
    g = gaps(off)
    assert statistics.mean(g) == pytest.approx(1 / rate, rel=1e-9)
    assert statistics.pstdev(g) / statistics.mean(g) == pytest.approx(1.0, abs=0.06)


def test_burstiness_sets_gap_variability():
    n, rate = 4000, 10.0
    cv = lambda b: statistics.pstdev(gaps(release_offsets(n, rate, b, seed=1))) / (1 / rate)  # noqa: E731
    assert cv(4.0) == pytest.approx(0.5, abs=0.05)     # gamma shape k: cv = 1/sqrt(k)
    assert cv(0.25) == pytest.approx(2.0, abs=0.3)
    const = release_offsets(10, rate, math.inf)
    assert gaps(const) == pytest.approx([0.1] * 10)


def test_seed_reproducible_and_ramp_speeds_up():
    assert release_offsets(50, 5.0, seed=7) == release_offsets(50, 5.0, seed=7)
    ramp = gaps(release_offsets(100, ramp=(1.0, 100.0), burstiness=math.inf))
    assert ramp[0] == pytest.approx(1.0) and ramp[-1] == pytest.approx(0.01)
    with pytest.raises(ValueError):
        release_offsets(3, 1.0, 0.0)
