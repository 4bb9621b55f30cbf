"""Timing certification in the suite: a bound that only a real timing bug crosses.

The error is taken against what the stub actually did (its write log on the shared monotonic
clock), so a busy machine delaying the stub does not count against the client.

Why not "p99 < 1 ms" here: 192 requests cannot bound a p99 from above, and on a shared 2-core
host a neighbour process moves the tail by milliseconds. The strict figure is a benchmark
(``python3 -m benchmarking.certify``, decided on its 95% interval). What a timing bug looks like
is different: a client that stamps chunks after buffering them, or stamps TTFT at the wrong
event, is off by a whole inter-token gap (5 ms here) or more on the typical request. So the test
asserts, on distribution-free 95% intervals of the median: the gap error is clearly under 1 ms and
the TTFT error clearly under one gap. The TTFT error also holds the time the request waits for the
stub to read it (with a busy neighbour core, 1-3 ms of 64 simultaneous requests were seen), which
no client can see; gaps are measured on the receiving side alone. A run must break the rule twice,
independently, to fail.
"""
from __future__ import annotations

import os

import pytest

from benchmarking.certify import certify, quantile_decision, timing_checks

ITL_MS = 5.0
#: Median error each metric must clearly stay under.
MEDIAN_LIMIT_MS = {"itl_vs_actual": 1.0, "ttft_vs_actual": ITL_MS}


def _bug_signs(out: dict) -> list[str]:
    """What in one certification run looks like a timing bug rather than noise."""
    signs = []
    for metric, limit in MEDIAN_LIMIT_MS.items():
        figure = out[metric]
        if quantile_decision(figure, "p50", limit) != "pass":
            signs.append(f"{metric}: median error {figure['p50']:.3f} ms (95% CI {figure['p50_ci95']}) "
                         f"not clearly under {limit} ms")
    return signs


@pytest.mark.slow
def test_client_timing_error_is_sub_millisecond_on_the_typical_request_at_concurrency_64(stub_factory):
    cpus = sorted(os.sched_getaffinity(0))
    stub_args = ["--ttft-ms", "30", "--itl-ms", str(ITL_MS)] + (["--cpu", str(cpus[-1])] if len(cpus) > 1 else [])
    stub = stub_factory(*stub_args)
    attempts = []
    for _attempt in range(2):
        out = certify(stub.url, 30.0, ITL_MS, osl=16, n=192, concurrency=64)
        assert out["completed"] == 192
        assert out["ttft_vs_actual"]["n"] == 192 and out["itl_vs_actual"]["n"] == 192 * 15
        signs = _bug_signs(out)
        if not signs:
            return
        attempts.append(signs)
    pytest.fail(f"two independent runs look like a timing bug: {attempts}")


def test_strict_checks_are_decided_on_the_interval_not_the_point_value():
    """The benchmark's strict claim: a p99 the sample cannot bound is inconclusive, never a pass."""
    small = {"n": 192, "p50": 0.1, "p99": 0.5, "p50_ci95": [0.09, 0.11], "p99_ci95": None}
    clear = {"n": 3000, "p50": 0.1, "p99": 0.5, "p50_ci95": [0.09, 0.11], "p99_ci95": [0.45, 0.6]}
    over = {"n": 3000, "p50": 0.1, "p99": 2.5, "p50_ci95": [0.09, 0.11], "p99_ci95": [1.8, 3.1]}
    straddles = {"n": 3000, "p50": 0.1, "p99": 0.95, "p50_ci95": [0.09, 0.11], "p99_ci95": [0.8, 1.2]}
    decisions = [c["decision"] for c in timing_checks({"ttft_vs_actual": small, "itl_vs_actual": clear})]
    assert decisions == ["inconclusive", "pass"]
    decisions = [c["decision"] for c in timing_checks({"ttft_vs_actual": over, "itl_vs_actual": straddles})]
    assert decisions == ["fail", "inconclusive"]


def test_a_client_that_buffers_chunks_is_caught_by_the_median_rule():
    """Stamping chunks one gap late on the typical request is what the suite's rule exists to catch."""
    healthy = {"n": 2880, "p50": 0.2, "p99": 3.0, "p50_ci95": [0.18, 0.22], "p99_ci95": [2.5, 3.5]}
    buffered = {"n": 2880, "p50": 5.0, "p99": 9.0, "p50_ci95": [4.9, 5.1], "p99_ci95": [8.5, 9.5]}
    assert _bug_signs({"ttft_vs_actual": healthy, "itl_vs_actual": healthy}) == []
    signs = _bug_signs({"ttft_vs_actual": healthy, "itl_vs_actual": buffered})
    assert len(signs) == 1 and signs[0].startswith("itl_vs_actual: median error 5.000 ms")
