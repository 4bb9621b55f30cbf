"""stress_tests workflow entry: load points (single / multiple / custom / endurance, and a benchmarks
workload run as a stress point: ``stress_tests/workload.py``) and the SLO capacity search, against a
live server, with the benchmark client.

    python -m stress_tests.run_stress_tests --run-dir RUN_DIR --model-spec-json PATH --server-url URL \
        --workflow-args-json '{"mode": "smoke", "run_mode": "single,capacity", "slo": "ttft_p99:2000,tpot_p99:150"}'

Writes RUN_DIR/stress_tests/stress_record.json (every load point), capacity_record.json (the
search), a per-request JSONL per point, and outputs.json. Records are rewritten after every point,
so an interrupted run keeps what it measured. Exit 0 when every record passed, 1 when one failed,
2 on bad input. Keys: ``stress_tests/args.py``.

Its --workflow-args keys are declared in contracts.workflow_keys (STRESS_ARGS).
"""
from __future__ import annotations

import datetime as dt
import json
import math
import os
import sys
import time
from pathlib import Path

from contracts.client_main import BadInput, ClientInvocation, StopSignals, run_client
from contracts.model_spec import ModelSpec
from stress_tests import resume
from stress_tests.args import WORKFLOW_ARG_KEYS, StressArgError, StressArgs, parse_stress_args

__all__ = ["WORKFLOW_ARG_KEYS", "main"]
# The performance tier whose targets become the default SLOs: the functional tier, the bar every
# model status must meet, so the capacity judgement never asks more than the release itself does.
DEFAULT_SLO_TIER = "functional"
POOL_SIZE = 32


# Signals of the running invocation (contracts.client_main.StopSignals): the handler only records
# them; the loads poll ``interrupted()`` and wind down, so the event loop is never unwound by an
# exception from inside a callback and the records stay whole.
_STOP: list[StopSignals] = []


def watch_signals(stop: StopSignals) -> None:
    """Make ``interrupted()`` follow this invocation's signals."""
    _STOP[:] = [stop]


def interrupted() -> bool:
    return bool(_STOP) and _STOP[0].requested


def _log(msg: str) -> None:
    print(f"[stress_tests] {msg}", flush=True)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class Budget:
    """The workflow's time budget (``budget_s``) and the stop signal, shared by the LLM and media runs."""

    def __init__(self, budget_s: float | None) -> None:
        self.deadline = time.monotonic() + budget_s if budget_s else None

    def remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def out_of_time(self) -> bool:
        """The budget ran out, or a signal asked us to stop."""
        return interrupted() or (self.deadline is not None and time.monotonic() >= self.deadline)


def write_requests(out_dir: Path, run_dir: Path, stem: str, records) -> str:
    """``<out_dir>/<stem>.requests.jsonl``, one request a line, replaced atomically; its path relative to the run."""
    path = out_dir / f"{stem}.requests.jsonl"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(r.to_json()) + "\n" for r in records))
    tmp.replace(path)
    return path.relative_to(run_dir).as_posix()


class Context(Budget):
    """The server, the client settings and the run's time budget."""

    def __init__(self, invocation: ClientInvocation, args: StressArgs):
        self.invocation = invocation
        self.run_dir = invocation.run_dir
        self.out_dir = invocation.out_dir
        self.spec, self.args = invocation.spec, args
        self.base_url = invocation.server_url
        self.api_key = invocation.api_key
        self.model = invocation.served_model_name
        self.tokenizer_dir = os.environ.get("TT_TOKENIZER_DIR") or None
        self.tokenizer = None
        super().__init__(args.budget_s)
        self.outputs: list[str] = []

    def client_config(self):
        from benchmarking.client import ClientConfig
        return ClientConfig(base_url=self.base_url, endpoint="/v1/completions", model=self.model,
                            api_key=self.api_key, request_timeout_s=600.0, stall_timeout_s=120.0,
                            tokenizer=self.tokenizer)

    def prompts(self, isl: int, n: int, seed: int):
        """Distinct exact-length prompts of a point, at most ``POOL_SIZE`` (cycled when a load sends more)."""
        from benchmarking.prompts import random_prompts
        return random_prompts(self.tokenizer, isl, max(1, min(n, POOL_SIZE)), seed)

    def pool(self, isl: int, osl: int, n: int, seed: int):
        """The point's prompts as ready request bodies."""
        from benchmarking.prompts import request_body
        from benchmarking.runner import WorkItem
        return [WorkItem(request_body(p.text, osl, self.model, chat=False), p.token_len or isl, osl)
                for p in self.prompts(isl, n, seed)]

    def rel(self, path: Path) -> str:
        return path.relative_to(self.run_dir).as_posix()


