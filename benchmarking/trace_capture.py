"""Warm-up ("trace capture") for a server before anything is measured (stdlib only).

Tenstorrent servers compile a trace per padded prefill length on first use; timing a point whose
shape was never seen would measure compilation. So one exact-length streaming completion per
distinct (isl, osl) is sent before timing, smallest first.

This is the one warm-up routine: the orchestrator runs it once per run (then tells every client
workflow ``--disable-trace-capture``), and ``run_benchmarks.py`` run on its own calls it too. It
uses the measuring client, so a server that accepts a request and then says nothing ends the
warm-up within the stall timeout instead of hanging it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from benchmarking.bench_args import WORKFLOW_ARG_KEYS, parse_workflow_args
from contracts.model_spec import ModelSpec
from benchmarking.sweeps import build_points

# Failure classes that mean the server is silent or unreachable: every later request would wait
# just as long, so the warm-up stops at the first one.
SILENT_CLASSES = frozenset({"timeout", "stall", "stall_timeout", "connect_error"})


@dataclass(frozen=True)
class WarmupPlan:
    """What to warm and how long a silent server may keep one request waiting."""

    pairs: list[tuple[int, int]]
    stall_timeout_s: float
    request_timeout_s: float


@dataclass
class WarmupOutcome:
    """One warm-up request: a log line, and whether it shows the server is silent (fatal)."""

    isl: int
    osl: int
    success: bool
    line: str
    silent: bool = False


def warmup_pairs(spec: ModelSpec, workflow_args: dict) -> list[tuple[int, int]]:
    """Distinct (isl, osl) pairs, ascending, that this benchmarks run will measure."""
    return plan_warmup(spec, workflow_args).pairs


def plan_warmup(spec: ModelSpec, workflow_args: dict) -> WarmupPlan:
    """The pairs the benchmarks will measure, with the benchmarks' own timeouts."""
    # keys of other workflows are the orchestrator's business; plan with the ones we know
    known = {k: str(v) for k, v in (workflow_args or {}).items() if k in WORKFLOW_ARG_KEYS}
    args = parse_workflow_args(known)
    if args.workload:  # a workload's points, not the sweep's (a trace: its mean lengths)
        from benchmarking import workloads
        points = workloads.points(spec, args)
    else:
        points = build_points(spec, args)
    pairs = sorted({(p.isl, p.osl) for p in points})
    return WarmupPlan(pairs, float(args.stall_timeout_s), float(args.request_timeout_s))


def warm_up(config, pairs: list[tuple[int, int]], tokenizer=None,
            log: Callable[[str], None] = print) -> list[WarmupOutcome]:
    """One exact-length streaming completion per distinct (isl, osl), smallest first.

    ``config`` is a ``benchmarking.client.ClientConfig`` (its ``stall_timeout_s`` bounds the silence
    of each request). Failures are logged and returned; the first silent one stops the warm-up.
    """
    from benchmarking.prompts import random_prompts, request_body
    from benchmarking.runner import WorkItem, run_point

    outcomes: list[WarmupOutcome] = []
    url = config.base_url.rstrip("/") + config.endpoint
    for isl, osl in sorted({(int(i), int(o)) for i, o in pairs}):
        prompt = random_prompts(tokenizer, isl, 1, seed=10_000 + isl)[0]
        item = WorkItem(request_body(prompt.text, osl, config.model, config.chat), prompt.token_len or isl, osl)
        rec = run_point(config, [item], [0.0], 1, id_prefix=f"tt-warmup-isl{isl}-osl{osl}").records[0]
        if rec.success:
            tpot = f"{rec.tpot * 1000:.1f} ms" if rec.tpot else "n/a"
            line = f"warm-up isl={isl} osl={osl}: ttft {rec.ttft * 1000:.1f} ms, tpot {tpot}"
            outcomes.append(WarmupOutcome(isl, osl, True, line))
        else:
            silent = rec.error_class in SILENT_CLASSES
            where = "" if url in str(rec.error) else f" at {url}"
            line = f"warm-up isl={isl} osl={osl} failed{where} ({rec.error_class}): {rec.error}"
            outcomes.append(WarmupOutcome(isl, osl, False, line, silent))
        log(outcomes[-1].line)
        if outcomes[-1].silent:
            break
    return outcomes
