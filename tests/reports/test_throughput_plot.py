"""The throughput-latency plot over the concurrency levels carries each point's 95% intervals."""
from __future__ import annotations

import re

from reports import plots
from reports.builder import build_report


def test_each_point_has_its_intervals_as_whiskers(make_run):
    run = make_run()
    run.remove("benchmarks/point_isl-128_osl-128_con-2_n-8.requests.jsonl")  # no per-request file: no interval
    rows = build_report(run.path).benchmarks
    with_ci = [r for r in rows if r.ci95]
    assert [r.max_concurrency for r in with_ci] == [1, 4]
    for r in with_ci:  # the judge's intervals of the means hold the point's own values
        assert r.ci95["tpot_ms"][0] < r.mean_tpot_ms < r.ci95["tpot_ms"][1]
        assert r.ci95["decode_throughput"][0] < r.decode_throughput < r.ci95["decode_throughput"][1]
    svg = plots.throughput_vs_latency(rows)
    assert len(re.findall(r'<line class="interval"', svg)) == 2 * len(with_ci)
    assert "c=2" in svg and "(no interval: fewer than 8 requests)" in svg and "[82.0, 136.7]" in svg