def _write_requests(ctx: Context, stem: str, records) -> str:
    return write_requests(ctx.out_dir, ctx.run_dir, stem, records)


# ---------------------------------------------------------------------------------------- load points


def run_points(ctx: Context, points, memory) -> "StressRecord":  # noqa: F821
    from benchmarking.tools import ToolUnavailable
    from contracts.server_state import ServerStateSampler
    from stress_tests import tool_point, workload
    from stress_tests.judge import point_record
    from records.stress import StressRecord

    record = StressRecord(model_id=ctx.spec.model_id, server_url=ctx.base_url,
                          size=ctx.args.size, run_modes=[m for m in ctx.args.run_modes if m != "capacity"]
                          + ([f"workload={ctx.args.workload}"] if ctx.args.workload else []),
                          started=_now())
    t0 = time.monotonic()
    kept, quiet = resume.finished_points(ctx.out_dir), False  # a rerun after a kill keeps what was finished
    for i, p in enumerate(points):
        if p.name in kept:
            _log(f"{p.name}: already finished, skipping (resume)")
            keep_point(ctx, record, kept[p.name], t0)
            continue
        if kept and not quiet:
            quiet = resume.quiet_before_measuring(ctx.base_url, ctx.api_key, _log) or True
        if ctx.out_of_time():
            why = "interrupted" if interrupted() else "the workflow's time budget ran out"
            _log(f"{p.name}: {why}; not run")
            record.points.append(_not_run(p, f"{why} before this point"))
            record.write(ctx.out_dir / "stress_record.json")
            continue
        note = f" (rescaled from isl={p.requested_isl} osl={p.requested_osl} to fit the context)" if p.rescaled else ""
        _log(f"{p.name}: running{note}" + (f" with {ctx.args.tool}" if ctx.args.tool != "ours" else ""))
        started = _now()
        sampler = ServerStateSampler(ctx.base_url, ctx.api_key).start()  # the server's side of the same seconds
        try:
            run, extra = _send(ctx, p, i, memory)
        except ToolUnavailable as exc:  # never sent by our client instead: the point is not run, the run fails
            run, extra = None, str(exc)
        finally:
            state = sampler.stop()
        if run is None:
            _log(f"{p.name}: NOT RUN: {extra}")
            skipped = _not_run(p, str(extra))
            tool_point.name_tool(skipped, ctx.args.tool)
            keep_point(ctx, record, skipped, t0)
            continue
        rec = point_record(p.name, p.mode, p, run, ctx.args, started, memory.kind, memory.what)
        rec.server_state = state
        if isinstance(p, workload.WorkloadStressPoint):
            workload.judge_workload(rec, extra)
            for w in extra.warnings:
                _log(f"WARNING {p.name}: {w}")
        elif extra is not None:
            tool_point.name_tool(rec, ctx.args.tool, extra)
            for w in rec.warnings or []:
                _log(f"NOTE {p.name}: {w}")
        rec.requests_file = _write_requests(ctx, p.name, run.records)
        rec.interrupted = True if interrupted() else None
        keep_point(ctx, record, rec, t0)
    return record


