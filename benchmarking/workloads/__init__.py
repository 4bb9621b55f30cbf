"""Realistic traffic for the benchmarks workflow: one module per workload behind a small registry.

``--workflow-args "workload=NAME ..."`` picks one (keys declared in ``benchmarking.bench_args``):

* ``trace`` (``trace.py``): replay a timestamped trace (Mooncake JSONL, plain JSONL or CSV); every
  request leaves at its timestamp and its lateness is measured.
* ``multi_turn`` (``multi_turn.py``): conversations whose next turn carries the whole exchange so
  far, the server's answers included, after a think time; TTFT per turn.
* ``shared_prefix`` (``shared_prefix.py``): P system prompts shared by many users; the server's
  prefix-cache hit rate and TTFT with and without the sharing.
* ``agentic`` (``agentic.py``): agent sessions whose turns append user messages or tool results (sized by a
  session file, a bundled one by default) after a think time; TTFT per turn and per session, tokens per
  session, the prefix-cache hit rate.

Each workload turns the run's settings into points (``points(spec, bench)``, refusing bad input
before anything is sent) and measures one (``measure(ctx, point, budget_s, pending_signal)`` ->
``Measured``); ``run_benchmarks.py`` writes every point the same way, so a workload point is an
ordinary point record (``records.bench.BenchPoint``) with its own figures under ``workload``.
Importing this package is stdlib-only; a workload module is imported when its workload runs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from benchmarking.bench_args import WORKLOADS as NAMES
from benchmarking.sweeps import Point
from contracts.model_spec import ModelSpec

_SAFE = re.compile(r"[^A-Za-z0-9_-]+")  # a file stem keeps no dots (dots mark a point's companion files)


@dataclass
class WorkloadPoint(Point):
    """A point run by a workload; its files are named after the workload so they never collide
    with (or resume as) a plain point of the same shape."""

    workload: str = ""
    data: object | None = None      # what the workload needs to run the point (e.g. the checked trace)
    label: str = ""                 # what was replayed (a trace's file name): another trace never resumes as this
    span_s: float = 0.0             # seconds from the first release to the last (a trace), added to the point's budget

    @property
    def stem(self) -> str:
        name = self.workload + (f"-{_SAFE.sub('-', self.label)}" if self.label else "")
        return f"point_{name}_isl-{self.isl}_osl-{self.osl}_con-{self.max_concurrency}_n-{self.num_prompts}"


@dataclass
class Measured:
    """What a workload measured at one point, handed to the writer of the point record."""

    run: object                                  # runner.PointRun (records, duration, not_sent, ...)
    prompt_check: dict
    summary: dict                                # the record's ``workload`` field
    warnings: list[str] = field(default_factory=list)
    failed_check: str | None = None              # a check of the workload itself failed (exit 1)


def _trace():
    from benchmarking.workloads import trace
    return trace


def _multi_turn():
    from benchmarking.workloads import multi_turn
    return multi_turn


def _shared_prefix():
    from benchmarking.workloads import shared_prefix
    return shared_prefix


def _agentic():
    from benchmarking.workloads import agentic
    return agentic


#: workload name -> its module, imported when its workload runs (each imports the client).
REGISTRY = {"trace": _trace, "multi_turn": _multi_turn, "shared_prefix": _shared_prefix, "agentic": _agentic}


def module(name: str):
    """The module implementing workload ``name`` (one of ``NAMES``)."""
    if name not in NAMES or name not in REGISTRY:
        raise ValueError(f"workload={name!r}: expected one of {', '.join(NAMES)}")
    return REGISTRY[name]()


def points(spec: ModelSpec, bench) -> list[Point]:
    """The points workload ``bench.workload`` runs; raises ValueError (exit 2) on bad input."""
    return module(bench.workload).points(spec, bench)


def measure(ctx, point: WorkloadPoint, budget_s: float | None, pending_signal) -> Measured:
    return module(point.workload).measure(ctx, point, budget_s, pending_signal)


def latency_stats(values_s: list[float]) -> dict:
    """n, mean with its 95% bootstrap interval, median and p90 of latencies given in seconds (ms out)."""
    from contracts.intervals import bootstrap_ratio, percentile
    ms = [v * 1000.0 for v in values_s]
    if not ms:
        return {"n": 0, "mean_ms": None, "mean_ci95_ms": None, "p50_ms": None, "p90_ms": None}
    ci = bootstrap_ratio(ms, [1.0] * len(ms)) if len(ms) > 1 else None
    return {"n": len(ms), "mean_ms": round(sum(ms) / len(ms), 3),
            "mean_ci95_ms": ci.as_list(3) if ci else None,
            "p50_ms": round(percentile(ms, 50), 3), "p90_ms": round(percentile(ms, 90), 3)}


def prompt_check(prompts, tokenizer) -> dict:
    """The point's prompt length check (``prompts.length_check``), naming the text they were cut from."""
    from benchmarking.prompts import length_check
    return {**length_check(prompts, tokenizer), "text_source": "repository documents"}
