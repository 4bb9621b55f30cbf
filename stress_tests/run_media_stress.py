#!/usr/bin/env python3
"""stress_tests for media kinds (speech, embedding, CNN, image): load points, endurance and the SLO
capacity search against a live media server, with the media clients' own requests.

    python -m stress_tests.run_media_stress --run-dir RUN_DIR --model-spec-json PATH --server-url URL \
        --workflow-args-json '{"run_mode": "endurance", "endurance_s": "60"}'

The same ``--workflow-args`` keys as LLM stress runs (``stress_tests/args.py``), read the same
way; what differs is what a request is:

single     one point at max_concurrent (default 1), num_prompts requests
multiple   concurrency {1, 2, max/2, max} of the spec, 4 requests per slot each
custom     custom_concurrency_values (lengths do not apply to media requests: refused)
endurance  max_concurrent (default: the spec's max concurrency) for endurance_s: latency
           percentiles per time slice, error rate and server memory, judged for drift
           (``stress_tests/drift.py``)
capacity   the highest offered load (capacity_metric=rate, the default here: requests/s, open
           loop; or concurrency) at which the latency SLO holds with enough goodput, answered in
           requests/s and items/s (clips, photos, texts or images per second)

The default SLO is the spec's functional-tier latency_p50_ms at concurrency 1 as ``e2el_p50`` (the bar a
release holds the model to), else ``e2el_p99`` at 4 x the median of three unloaded requests measured here;
``slo=e2el_p99:MS`` sets it (``ttft`` is accepted as the same number: a media answer comes whole). Where the
search starts (half the unloaded rate) and how high it may go (4 x max concurrency x the unloaded rate) always
come from those measured requests. Over-saturation stops a point in closed and open loop alike
(``stress_tests/saturation.py``), except endurance, which runs its whole length (its drift checks judge a
rising latency).

During every load point the media server's /metrics is sampled about once a second (queue depth,
batch sizes: ``contracts/server_state.py``, as for LLM points) into the point's ``server_state``.

Writes RUN_DIR/stress_tests/stress_record.json, capacity_record.json, a per-request JSONL per point
and outputs.json, rewritten as it goes. Exit 0 when nothing failed (an undecided drift check is
shown as inconclusive, for the release verdict to weigh), 1 when a record failed, 2 on bad input.
"""
from __future__ import annotations

import math
import statistics
import sys
import time
from dataclasses import dataclass

from contracts.client_main import ClientInvocation
from contracts.model_spec import ModelSpec
from stress_tests.args import Slo, StressArgError, StressArgs, parse_stress_args
from stress_tests.run_stress_tests import (
    Budget, _log, _now, interrupted, keep_point, run_all, search_into_record, watch_signals,
    write_requests)

UNLOADED_SLO_FACTOR = 4.0
DEFAULT_SLO_TIER = "functional"  # as for LLM runs: the bar every model status must meet
CALIBRATION_REQUESTS = 3
SECONDS_PER_RATE_LEVEL = {"smoke": 5.0, "ci": 20.0, "full": 60.0}
MIN_REQUESTS_PER_RATE_LEVEL = {"smoke": 4, "ci": 8, "full": 16}
REQUESTS_PER_SLOT = {"smoke": 2, "ci": 4, "full": 8}
RATE_RESOLUTION = {"smoke": 0.25, "ci": 0.1, "full": 0.05}  # bisection stops at this bracket width / its top


@dataclass(frozen=True)
class MediaStressPoint:
    """One media load point; ``isl``/``osl`` are 0 (the judge's token fields do not apply)."""

    kind: str
    concurrency: int
    num_prompts: int
    mode: str
    duration_s: float | None = None
    isl: int = 0
    osl: int = 0
    requested_isl: int | None = None
    requested_osl: int | None = None

    @property
    def name(self) -> str:
        tail = f"_dur-{self.duration_s:g}s" if self.duration_s else f"_n-{self.num_prompts}"
        return f"{self.mode}_{self.kind}_con-{self.concurrency}{tail}"