def _send(ctx: Context, p, i: int, memory):
    """Send one point: (its ``LoadRun``, what else its sender returned). A benchmarks workload is sent by its
    own code (stress_tests/workload.py), a fixed-size point by the tool= tool (stress_tests/tool_point.py,
    raising ``ToolUnavailable`` when it cannot) or by our driver, watched by the saturation detector."""
    from stress_tests import tool_point, workload
    from stress_tests.driver import Load, drive
    from stress_tests.saturation import SaturationDetector

    if isinstance(p, workload.WorkloadStressPoint):
        return workload.measure(ctx, p, lambda: ctx.invocation.stop.signum)
    if ctx.args.tool != "ours":
        texts = [x.text for x in ctx.prompts(p.isl, p.num_prompts or POOL_SIZE, seed=1000 + i)]
        out_dir = tool_point.raw_dir(str(ctx.out_dir), ctx.args.tool, p.name)
        return tool_point.measure(ctx, p, ctx.args.tool, texts, out_dir, 1000 + i, _log)
    pool = ctx.pool(p.isl, p.osl, p.num_prompts or POOL_SIZE, seed=1000 + i)
    # Endurance runs its whole length: its drift checks judge a rising latency, a stop would cut it short.
    detector = (SaturationDetector(window_s=max(10.0, 4 * ctx.args.window_s), closed_loop=True)
                if ctx.args.saturation and p.mode != "endurance" else None)
    run = drive(ctx.client_config(), pool, Load(p.concurrency, p.num_prompts or None, p.duration_s),
                tag=p.name, window_s=ctx.args.window_s, detector=detector,
                memory=memory.read if p.duration_s else None, budget_s=ctx.remaining(), should_stop=interrupted)
    return run, None


def keep_point(ctx, record, rec, t0: float) -> None:
    """Add a point to the run's record and rewrite it (LLM and media alike): an interrupted run keeps every
    point it measured; a point not run (no requests file) fails the record."""
    if rec.requests_file:
        ctx.outputs.append(rec.requests_file)
    record.points.append(rec)
    _log(f"{rec.name}: {rec.status}: {rec.detail}")
    _finish_stress(record, time.monotonic() - t0)
    record.write(ctx.out_dir / "stress_record.json")


def _not_run(p, why: str):
    from records.stress import StressPointRecord
    return StressPointRecord(name=p.name, mode=p.mode, isl=p.isl, osl=p.osl, concurrency=p.concurrency,
                             num_prompts=p.num_prompts, duration_target_s=p.duration_s, status="not_run",
                             passed=False, detail=why)


def _finish_stress(record, duration: float) -> None:
    """Roll the points up: failed when one failed (or none ran), inconclusive when one could not be decided."""
    record.duration_s = round(duration, 3)
    bad = [p.name for p in record.points if p.passed is False]
    undecided = [p.name for p in record.points if p.passed is None]
    record.passed = False if bad or not record.points else None if undecided else True
    record.status = {False: "failed", None: "inconclusive", True: "passed"}[record.passed]
    passed = len(record.points) - len(bad) - len(undecided)
    record.detail = f"{passed}/{len(record.points)} load points passed" + (
        "; failing: " + ", ".join(bad[:6]) if bad else "") + (
        "; inconclusive: " + ", ".join(undecided[:6]) if undecided else "")


# ---------------------------------------------------------------------------------------- capacity


def default_slos(spec: ModelSpec):
    """SLOs from the spec's highest-concurrency perf reference at the functional tier, and its target.

    Returns (slos, source, target concurrency, isl, osl) or Nones when the spec has no such target.
    """
    from stress_tests.args import Slo
    refs = [r for r in spec.device_model_spec.perf_reference if (r.task_type or "text") == "text"]
    tier = DEFAULT_SLO_TIER
    for ref in sorted(refs, key=lambda r: -int(r.max_concurrency or 0)):
        t = ref.targets.get(tier)
        slos = []
        if t is not None and t.ttft_ms:
            slos.append(Slo("ttft", 99, float(t.ttft_ms)))
        if t is not None and t.tput_user:
            slos.append(Slo("tpot", 99, round(1000.0 / float(t.tput_user), 3)))
        if slos:
            src = (f"the spec's {tier} tier at isl={ref.isl} osl={ref.osl} con={ref.max_concurrency} "
                   f"(ttft_ms -> ttft_p99, 1000/tput_user -> tpot_p99)")
            return slos, src, float(ref.max_concurrency), int(ref.isl), int(ref.osl)
    return None, None, None, None, None


