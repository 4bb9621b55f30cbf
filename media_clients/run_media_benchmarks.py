#!/usr/bin/env python3
"""Media benchmarks client: load points per kind, one ``MediaPoint`` record each.

Points: every perf-reference entry of the spec for its kind (those carry targets), then a sweep
over concurrencies {1, 2, max_concurrency} for what those did not cover (image generation load at
several concurrencies; audio real-time factor and latency percentiles; CNN and embeddings
throughput sweeps). ``mode`` sizes it: smoke = the perf-reference points with few requests,
ci = + the sweep, full = + twice the requests. In ci and full a perf-reference point sends at least
``MIN_DECIDING_SAMPLES`` requests (whole rounds of its concurrency): the report decides each target
on a 95% interval over the point's requests, and fewer cannot decide one.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from contracts.server_state import ServerStateSampler  # noqa: E402
from contracts.model_spec import ModelSpec  # noqa: E402
from media_clients.common import EXIT_FAILED, EXIT_OK, ClientRun, log, main_wrapper  # noqa: E402
from media_clients.load import run_point  # noqa: E402
from records.judge import MIN_DECIDING_SAMPLES  # noqa: E402
from records.media import point_file_name  # noqa: E402
from media_clients.workloads import spec_params, workload_for  # noqa: E402

WORKFLOW_ARG_KEYS = frozenset()
SMOKE_REQUESTS = 2


@dataclass(frozen=True)
class PlannedPoint:
    concurrency: int
    num_requests: int
    params: dict
    source: str


def plan_points(spec: ModelSpec, kind: str, mode: str) -> list[PlannedPoint]:
    dms = spec.device_model_spec
    max_con = max(1, int(dms.max_concurrency or 1))
    base = spec_params(spec)
    points: list[PlannedPoint] = []
    for ref in dms.perf_reference:
        if ref.task_type != kind:
            continue
        con = int(ref.max_concurrency or 1)
        n = int(ref.num_prompts or con)
        if mode == "smoke":
            n = max(con, min(n, SMOKE_REQUESTS * con))
        else:
            n = max(n * (2 if mode == "full" else 1), -(-MIN_DECIDING_SAMPLES // con) * con)
        points.append(PlannedPoint(con, n, {**base, **ref.params}, "perf_reference"))
    if mode != "smoke" or not points:
        covered = {p.concurrency for p in points}
        for con in sorted({1, min(2, max_con), max_con} - covered):
            n = con * (2 if mode == "smoke" else 4 if mode == "ci" else 8)
            points.append(PlannedPoint(con, n, dict(base), "sweep"))
    return points


def run(run: ClientRun) -> int:
    out = run.out_dir("benchmarks")
    written: list[Path] = []
    failed_points = 0
    plan = plan_points(run.spec, run.kind, run.mode)
    log(f"media benchmarks: {run.kind} model {run.served_model_name}, {len(plan)} point(s), mode {run.mode}")
    warm = workload_for(run.kind, plan[0].params if plan else {})
    first = warm.send(run.http, run.served_model_name, 0)  # unmeasured: first-request costs stay out of the figures
    log(f"warm-up request: {'ok' if first.ok else first.error} ({first.answer.elapsed_s:.2f}s)")
    for planned in plan:
        if run.stop.is_set():
            break
        workload = workload_for(run.kind, planned.params)
        sampler = ServerStateSampler(run.invocation.server_url, run.invocation.api_key).start()
        try:
            point = run_point(run, workload, planned.concurrency, planned.num_requests, planned.source)
        finally:
            state = sampler.stop()  # the server's queue and batches over the same seconds
        point.server_state = state
        path = point.write(out / point_file_name(run.kind, planned.concurrency))
        written.append(path)
        figures = ", ".join(f"{k} {v:g}" for k, v in point.figures.items() if v is not None)
        log(f"point con={planned.concurrency} n={planned.num_requests}: {point.completed} ok, {point.failed} failed"
            f"{' (' + ', '.join(f'{k} {v}' for k, v in point.failures_by_class.items()) + ')' if point.failed else ''}"
            f"; {figures}")
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
