"""What every point measurement of the benchmarks workflow shares: the run's context, prompts and request
bodies, one round of requests, the adaptive sample goal, the point's parameters and its judge call, and the
console and file helpers.

Why a module of its own: two modules measure points (``run_benchmarks``: our client's sweep points and the
side-by-side ``vllm bench serve`` run; ``tool_points``: another load generator's points and the agreement blocks),
and both build requests, rounds and records the same way. Third-party packages are imported inside the functions
that need them, so ``run_benchmarks`` still imports with the standard library alone.
"""
from __future__ import annotations

import datetime as dt
import os
import sys

from benchmarking import run_control
from benchmarking.bench_args import BenchArgs
from benchmarking.sweeps import Point
from contracts.client_main import ClientInvocation
from records.bench import BenchPoint, PointParams, point_key
from records.sampling import DEFAULT_SAMPLE_BUDGETS, SampleGoal

def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def atomic_write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def say(text: str) -> None:
    """Print to stdout; a reader that went away must not stop the run writing its files.

    When the orchestrator is SIGKILLed this process gets SIGTERM (parent death) and its stdout pipe
    has no reader: the first write raises BrokenPipeError. From then on stdout goes to /dev/null,
    so the interrupted point, outputs.json and the exit code still come out (exit at 128+N, not 120).
    """
    try:
        print(text, flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def log(msg: str) -> None:
    say(f"[benchmarks] {msg}")


class Context:
    """Everything a point needs that does not change between points."""

    def __init__(self, invocation: ClientInvocation, bench: BenchArgs):
        self.invocation = invocation
        self.run_dir = str(invocation.run_dir)
        self.out_dir = str(invocation.out_dir)
        self.spec = invocation.spec
        self.bench = bench
        self.base_url = invocation.server_url
        self.disable_warmup = invocation.disable_trace_capture
        self.api_key = invocation.api_key
        self.model = invocation.served_model_name
        self.model_id = self.spec.model_id or self.model
        self.stop = invocation.stop  # SIGINT/SIGTERM seen by this process (recorded, acted on between steps)
        self.tokenizer_dir = os.environ.get("TT_TOKENIZER_DIR") or None
        self.tokenizer = None
        self.tokenizer_note = None

    def client_config(self):
        from benchmarking.client import ClientConfig
        b = self.bench
        return ClientConfig(base_url=self.base_url, endpoint=b.endpoint, model=self.model, api_key=self.api_key,
                            request_timeout_s=b.request_timeout_s, stall_timeout_s=b.stall_timeout_s,
                            tokenizer=self.tokenizer)

    def rel(self, path: str) -> str:
        return os.path.relpath(path, self.run_dir)


def prompts(ctx: Context, isl: int, n: int, seed: int):
    from benchmarking import prompts as P
    b = ctx.bench
    if b.dataset == "jsonl":
        return P.jsonl_prompts(b.dataset_path, n, ctx.tokenizer)
    if b.dataset == "shared_prefix":
        return P.shared_prefix_prompts(ctx.tokenizer, isl, n, b.shared_prefix_len, seed)
    if b.dataset == "lookup":
        from benchmarking.lookup_prompts import lookup_prompts
        return lookup_prompts(ctx.tokenizer, isl, n, seed)
    return P.random_prompts(ctx.tokenizer, isl, n, seed)


def items(ctx: Context, prompt_list, osl: int):
    from benchmarking.prompts import request_body
    from benchmarking.runner import WorkItem
    chat = ctx.bench.endpoint.endswith("chat/completions")
    return [WorkItem(request_body(p.text, osl, ctx.model, chat, ctx.bench.body_fields),
                     p.token_len or p.intended_len, osl) for p in prompt_list]


def warm_up(ctx: Context, pairs: list[tuple[int, int]]) -> str | None:
    """Trace capture (benchmarking.trace_capture, the one warm-up routine) when run without the
    orchestrator. Returns "silent" when the server stalled or refused (the run cannot go on), else None."""
    from benchmarking.trace_capture import warm_up as capture
    outcomes = capture(ctx.client_config(), pairs, ctx.tokenizer, log=log)
    return "silent" if any(o.silent for o in outcomes) else None


def send_round(ctx: Context, point: Point, work, warm, seed: int, budget_s: float | None, prefix: str):
    """One round of independent prompts at the point's concurrency and arrival rate."""
    from benchmarking.arrivals import release_offsets
    from benchmarking.runner import run_point
    b = ctx.bench
    offsets = release_offsets(len(work), b.request_rate, b.burstiness, b.ramp, seed=seed)
    run = run_point(ctx.client_config(), work, offsets, point.max_concurrency, warm, budget_s,
                    id_prefix=prefix, stop_on_signals=True, pending_signal=lambda: ctx.stop.signum)
    if any(offsets):  # an open loop: each row says how long after its arrival time the request left
        for rec in run.records:
            if not rec.warmup:
                rec.scheduled_time = run.origin + offsets[int(rec.request_id.rsplit("-", 1)[1])]
    return run


def sample_goal(ctx: Context, point: Point, budget_s: float | None) -> SampleGoal:
    """The required target checks this point feeds and the bounds of its adaptive sample size."""
    from records.judge import required_tiers
    b = ctx.bench
    sample_budget = b.sample_budget_s or DEFAULT_SAMPLE_BUDGETS[b.mode]
    if budget_s is not None:
        sample_budget = min(sample_budget, budget_s / 2)  # a round must never be cut by the point budget
    checks = run_control.goal_checks(point_key(point.isl, point.osl, point.max_concurrency), point.targets,
                                     required_tiers(ctx.spec.status.name, b.perf_tiers))
    if getattr(point, "requirement_checks", None) is not None:  # a requirements document is the run's contract
        checks = list(point.requirement_checks)
    return SampleGoal(checks=checks, min_requests=point.num_prompts, concurrency=point.max_concurrency,
                      users=min(point.max_concurrency, point.num_prompts), precision=b.precision,
                      budget_s=sample_budget)


def point_params(point: Point, b: BenchArgs, **extra) -> PointParams:
    return PointParams(isl=point.isl, osl=point.osl, max_concurrency=point.max_concurrency,
                       num_prompts=point.num_prompts,
                       request_rate="inf" if b.request_rate == float("inf") else b.request_rate,
                       burstiness=b.burstiness, endpoint=b.endpoint, source=point.source, **extra)


def judge(ctx: Context, point: Point, record: BenchPoint, ttfts_ms: list[float] | None = None,
           tpots_ms: list[float] | None = None) -> None:
    """The release judge's verdict per tier on this point (records.judge.check_tier, the same function
    the report uses), stored with the point for the console table. With the point's per-request values,
    each tier also carries the report's one decision (``decision``: every target decided on its interval,
    ``records.judge.target_estimates``; a point whose error rate fails fails every tier), so the console
    never shows a point value's pass where the report says the interval cannot tell."""
    from records.judge import (TARGET_CHECKS, check_tier, max_error_rate, required_tiers, target_decision,
                               target_estimates, tier_decision)
    allowed, _ = max_error_rate(ctx.spec)
    required = required_tiers(ctx.spec.status.name, ctx.bench.perf_tiers)
    record.targets = {tier: check_tier(tier, tier in required, targets, record, allowed).to_dict()
                      for tier, targets in (point.targets or {}).items() if isinstance(targets, dict)}
    if ttfts_ms is None or tpots_ms is None:
        return
    estimates = target_estimates(ttfts_ms, tpots_ms, record.point.users)
    for tier in record.targets.values():
        decisions = [target_decision(key, estimates[key].interval, tier[key]) for key in TARGET_CHECKS
                     if tier.get(key) is not None]
        if tier.get("error_rate_pass") is False:
            decisions.append("fail")
        tier["decision"] = tier_decision(decisions, True)
        if record.reconciliation is not None and not record.reconciliation.decides and tier["decision"]:
            tier["decision"] = "inconclusive"  # the report's rule (records.judge_benchmarks.tier_target_checks)
