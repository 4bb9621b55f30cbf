"""A benchmarks workload (``benchmarking/workloads/``: trace, multi_turn, shared_prefix) run as a stress point.

    --workflow stress_tests --workflow-args "workload=trace trace_file=PATH [time_scale=X]"
    --workflow stress_tests --workflow-args "workload=multi_turn turns=3 input_size=64 output_size=8 max_concurrent=2"
    --workflow stress_tests --workflow-args "workload=shared_prefix prefixes=2 prefix_tokens=32 input_size=64"

What was chosen and why: the workload's own code plans and sends the traffic (``workloads.points``
and ``workloads.measure``, the very functions the benchmarks workflow calls; nothing is copied), so
a trace is replayed with the same release timing and lateness check, a conversation carries the
same history and the shared prefixes are the same. What the stress workflow adds is its judgement
and its watch: the point becomes a ``StressPointRecord`` judged like every load point (error rate
against ``max_error_rate``, at least one success; a trace the client could not keep up with fails
``trace_kept_up``), with the server's state sampled beside it, the workload's figures kept under
``workload``, and the over-saturation detector run over the finished requests. The detector
watches but does not stop a workload: the traffic is the trace's (or the conversations'), and
cutting it short would replay something else, so the verdict says when the server fell behind
(``saturation``) and the point runs to its end or the workflow's budget.

Lengths and counts of multi_turn and shared_prefix come from the single point's keys (input_size,
output_size, max_concurrent, num_prompts, fitted to the context as for every stress point); a
trace brings its own. A trace is read and checked here, before anything is sent (exit 2 naming
the line), and so is a budget (``budget_s``) that would end before the trace does.
"""
from __future__ import annotations

import bisect
import dataclasses
import os
from dataclasses import dataclass

from benchmarking.bench_args import BenchArgs
from benchmarking.workloads import Measured, WorkloadPoint
from contracts.model_spec import ModelSpec
from stress_tests.args import StressArgError, StressArgs
from stress_tests.driver import MONITOR_TICK_S, STOPPED_EARLY, LoadRun
from stress_tests.saturation import SaturationDetector, SaturationVerdict

MODE = "workload"
# error classes the benchmark point loop gives requests it cut (signal, budget): cut, not failed, as in stress loads
CUT_CLASSES = ("interrupted", "budget_exceeded")


@dataclass(frozen=True)
class WorkloadStressPoint:
    """A workload's point with the fields the stress judge and records read from a load point."""

    point: WorkloadPoint
    bench: BenchArgs
    mode: str = MODE
    duration_s: float | None = None
    requested_isl: int | None = None
    requested_osl: int | None = None
    rescaled: bool = False

    @property
    def isl(self) -> int:
        return self.point.isl

    @property
    def osl(self) -> int:
        return self.point.osl

    @property
    def concurrency(self) -> int:
        return self.point.max_concurrency

    @property
    def num_prompts(self) -> int:
        return self.point.num_prompts

    @property
    def name(self) -> str:
        return f"{MODE}_{self.point.stem.removeprefix('point_')}"


def plan(args: StressArgs, spec: ModelSpec) -> list[WorkloadStressPoint]:
    """The workload's points (none without ``workload=``); raises ValueError (exit 2) on bad input."""
    if args.workload is None:
        return []
    from benchmarking import workloads
    from benchmarking.bench_args import parse_workflow_args
    from stress_tests.plan import expand

    raw = {"mode": args.size, "workload": args.workload, **args.workload_args}
    if args.workload != "trace":  # the single point's shape: its keys, fitted to the context
        shape = expand(dataclasses.replace(args, run_modes=("single",)), spec)[0]
        raw["points"] = f"{shape.isl}x{shape.osl}x{shape.concurrency}x{shape.num_prompts}"
    bench = parse_workflow_args(raw)
    points = [WorkloadStressPoint(p, bench) for p in workloads.points(spec, bench)]
    span = max((p.point.span_s for p in points), default=0.0)
    if args.budget_s is not None and span and args.budget_s <= span:
        raise StressArgError(f"budget_s={args.budget_s:g} ends before the trace does ({span:g} s at "
                             f"time_scale={bench.time_scale:g}): the replay would be cut short")
    return points