def run_capacity(ctx: Context) -> "CapacityRecord":  # noqa: F821
    from stress_tests.capacity import LevelSamples, level_samples, request_is_good
    from stress_tests.driver import STOPPED_EARLY, Load, drive
    from records.stress import CapacityRecord
    from stress_tests.saturation import SaturationDetector

    a, spec = ctx.args, ctx.spec
    spec_slos, spec_src, spec_target, ref_isl, ref_osl = default_slos(spec)
    slos = a.slos or spec_slos
    record = CapacityRecord(model_id=spec.model_id, metric=a.capacity_metric,
                            goodput_goal=a.goodput)
    if not slos:
        record.status, record.passed = "failed", False
        record.detail = record.stop_reason = "no SLOs: pass slo=... (the spec has no latency targets to use)"
        return record
    record.slos = [f"{s.key}:{s.limit_ms:g}" for s in slos]
    record.slo_source = "workflow args (slo=)" if a.slos else spec_src
    if a.capacity_target is not None:
        record.target, record.target_source = a.capacity_target, "workflow args (capacity_target=)"
    elif not a.slos and spec_target is not None:
        record.target, record.target_source = spec_target, spec_src
    record.isl = a.input_size or ref_isl or 128
    record.osl = a.output_size or ref_osl or 32
    spec_con = int(spec.device_model_spec.max_concurrency or 1)
    integer = a.capacity_metric == "concurrency"
    if integer:
        record.start, record.resolution = int(a.capacity_start or 1), 1
        record.ceiling = a.capacity_max or max(spec_con * {"smoke": 1, "ci": 2, "full": 8}[a.size],
                                               record.target or 0)
    else:
        record.start, record.resolution = a.capacity_start or 0.25, 0.1
        record.ceiling = a.capacity_max or max(float(4 * spec_con), record.target or 0)
    pool = ctx.pool(record.isl, record.osl, POOL_SIZE, seed=77)
    per_level = {"smoke": 2, "ci": 4, "full": 8}[a.size]

    def measure(level: float) -> LevelSamples:
        if integer:
            n = a.requests_per_level or max(4, per_level * int(level))
            load = Load(int(level), n)
        else:
            n = a.requests_per_level or max(8, math.ceil(level * 10 * per_level / 2))
            load = Load(max(4 * spec_con, 16), n, request_rate=level)
        detector = SaturationDetector(closed_loop=integer) if a.saturation else None
        _log(f"capacity: {a.capacity_metric} {level:g}: {n} requests")
        run = drive(ctx.client_config(), pool, load, tag=f"capacity-{level:g}", detector=detector,
                    budget_s=ctx.remaining(), should_stop=interrupted)
        def add(s: LevelSamples, r) -> None:
            values = {"ttft": r.ttft * 1000, "tpot": r.tpot * 1000 if r.tpot is not None else None,
                      "e2el": r.latency * 1000}
            s.ttft_ms.append(values["ttft"])
            s.e2el_ms.append(values["e2el"])
            if values["tpot"] is not None:
                s.tpot_ms.append(values["tpot"])
            s.itl_ms += [g * 1000 for g in r.itls]
            s.good += request_is_good(values, [x for x in slos if x.metric != "itl"])

        return level_samples(run, add, STOPPED_EARLY)

    return search_into_record(record, measure, slos, a, integer, ctx.out_of_time, ctx.out_dir,
                              unit="" if integer else " req/s")


