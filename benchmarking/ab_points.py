"""Paired A/B of two live servers in the benchmarks client (``--baseline-url`` / ``--baseline-vllm-args``).

After the sweep, each judged point (one with targets; else every point) is measured again in ABBA blocks of
the point's size: A on the baseline server, B on this run's server (the candidate), both blocks of a pair
sending the same prompts, with no request of the other side in flight (only one server is loaded at a
time). The loop and its anytime-valid stop are the agreement check's (``benchmarking.agreement.run_abba``);
the decision is a regression gate's (``records.ab``). Each point writes ``<stem>.ab.json``; the points share
what the sweep budget leaves, equally. The orchestrator passes the baseline with the flags of
``add_arguments`` (its tolerance is ``regression_tolerance``'s, resolved there).
"""
from __future__ import annotations

import argparse
import copy
import os
import time

from benchmarking import point_run
from benchmarking.point_run import Context
from benchmarking.sweeps import Point
from contracts.client_main import add_baseline_arguments
from contracts.typed_record import RecordError
from records.ab import ABRecord, judge_ab_metrics
from records.bench import point_key


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmarks client's own flags for the A/B (absent: no A/B): the clients' common ones."""
    add_baseline_arguments(parser)


def baseline_of(ctx: Context) -> str:
    """The baseline URL this run compares with ('' when none)."""
    return str(getattr(ctx.invocation.options, "baseline_url", "") or "").rstrip("/")


def run_ab_point(ctx: Context, point: Point, budget_s: float | None) -> ABRecord:
    """The point in ABBA blocks on the baseline (A) and this run's server (B); writes ``<stem>.ab.json``."""
    from benchmarking.agreement import run_abba
    from benchmarking.tool_points import _ours_block
    options = ctx.invocation.options
    key = point_key(point.isl, point.osl, point.max_concurrency)
    tolerance, cycles = float(options.baseline_tolerance), ctx.bench.ab_cycles
    baseline_url = baseline_of(ctx)
    record = ABRecord(point=key, baseline=options.baseline_label or baseline_url, baseline_url=baseline_url,
                      candidate_url=ctx.base_url, tolerance=tolerance, max_cycles=cycles,
                      block_requests=point.num_prompts)
    on_baseline = copy.copy(ctx)
    on_baseline.base_url = baseline_url
    deadline = None if budget_s is None else time.monotonic() + budget_s

    def measure(side: str, index: int):
        seed = ctx.bench.seed + 104729 * (1 + index // 2)  # one seed per pair: both servers get the same prompts
        left = None if deadline is None else max(1.0, deadline - time.monotonic())
        block = _ours_block(on_baseline if side == "A" else ctx, point, side, index, seed, left)
        v = block.values
        point_run.log(f"{point.stem}: A/B block {index} ({'baseline' if side == 'A' else 'candidate'}): "
                      + ", ".join(f"{k} {'n/a' if v.get(k) is None else format(v[k], '.4g')}" for k in sorted(v)))
        return block

    run_abba(record, measure, deadline, lambda: bool(ctx.stop.signum),
             judge=lambda blocks, looks: judge_ab_metrics(key, blocks, tolerance, cycles, looks),
             side_names=("baseline", "candidate"))
    record.write(os.path.join(ctx.out_dir, point.stem + ".ab.json"))
    for m in record.metrics:
        point_run.log(f"{m.name}: {m.detail()}")
    for note in record.notes:
        point_run.log(f"{point.stem}: A/B: {note}")
    return record


def ab_pass(ctx: Context, points: list[Point], sweep_deadline: float | None, not_run: list[str]) -> list[str]:
    """With a baseline server: every point in A/B blocks, each with an equal share of what the sweep budget
    leaves; returns the records' paths for outputs.json. A point whose blocks failed is added to ``not_run``
    (the workflow then exits 1)."""
    if not baseline_of(ctx):
        return []
    outputs: list[str] = []
    for i, point in enumerate(points):
        if ctx.stop.signum:
            break
        remaining = sweep_deadline - time.monotonic() if sweep_deadline else None
        path = os.path.join(ctx.out_dir, point.stem + ".ab.json")
        if _done(path, baseline_of(ctx)):
            point_run.log(f"{point.stem}: A/B already measured, skipping (resume)")
            outputs.append(ctx.rel(path))
            continue
        budget = None if remaining is None else remaining / (len(points) - i)
        point_run.log(f"{point.stem}: A/B against {baseline_of(ctx)}: ABBA blocks of {point.num_prompts} requests, "
                      f"at most {ctx.bench.ab_cycles} cycles" + (f" within {budget:.0f} s" if budget else ""))
        record = run_ab_point(ctx, point, budget)
        if record.stopped == "failed":
            not_run.append(f"{point.stem} A/B ({'; '.join(record.notes)})")
        outputs.append(ctx.rel(path))
    return outputs


def _done(path: str, baseline_url: str) -> bool:
    """A complete record of this point against this baseline exists (resume)."""
    try:
        done = ABRecord.read(path) if os.path.exists(path) else None
    except (OSError, ValueError, RecordError):
        return False
    return done is not None and done.baseline_url == baseline_url and done.stopped in ("decided", "budget")
