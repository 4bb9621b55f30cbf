"""Warm-up ("trace capture") planning for the benchmarks workflow (stdlib only).

Tenstorrent servers compile a trace per padded prefill length on first use; timing a point whose
shape was never seen would measure compilation. The reference sends one exact-length streaming
completion per distinct (isl, osl) before timing (tt-inference-server §7.2). The orchestrator calls
``warmup_pairs`` to log what will be warmed; run_benchmarks.py sends the requests itself.
"""
from __future__ import annotations

from benchmarking.bench_args import WORKFLOW_ARG_KEYS, parse_workflow_args
from benchmarking.sweeps import build_points


def warmup_pairs(spec: dict, workflow_args: dict) -> list[tuple[int, int]]:
    """Distinct (isl, osl) pairs, ascending, that this benchmarks run will measure."""
    # keys of other workflows are the orchestrator's business; plan with the ones we know
    known = {k: str(v) for k, v in (workflow_args or {}).items() if k in WORKFLOW_ARG_KEYS}
    args = parse_workflow_args(known)
    return sorted({(p.isl, p.osl) for p in build_points(spec, args)})