def search_into_record(record, measure, slos, a: StressArgs, integer: bool, out_of_time, out_dir: Path,
                       unit: str):
    """Run the capacity search with ``measure`` and fill ``record`` (a CapacityRecord): every level, the
    answer and the judgement. Shared by LLM and media runs; the record is rewritten after each level,
    so an interrupted search keeps the curve so far."""
    from records.stress import CapacityLevel, find_cliff
    from stress_tests.capacity import search_capacity

    def level_record(j) -> CapacityLevel:
        return CapacityLevel(level=j.level, holds=j.holds, marginal=j.marginal, goodput=round(j.goodput, 4),
                             goodput_ci_low=round(j.goodput_ci[0], 4), goodput_ci_high=round(j.goodput_ci[1], 4),
                             slo_values_ms={k: (None if v is None else round(v, 2))
                                            for k, v in j.slo_values_ms.items()},
                             goodput_decision=j.goodput_decision,
                             sent=j.sent, failed=j.failed, repeats=j.repeats, duration_s=round(j.duration_s, 2),
                             items_per_s=round(j.items / j.duration_s, 4) if j.items and j.duration_s else None,
                             reason=j.reason)

    def on_level(j) -> None:
        """Log the level and rewrite the record with the curve so far: an interrupted search keeps it."""
        _log(f"capacity: {record.metric} {j.level:g}: {j.reason}")
        record.levels.append(level_record(j))
        record.search_wall_s = round(time.monotonic() - t0, 2)
        record.detail = f"interrupted after {len(record.levels)} level(s); the curve so far is in levels"
        record.write(out_dir / "capacity_record.json")

    t0 = time.monotonic()
    result = search_capacity(measure, slos, goal=a.goodput, start=record.start, ceiling=record.ceiling,
                             integer=integer, resolution=record.resolution, out_of_time=out_of_time,
                             on_level=on_level, target=record.target, above_target=a.size == "full")
    record.search_wall_s = round(time.monotonic() - t0, 2)
    record.levels = [level_record(j) for j in result.levels]
    record.capacity = result.capacity
    record.bracket_held, record.bracket_failed = result.bracket
    record.converged, record.stop_reason = result.converged, result.stop_reason
    record.undecided_level = result.undecided
    record.cliff = find_cliff(record.levels, a.goodput)
    answer = (f"capacity {result.capacity:g}{unit} ({record.metric}) under {', '.join(record.slos)} "
              f"with goodput >= {a.goodput:.0%}")
    at_capacity = next((lv for lv in record.levels if lv.level == result.capacity and lv.holds), None)
    if record.items_per_request is not None and at_capacity is not None and at_capacity.items_per_s is not None:
        record.capacity_items_per_s = at_capacity.items_per_s
        answer += f" = {at_capacity.items_per_s:g} items/s measured there"
    answer += f"; {result.stop_reason}; {len(result.levels)} levels in {record.search_wall_s:.0f} s"
    if record.cliff:
        answer += f"; {record.cliff}"
    if interrupted():
        record.stop_reason = "interrupted; " + record.stop_reason
    # a budget that ran out above a decided target level leaves the target's answer standing
    target_decided = any(j.level == record.target and (j.holds or not j.marginal) for j in result.levels)
    # With no target the search judges nothing, it measures: a budget that ran out while bisecting
    # above a level that held leaves a lower bound, said as one (a failure would be the host's time,
    # not the server: a finished search with a poor capacity passes too).
    lower_bound = record.target is None and any(j.holds for j in result.levels)
    budget_out = "budget ran out" in result.stop_reason
    ran = bool(result.levels) and not interrupted() and (not budget_out or target_decided or lower_bound)
    if budget_out and lower_bound and not interrupted():
        answer += f"; the budget ran out first: {result.capacity:g}{unit} is a lower bound on the capacity"
    if record.target is not None and result.bracket[1] is None and record.ceiling < record.target:
        answer += f"; target {record.target:g} not judged: the ceiling {record.ceiling:g} is below it"
    elif record.target is not None:
        # the target level is measured first, until its goodput interval decides it (stress_tests/capacity.py)
        at_target = next((j for j in result.levels if j.level == record.target), None)
        undecided = at_target is not None and at_target.marginal and not at_target.holds
        record.target_met = None if undecided else result.capacity >= record.target
        answer += f"; target {record.target:g}: " + (
            f"UNDECIDED ({at_target.sent} requests cannot decide it: more requests, mode=full)" if undecided
            else "met" if record.target_met else "MISSED")
    if ran and record.target_met is None and record.target is not None and record.undecided_level is not None:
        record.passed, record.status = None, "inconclusive"
    else:
        record.passed = ran and record.target_met is not False
        record.status = "passed" if record.passed else "failed"
    record.detail = answer if ran else ("interrupted: " if interrupted() else "search did not finish: ") + answer
    return record


