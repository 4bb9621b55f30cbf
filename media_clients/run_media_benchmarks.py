#!/usr/bin/env python3
"""Media benchmarks client: load points per kind, one ``MediaPoint`` record each.

Points: every perf-reference entry of the spec for its kind (those carry targets), then a sweep
over concurrencies {1, 2, max_concurrency} for what those did not cover (image generation load at
several concurrencies; audio real-time factor and latency percentiles; CNN and embeddings
throughput sweeps). ``mode`` sizes it: smoke = the perf-reference points with few requests,
ci = + the sweep, full = + twice the requests.

A perf-reference point that feeds a required target check (a target of a tier the model's status
requires, on a figure the report can put an interval on) is adaptive (``media_clients.load``,
``records.sampling``): it sends ``MIN_DECIDING_SAMPLES`` requests in whole rounds of its concurrency
(full: at least twice the spec's count), fewer cannot decide a target, then further rounds until each
such check is decided on the report's 95% interval, or the precision goal is met, or its sampling budget
(``sample_budget_s``, default smoke 30 s, ci 60 s, full 300 s) or cap (16 x the minimum) ends it;
``precision`` and ``sample_budget_s`` are the benchmarks workflow's keys. A perf-reference point without
such a check sends its fixed count (smoke 2 x concurrency; ci and full at least ``MIN_DECIDING_SAMPLES``,
so its figures still carry intervals) and says so; sweep points send their fixed counts.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from contracts.prometheus import fetch_metrics
from contracts.server_state import ServerStateSampler
from contracts.model_spec import ModelSpec, PerfReference
from media_clients.common import EXIT_FAILED, EXIT_OK, BadInput, ClientRun, log, main_wrapper
from media_clients.load import run_point
from records.judge import required_tiers
from records.media import point_file_name, point_key
from records.reconciliation import media_reconciliation
from records.media_estimates import INTERVAL_FIGURES
from records.sampling import (DEFAULT_PRECISION, DEFAULT_SAMPLE_BUDGETS, SampleGoal, deciding_minimum,
                              goal_checks, sampling_setting)
from media_clients.workloads import spec_params, workload_for

#: The benchmarks workflow's keys this client reads (the others are the LLM benchmark's).
WORKFLOW_ARG_KEYS = frozenset({"precision", "sample_budget_s", "perf_tiers"})
SMOKE_REQUESTS = 2


@dataclass(frozen=True)
class PlannedPoint:
    concurrency: int
    num_requests: int  # the point's minimum when it is adaptive
    params: dict
    source: str
    checks: tuple[tuple[str, str, float], ...] = ()  # the required target checks it feeds (name, figure, target)


def required_checks(spec: ModelSpec, kind: str, ref: PerfReference,
                    perf_tiers: str | None = None) -> list[tuple[str, str, float]]:
    """The verdict's required target checks a perf-reference point feeds, named as verdict.checks names
    them: the targets of the tiers the model's status requires (capped at ``perf_tiers``), on figures that
    can have an interval (``records.media_estimates.INTERVAL_FIGURES``: more requests cannot decide any other)."""
    targets = {tier: dict(target.metrics) for tier, target in ref.targets.items()}
    checks = goal_checks(point_key(kind, int(ref.max_concurrency or 1)), targets,
                         required_tiers(spec.status.name, perf_tiers))
    return [c for c in checks if c[1] in INTERVAL_FIGURES]


def plan_points(spec: ModelSpec, kind: str, mode: str, perf_tiers: str | None = None) -> list[PlannedPoint]:
    dms = spec.device_model_spec
    max_con = max(1, int(dms.max_concurrency or 1))
    base = spec_params(spec)
    points: list[PlannedPoint] = []
    for ref in dms.perf_reference:
        if ref.task_type != kind:
            continue
        con = int(ref.max_concurrency or 1)
        n = int(ref.num_prompts or con)
        checks = tuple(required_checks(spec, kind, ref, perf_tiers))
        if checks:  # adaptive: the fewest requests that can decide, then rounds until decided
            n = -(-max(2 * n, deciding_minimum(con)) // con) * con if mode == "full" else deciding_minimum(con)
        elif mode == "smoke":
            n = max(con, min(n, SMOKE_REQUESTS * con))
        else:
            n = max(n * (2 if mode == "full" else 1), deciding_minimum(con))
        points.append(PlannedPoint(con, n, {**base, **ref.params}, "perf_reference", checks))
    if mode != "smoke" or not points:
        covered = {p.concurrency for p in points}
        for con in sorted({1, min(2, max_con), max_con} - covered):
            n = con * (2 if mode == "smoke" else 4 if mode == "ci" else 8)
            points.append(PlannedPoint(con, n, dict(base), "sweep"))
    return points


def sampling_args(workflow_args: dict[str, str], mode: str) -> tuple[float, float]:
    """(precision, sample budget in s) from ``precision=`` / ``sample_budget_s=``, else the defaults."""
    values: dict[str, float] = {}
    for key in ("precision", "sample_budget_s"):
        raw = workflow_args.get(key)
        if raw:
            try:
                values[key] = sampling_setting(key, raw)
            except ValueError as error:
                raise BadInput(str(error)) from None
    return (values.get("precision", DEFAULT_PRECISION),
            values.get("sample_budget_s", DEFAULT_SAMPLE_BUDGETS.get(mode, DEFAULT_SAMPLE_BUDGETS["ci"])))


def sample_goal(planned: PlannedPoint, precision: float, budget_s: float) -> SampleGoal | None:
    """A perf-reference point's goal (its checks may be none: it then stops at its minimum and says
    so); None for a sweep point, which sends its fixed count in one round."""
    if planned.source != "perf_reference":
        return None
    return SampleGoal(checks=list(planned.checks), min_requests=planned.num_requests,
                      concurrency=planned.concurrency, precision=precision, budget_s=budget_s)


def run(run: ClientRun) -> int:
    out = run.out_dir("benchmarks")
    written: list[Path] = []
    failed_points = 0
    precision, budget_s = sampling_args(run.workflow_args, run.mode)
    plan = plan_points(run.spec, run.kind, run.mode, run.workflow_args.get("perf_tiers") or None)
    log(f"media benchmarks: {run.kind} model {run.served_model_name}, {len(plan)} point(s), mode {run.mode}")
    warm = workload_for(run.kind, plan[0].params if plan else {})
    first = warm.send(run.http, run.served_model_name, 0)  # unmeasured: first-request costs stay out of the figures
    log(f"warm-up request: {'ok' if first.ok else first.error} ({first.answer.elapsed_s:.2f}s)")
    for planned in plan:
        if run.stop.is_set():
            break
        workload = workload_for(run.kind, planned.params)
        sampler = ServerStateSampler(run.invocation.server_url, run.invocation.api_key).start()
        before = fetch_metrics(run.invocation.server_url, run.invocation.api_key)  # reconciled after the point
        try:
            point = run_point(run, workload, planned.concurrency, planned.num_requests, planned.source,
                              sample_goal(planned, precision, budget_s))
        finally:
            state = sampler.stop()  # the server's queue and batches over the same seconds
        point.server_state = state
        if not point.interrupted:
            point.reconciliation = media_reconciliation(
                before, fetch_metrics(run.invocation.server_url, run.invocation.api_key), point.completed,
                point.failed)
            if not point.reconciliation.decides:
                log(f"WARNING point con={planned.concurrency}: {point.reconciliation.why_not}")
        path = point.write(out / point_file_name(run.kind, planned.concurrency))
        written.append(path)
        figures = ", ".join(f"{k} {v:g}" for k, v in point.figures.items() if v is not None)
        log(f"point con={planned.concurrency} n={point.num_requests}: {point.completed} ok, {point.failed} failed"
            f"{' (' + ', '.join(f'{k} {v}' for k, v in point.failures_by_class.items()) + ')' if point.failed else ''}"
            f"; {figures}"
            + (f"; stopped: {point.sampling.stop_reason} ({point.sampling.detail})" if point.sampling else ""))
        if point.failed or point.not_sent:
            failed_points += 1
            if point.first_error:
                log(f"  first failure: {point.first_error}")
    run.write_outputs("benchmarks", written)
    if not written:
        log("no benchmark point ran")
        return EXIT_FAILED
    if failed_points:
        # Counted and classified in the records; the report judges them against max_error_rate.
        log(f"{failed_points} point(s) had failed requests (judged in the report)")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    return main_wrapper(run, argv, __doc__.splitlines()[0], "benchmarks")


if __name__ == "__main__":
    sys.exit(main())
