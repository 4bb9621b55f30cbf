"""Timing certification: at concurrency 64 the client's TTFT and gap errors stay under 1 ms (p99).

The error is taken against what the stub actually did (its write log on the shared monotonic
clock), so a busy machine delaying the stub does not count against the client; if the machine is
so loaded that even the stub misses its own schedule by over 1 ms at p99, nothing can be certified
and the test skips with the figures instead of failing on noise.
"""
from __future__ import annotations

import os

import pytest

from benchmarking.certify import certify


@pytest.mark.slow
def test_client_timing_error_p99_below_1ms_at_concurrency_64(stub_factory):
    cpus = sorted(os.sched_getaffinity(0))
    stub_args = ["--ttft-ms", "30", "--itl-ms", "5"] + (["--cpu", str(cpus[-1])] if len(cpus) > 1 else [])
    stub = stub_factory(*stub_args)
    # Up to three attempts: on a shared 2-core machine one burst of scheduler noise can push a p99
    # over 1 ms; a client that is really slow fails all three.
    for _attempt in range(3):
        out = certify(stub.url, 30.0, 5.0, osl=16, n=192, concurrency=64)
        assert out["completed"] == 192
        assert out["ttft_vs_actual"]["n"] == 192 and out["itl_vs_actual"]["n"] == 192 * 15
        if out["ttft_vs_actual"]["p99"] < 1.0 and out["itl_vs_actual"]["p99"] < 1.0:
            return
    if out["stub_lateness_us"]["p99"] > 1000:
        pytest.skip(f"machine too loaded to certify timing: stub lateness p99 {out['stub_lateness_us']['p99']:.0f} us")
    assert out["ttft_vs_actual"]["p99"] < 1.0, out
    assert out["itl_vs_actual"]["p99"] < 1.0, out