class _BenchView:
    """What a workload reads from the benchmarks' context, served from the stress run's context."""

    def __init__(self, ctx, bench: BenchArgs) -> None:
        self._ctx, self.bench = ctx, bench
        self.tokenizer, self.model = ctx.tokenizer, ctx.model
        self.base_url, self.api_key = ctx.base_url, ctx.api_key
        self.out_dir = str(ctx.out_dir)

    def client_config(self):
        return self._ctx.client_config()

    def rel(self, path: str) -> str:
        return os.path.relpath(path, self._ctx.run_dir)


def saturation_after(records, origin: float, closed_loop: bool, window_s: float) -> SaturationVerdict:
    """The over-saturation detector over a finished run, fed as the stress driver feeds it while a load
    runs (requests in flight every ``MONITOR_TICK_S``, each first token when it came): its first firing,
    else its verdict at the end."""
    timed = [r for r in records if r.send_time]
    sends = sorted(r.send_time - origin for r in timed)
    ends = sorted(r.send_time - origin + (r.latency or 0.0) for r in timed if r.latency is not None)
    firsts = sorted((r.send_time - origin + r.ttft, r.ttft * 1000.0) for r in timed if r.success and r.ttft is not None)
    detector = SaturationDetector(window_s=window_s, closed_loop=closed_loop)
    end = max(ends + sends + [0.0])
    fed, tick = 0, MONITOR_TICK_S
    while tick <= end + MONITOR_TICK_S:
        while fed < len(firsts) and firsts[fed][0] <= tick:
            detector.add_ttft(*firsts[fed])
            fed += 1
        detector.add_concurrency(tick, bisect.bisect_right(sends, tick) - bisect.bisect_right(ends, tick))
        verdict = detector.check(tick)
        if verdict.fired:
            return verdict
        tick += MONITOR_TICK_S
    return detector.check(end)


def measure(ctx, p: WorkloadStressPoint, pending_signal) -> tuple[LoadRun, Measured]:
    """Run the workload's point with its own code and hand it back as a stress load's result."""
    from benchmarking import workloads

    measured = workloads.measure(_BenchView(ctx, p.bench), p.point, ctx.remaining(), pending_signal)
    run = measured.run
    for rec in run.records:
        if not rec.success and rec.error_class in CUT_CLASSES:
            rec.error_class = STOPPED_EARLY
    reason = ("interrupted" if run.interrupted else "the workflow's time budget ran out" if run.budget_exhausted
              else f"sending stopped after a {run.stopped_by}" if run.stopped_by else None)
    saturation = saturation_after(run.records, run.origin, closed_loop=p.point.workload != "trace",
                                  window_s=max(10.0, 4 * ctx.args.window_s)) if ctx.args.saturation else None
    return LoadRun(records=run.records, duration_s=run.duration, saturation=saturation, stopped_reason=reason,
                   not_sent=run.not_sent), measured


def judge_workload(rec, measured: Measured) -> None:
    """Add the workload's own figures and checks to its judged point record (``stress_tests.judge``)."""
    rec.workload = measured.summary
    summary = measured.summary or {}
    if summary.get("kind") == "trace":
        late = summary.get("lateness_ms") or {}
        rec.checks["trace_kept_up"] = {
            "value": late.get("over_limit"), "limit": 0, "passed": bool(summary.get("kept_up")),
            "n": late.get("n"), "detail": measured.failed_check or (
                f"every request left within {summary.get('max_lateness_ms'):g} ms of its timestamp")}
    bad = [k for k, c in rec.checks.items() if c["passed"] is False]
    undecided = [k for k, c in rec.checks.items() if c["passed"] is None]
    rec.passed = False if bad else None if undecided else True
    rec.status = "failed" if bad else "inconclusive" if undecided else "passed"
    sat = rec.saturation or {}
    if sat.get("fired"):
        rec.detail += f"; {sat.get('reason')} (seen after the run: a workload is not stopped)"
    if "trace_kept_up" in bad:
        rec.detail = f"failed trace_kept_up: {measured.failed_check}; {rec.detail}"