# ---------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    return run_client("stress_tests", "tt-inference-server stress_tests workflow", run, argv, server_required=True)


def run(invocation: ClientInvocation) -> int:
    watch_signals(invocation.stop)
    try:
        args = parse_stress_args(invocation.workflow_args)
        if not invocation.server_url:
            raise StressArgError("--server-url is empty: stress tests need a live server")
        from stress_tests.plan import expand
        from stress_tests.workload import plan as plan_workload
        points = expand(args, invocation.spec) + plan_workload(args, invocation.spec)  # a bad trace: exit 2 here
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    ctx = Context(invocation, args)
    from benchmarking.prompts import load_tokenizer
    from stress_tests.memory import pick_source
    try:
        ctx.tokenizer, note = load_tokenizer(ctx.tokenizer_dir, ctx.base_url, ctx.model, ctx.api_key)
    except Exception as exc:  # noqa: BLE001 - a bad tokenizer dir is bad input
        raise BadInput(f"cannot load tokenizer from TT_TOKENIZER_DIR={ctx.tokenizer_dir}: {exc}") from None
    if note:
        _log(f"NOTE: {note}; prompt lengths are unverified")
    if args.ignored_keys:
        _log(f"ignoring workflow args of other workflows: {', '.join(args.ignored_keys)}")
    memory = pick_source(str(ctx.run_dir), ctx.base_url, ctx.api_key, args.server_container)
    _log(f"model {ctx.model} at {ctx.base_url}; size {args.size}; modes {','.join(args.run_modes)}; "
         f"{len(points)} load point(s); memory from {memory.kind}; budget "
         f"{'none' if args.budget_s is None else f'{args.budget_s:.0f} s'}")
    if args.tool != "ours":
        _log(f"tool={args.tool} sends every load point; the saturation detector does not run (it watches our "
             "client's load as it runs)" + (f"; not run: {', '.join(args.tool_left_out)} (needs our client, "
                                             "tool=ours)" if args.tool_left_out else ""))
    return run_all(invocation, ctx, points, memory, run_points, run_capacity)


def run_all(invocation, ctx, points, memory, measure_points, measure_capacity) -> int:
    """The load points, then the capacity search (LLM and media alike): the records and outputs.json are
    written whatever happens; exit 1 when a record failed (an inconclusive one is shown, for the release
    verdict to weigh), 128+N on signal N."""
    failed = False
    try:
        if points:
            stress = measure_points(ctx, points, memory)
            ctx.outputs.append("stress_tests/stress_record.json")
            failed |= stress.passed is False
        if "capacity" in ctx.args.run_modes and not interrupted():
            cap = measure_capacity(ctx)
            cap.write(ctx.out_dir / "capacity_record.json")
            ctx.outputs.append("stress_tests/capacity_record.json")
            _log(f"capacity: {cap.status}: {cap.detail}")
            failed |= not cap.passed
    finally:
        invocation.write_outputs(ctx.outputs)
    if interrupted():
        _log(f"interrupted by {invocation.stop.name}: the records keep what was measured")
        return invocation.stop.exit_code
    _log("FAILED: see the records above" if failed else "PASSED (inconclusive checks, if any, are named above)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