def plan_media(args: StressArgs, spec: ModelSpec, kind: str) -> list[MediaStressPoint]:
    """Every load point of the run's modes (capacity plans its own levels)."""
    if args.workload:
        raise StressArgError(f"workload={args.workload} replays LLM traffic (prompts, conversations, prefixes); "
                             f"it does not apply to {kind} requests")
    if args.tool != "ours":
        raise StressArgError(f"tool={args.tool} sends LLM completions; {kind} requests are sent by our media client "
                             "(tool=ours)")
    if args.custom_isl or args.custom_osl or args.input_size or args.output_size:
        raise StressArgError(f"input/output lengths (input_size, output_size, custom_isl_values, custom_osl_values) "
                             f"do not apply to {kind} requests")
    spec_con = max(1, int(spec.device_model_spec.max_concurrency or 1))
    per_slot = REQUESTS_PER_SLOT[args.size]
    con = args.max_concurrent or 1
    points: list[MediaStressPoint] = []
    for mode in args.run_modes:
        if mode == "single":
            points.append(MediaStressPoint(kind, con, args.num_prompts or max(2 * con, 4), mode))
        elif mode in ("multiple", "custom"):
            top = args.max_concurrent or spec_con
            cons = sorted({1, min(2, top), max(1, top // 2), top}) if mode == "multiple" else args.custom_concurrency
            points += [MediaStressPoint(kind, c, args.num_prompts or per_slot * c, mode) for c in cons]
        elif mode == "endurance":
            points.append(MediaStressPoint(kind, args.max_concurrent or spec_con, 0, mode, args.endurance_s))
    unique: dict[str, MediaStressPoint] = {}
    for p in points:
        unique.setdefault(p.name, p)
    return list(unique.values())


def media_slos(args: StressArgs, raw: dict) -> list[Slo]:
    """The SLOs given, checked: a media answer has one latency (e2el; ttft names the same number)."""
    bad = [s.key for s in args.slos if s.metric not in ("e2el", "ttft")]
    if bad:
        raise StressArgError(f"slo {', '.join(bad)}: media requests have one latency; use e2el_p<pct>:<ms>")
    return [Slo("e2el", s.percentile, s.limit_ms) for s in args.slos]


class MediaContext(Budget):
    """The client run (server, kind, model, requests), the stress arguments and the time budget."""

    def __init__(self, run, args: StressArgs, raw: dict) -> None:
        from media_clients.workloads import spec_params
        self.run, self.args, self.raw = run, args, raw
        self.out_dir = run.out_dir("stress_tests")
        self.params = spec_params(run.spec)
        super().__init__(args.budget_s)
        self.outputs: list[str] = []

    def workload(self):
        from media_clients.workloads import workload_for
        return workload_for(self.run.kind, self.params)

    def drive(self, load, tag: str, detector, memory=None):
        from stress_tests.media_driver import drive_media
        return drive_media(self.workload(), self.run.http, self.run.served_model_name, load, tag=tag,
                           window_s=self.args.window_s, detector=detector, memory=memory,
                           budget_s=self.remaining(), should_stop=interrupted)

    def write_requests(self, stem: str, records) -> str:
        return write_requests(self.out_dir, self.run.run_dir, stem, records)


def run_media_points(ctx: MediaContext, points: list[MediaStressPoint], memory):
    from contracts.server_state import ServerStateSampler
    from records.stress import StressPointRecord, StressRecord
    from stress_tests.driver import Load
    from stress_tests.judge import point_record
    from stress_tests.saturation import SaturationDetector

    a = ctx.args
    record = StressRecord(model_id=ctx.run.model_id, server_url=ctx.run.http.base_url, size=a.size,
                          run_modes=[m for m in a.run_modes if m != "capacity"], started=_now())
    t0 = time.monotonic()
    for p in points:
        if ctx.out_of_time():
            why = "interrupted" if interrupted() else "the workflow's time budget ran out"
            _log(f"{p.name}: {why}; not run")
            record.points.append(StressPointRecord(name=p.name, mode=p.mode, concurrency=p.concurrency,
                                                   num_prompts=p.num_prompts, duration_target_s=p.duration_s,
                                                   kind=p.kind, status="not_run", passed=False,
                                                   detail=f"{why} before this point"))
            record.write(ctx.out_dir / "stress_record.json")
            continue
        _log(f"{p.name}: running")
        # Endurance runs its whole length: its drift checks judge a rising latency, a stop would cut it short.
        detector = (SaturationDetector(window_s=max(10.0, 4 * a.window_s), closed_loop=True)
                    if a.saturation and p.mode != "endurance" else None)
        started = _now()
        # the media server's queue depth and batch sizes over the same seconds, as for LLM points
        sampler = ServerStateSampler(ctx.run.http.base_url, ctx.run.http.api_key).start()
        try:
            run = ctx.drive(Load(p.concurrency, p.num_prompts or None, p.duration_s), p.name, detector,
                            memory.read if p.duration_s else None)
        finally:
            state = sampler.stop()
        rec = point_record(p.name, p.mode, p, run, a, started, memory.kind, memory.what, kind=p.kind)
        rec.server_state = state
        rec.requests_file = ctx.write_requests(p.name, run.records)
        keep_point(ctx, record, rec, t0)
    return record


def spec_latency_target(ctx: MediaContext) -> tuple[float | None, str]:
    """(ms, source) of the spec's functional-tier latency_p50_ms at concurrency 1 (the bar a release
    holds the model to), else (None, why not)."""
    for ref in ctx.run.spec.device_model_spec.perf_reference:
        if ref.task_type != ctx.run.kind or int(ref.max_concurrency or 1) != 1:
            continue
        target = (ref.targets.get(DEFAULT_SLO_TIER) or None)
        if target is not None and target.metrics.get("latency_p50_ms"):
            return (float(target.metrics["latency_p50_ms"]),
                    f"the spec's {DEFAULT_SLO_TIER} latency_p50_ms at concurrency 1")
    return None, f"the spec has no {DEFAULT_SLO_TIER} latency_p50_ms at concurrency 1"


def unloaded_latency_ms(ctx: MediaContext) -> float | None:
    """Median ms of a few requests sent one at a time: where the search starts and how high it may go.

    One more request goes first and is not counted: the first request of a kind pays one-off costs
    (the client's lazy imports and first connection, a runner's first forward), and a start set
    from it began the search far below the server's rate and ran out of budget climbing."""
    workload, times = ctx.workload(), []
    for i in range(CALIBRATION_REQUESTS + 1):
        sent = workload.send(ctx.run.http, ctx.run.served_model_name, 10_000 + i)
        if sent.ok and i > 0:
            times.append(sent.answer.elapsed_s * 1000.0)
    return statistics.median(times) if times else None


def run_media_capacity(ctx: MediaContext):
    from records.stress import CapacityRecord
    from stress_tests.capacity import LevelSamples, level_samples, request_is_good
    from stress_tests.driver import STOPPED_EARLY, Load
    from stress_tests.saturation import SaturationDetector

    a, spec = ctx.args, ctx.run.spec
    metric = str(ctx.raw.get("capacity_metric") or "rate")
    record = CapacityRecord(model_id=ctx.run.model_id, metric=metric, goodput_goal=a.goodput)
    unloaded = unloaded_latency_ms(ctx)
    spec_p50, spec_source = spec_latency_target(ctx)
    slos = media_slos(a, ctx.raw)
    if slos:
        record.slo_source = "workflow args (slo=)"
    elif spec_p50 is not None:
        slos = [Slo("e2el", 50, spec_p50)]
        record.slo_source = f"{spec_source} ({spec_p50:g} ms -> e2el_p50)"
    elif unloaded is not None:
        slos = [Slo("e2el", 99, round(UNLOADED_SLO_FACTOR * unloaded, 1))]
        record.slo_source = (f"{UNLOADED_SLO_FACTOR:g} x the median of {CALIBRATION_REQUESTS} unloaded requests "
                             f"measured before the search ({unloaded:.0f} ms; {spec_source})")
    if not slos or unloaded is None:
        record.status, record.passed = "failed", False
        record.detail = record.stop_reason = ("no unloaded request succeeded, so the search has no start" if slos
                                              else f"no SLO: pass slo=e2el_p99:<ms> ({spec_source})")
        return record
    record.slos = [f"{s.key}:{s.limit_ms:g}" for s in slos]
    if a.capacity_target is not None:
        record.target, record.target_source = a.capacity_target, "workflow args (capacity_target=)"
    spec_con = max(1, int(spec.device_model_spec.max_concurrency or 1))
    latency_s = max(unloaded / 1000.0, 1e-3)
    integer = metric == "concurrency"
    if integer:
        record.start, record.resolution = int(a.capacity_start or 1), 1
        record.ceiling = a.capacity_max or max(spec_con * {"smoke": 1, "ci": 2, "full": 8}[a.size], record.target or 0)
    else:
        record.start = a.capacity_start or float(f"{0.5 / latency_s:.3g}")
        record.resolution = RATE_RESOLUTION[a.size]
        record.ceiling = a.capacity_max or max(round(4 * spec_con / latency_s, 3), record.target or 0)
    record.items_per_request = int(ctx.workload().params.get("batch_items", 1)) if ctx.run.kind == "embedding" else 1
    per_slot = REQUESTS_PER_SLOT[a.size]

    def measure(level: float) -> LevelSamples:
        if integer:
            n = a.requests_per_level or max(4, per_slot * int(level))
            load = Load(int(level), n)
            detector = SaturationDetector(closed_loop=True) if a.saturation else None
        else:
            n = a.requests_per_level or max(MIN_REQUESTS_PER_RATE_LEVEL[a.size],
                                            math.ceil(level * SECONDS_PER_RATE_LEVEL[a.size]))
            load = Load(max(4 * spec_con, 16), n, request_rate=level)
            detector = SaturationDetector() if a.saturation else None
        _log(f"capacity: {metric} {level:g}: {n} requests")
        run = ctx.drive(load, f"capacity-{level:g}", detector)
        def add(s: LevelSamples, r) -> None:
            s.e2el_ms.append(r.latency * 1000)
            s.ttft_ms.append(r.latency * 1000)
            s.items += r.output_tokens or 1
            s.good += request_is_good({"e2el": r.latency * 1000}, slos)

        return level_samples(run, add, STOPPED_EARLY)

    return search_into_record(record, measure, slos, a, integer, ctx.out_of_time, ctx.out_dir,
                              unit="" if integer else " req/s")


def main(argv: list[str] | None = None) -> int:
    from contracts.client_main import run_client

    return run_client("stress_tests", "tt-inference-server stress_tests workflow for media kinds", _run, argv,
                      server_required=True)


def _run(invocation: ClientInvocation) -> int:
    from media_clients.common import BadInput, media_run
    from stress_tests.memory import pick_source

    run = media_run(invocation)
    watch_signals(invocation.stop)
    try:
        raw = dict(run.workflow_args)
        args = parse_stress_args(raw)
        media_slos(args, raw)
        points = plan_media(args, run.spec, run.kind)
    except StressArgError as exc:
        raise BadInput(str(exc)) from None
    ctx = MediaContext(run, args, raw)
    memory = pick_source(str(run.run_dir), run.http.base_url, run.http.api_key, args.server_container)
    if args.ignored_keys:
        _log(f"ignoring workflow args of other workflows: {', '.join(args.ignored_keys)}")
    _log(f"{run.kind} model {run.served_model_name} at {run.http.base_url}; size {args.size}; modes "
         f"{','.join(args.run_modes)}; {len(points)} load point(s); memory from {memory.kind}; budget "
         f"{'none' if args.budget_s is None else f'{args.budget_s:.0f} s'}")
    warm = ctx.workload().send(run.http, run.served_model_name, 0)  # unmeasured: first-request costs stay out
    _log(f"warm-up request: {'ok' if warm.ok else warm.error} ({warm.answer.elapsed_s:.2f} s)")
    return run_all(invocation, ctx, points, memory, run_media_points, run_media_capacity)


if __name__ == "__main__":
    sys.exit(main())
