"""Benchmarks workflow entry: warm up, run each sweep point with our client, judge against targets.

    python -m benchmarking.run_benchmarks --run-dir RUN_DIR --model-spec-json PATH \
        --server-url URL --workflow-args-json '{"mode": "smoke"}' [--disable-trace-capture]

Writes RUN_DIR/benchmarks/point_isl-*_osl-*_con-*_n-*.json (schema tt-bench-point/1), a
`.requests.jsonl` beside each (one row per request, warm-up rows flagged), a `.prom.json` with
/metrics snapshots when the server has them, and outputs.json; with ``agreement=TOOL`` a
``.agreement.json`` per judged point (benchmarking/tool_points.py), measured after the sweep. A point whose
complete summary already exists is skipped (resume); one written partial by an interrupt is measured again. Exit 0
when every point ran and completed at least one request, 1 when some point failed entirely, was cut
by the sweep budget or not run because the server went silent (the others are kept), 2 on bad
input, 128+N on signal N (the interrupted point is kept as partial). Stop rules, budgets and the
closing lines: benchmarking/run_control.py.

Its --workflow-args keys are declared in contracts.workflow_keys (BENCHMARK_ARGS); the client and
tokenizer are imported when main() runs.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time

from benchmarking.bench_args import WORKFLOW_ARG_KEYS, parse_workflow_args
from benchmarking import point_run
from benchmarking.point_run import Context
from benchmarking.tool_points import agreement_pass, agreement_points, run_tool_point
from records.bench import BenchMetrics, BenchPoint
from records.bench_timeline import workload_lines
from contracts.typed_record import RecordError
from contracts.cpu_cost import probe_for_run
from contracts.client_main import BadInput, ClientInvocation, StopSignals, run_client
from benchmarking import reconcile, run_control, spec_decode_point
from records.spec_decode import summary_line
from benchmarking.sweeps import Point, build_points

__all__ = ["WORKFLOW_ARG_KEYS", "main"]
# default budgets (s) per mode: (per point, whole sweep); workflow args override
DEFAULT_BUDGETS = {"smoke": (120.0, 600.0), "ci": (900.0, 3600.0), "full": (7200.0, None)}




def _measure_sweep_point(ctx: Context, point: Point, budget_s: float | None):
    """Independent prompts at the point's concurrency and arrival rate (no workload), in rounds:
    the minimum first, then more while ``run_control.sampling_stop`` says a required target check
    is undecided (adaptive sample size). Returns the measurement and its ``PointSampling``."""
    from benchmarking.prompts import length_check
    from benchmarking.workloads import Measured
    from records.bench import PointSampling
    b = ctx.bench
    seed = b.seed + point.isl * 7 + point.osl
    prompts = point_run.prompts(ctx, point.isl, point.num_prompts + b.warmup_requests, seed=seed)
    check = length_check(prompts, ctx.tokenizer)
    items = point_run.items(ctx, prompts, point.osl)
    warm, items = items[:b.warmup_requests], items[b.warmup_requests:]
    prefix = f"tt-{point.isl}-{point.osl}-{point.max_concurrency}"
    started = time.monotonic()
    run = point_run.send_round(ctx, point, items, warm, b.seed, budget_s, prefix)
    goal = point_run.sample_goal(ctx, point, budget_s)
    rounds = 1
    while True:
        measured = [r for r in run.records if not r.warmup and r.error_class != "interrupted"]
        ok = [r for r in measured if r.success]
        state = run_control.sampling_stop(
            goal, [r.ttft * 1000.0 for r in ok], [r.tpot * 1000.0 for r in ok if r.tpot is not None],
            sent=len(measured), failed=len(measured) - len(ok), elapsed_s=run.duration,
            cut_short=bool(run.interrupted or run.budget_exhausted or run.stopped_by or run.not_sent))
        left = None if budget_s is None else budget_s - (time.monotonic() - started)
        if (state.stop_reason is None and left is not None
                and left < 2 * run.duration / max(1, len(measured)) * state.next_round):
            state.stop_reason, state.detail = "sample_budget", f"{state.detail}; the point's time budget is too short"
        if state.stop_reason is not None:
            break
        point_run.log(f"{point.stem}: round {rounds + 1}: {state.detail}")
        round_prompts = point_run.prompts(ctx, point.isl, state.next_round, seed=seed + 7919 * rounds)
        more = point_run.items(ctx, round_prompts, point.osl)
        extra = point_run.send_round(ctx, point, more, None, b.seed + rounds, left, f"{prefix}-r{rounds + 1}")
        rounds += 1
        for rec in extra.records:
            rec.index = len(run.records)
            run.records.append(rec)
        run.duration += extra.duration
        run.not_sent += extra.not_sent
        run.budget_exhausted = run.budget_exhausted or extra.budget_exhausted
        run.interrupted = run.interrupted or extra.interrupted
        run.stopped_by = run.stopped_by or extra.stopped_by
    sent = sum(1 for r in run.records if not r.warmup)
    sampling = PointSampling(min_requests=point.num_prompts, requests=sent, rounds=rounds,
                             stop_reason=state.stop_reason, precision=goal.precision, budget_s=goal.budget_s,
                             decisions=state.decisions, detail=state.detail)
    return Measured(run=run, prompt_check=check, summary=None), sampling


def run_tt_point(ctx: Context, point: Point, budget_s: float | None) -> dict:
    """Measure one point with our client and write its files; returns the summary record.

    A workload point (``benchmarking.workloads``) is measured by its workload; every point is
    written the same way, with the server's state sampled once a second beside it."""
    from contracts import prometheus as prom
    from benchmarking.metrics import compute_metrics
    from contracts.server_state import ServerStateSampler
    b = ctx.bench
    stem = os.path.join(ctx.out_dir, point.stem)
    before = prom.fetch_metrics(ctx.base_url, ctx.api_key)
    workers_before = spec_decode_point.before(ctx)  # spec_decode_metrics_url: the workers' counters, same moment
    sampler = ServerStateSampler(ctx.base_url, ctx.api_key).start() if before is not None else None
    probe, watched = probe_for_run(ctx.run_dir)
    probe.start()
    started = point_run.now()
    clock = (time.process_time(), time.monotonic())  # the client's CPU share over the point (reconcile.pacing)
    try:
        measured, sampling = _measure_point(ctx, point, budget_s)
    finally:
        state = sampler.stop() if sampler is not None else None
    cost = probe.stop()
    ended = point_run.now()
    run, check = measured.run, measured.prompt_check
    # requests cut by a signal are not the server's failures: the point is partial, not failed
    finished = [r for r in run.records if r.error_class != "interrupted"]
    reconciliation, after = (None, None) if run.interrupted else \
        reconcile.point(ctx, point, before, finished, clock)
    spec = None if run.interrupted else spec_decode_point.read(ctx, before, after, workers_before)
    metrics = compute_metrics(finished, run.duration, isl=point.isl, osl=point.osl,
                              max_concurrency=point.max_concurrency, num_prompts=point.num_prompts,
                              percentiles=b.percentiles, goodput=b.goodput or None)
    interrupted = signal.Signals(run.interrupted).name if run.interrupted else None
    ctx.stop.signum = ctx.stop.signum or run.interrupted
    warnings = _point_warnings(ctx, point, measured, metrics, finished, budget_s, interrupted) \
        + reconcile.warnings(reconciliation)
    summary = measured.summary
    if summary is not None:
        summary["failed_check"] = measured.failed_check
    requests_path = stem + ".requests.jsonl"
    point_run.atomic_write(requests_path, "".join(json.dumps(r.to_json()) + "\n" for r in finished))
    server_metrics = _write_server_metrics(ctx, stem, before, after)
    record = BenchPoint(
        model_id=ctx.model_id, served_model_name=ctx.model, tool="tt-bench",
        point=point_run.point_params(point, b, dataset=getattr(point, "workload", None) or b.workload or b.dataset,
                                     ramp=list(b.ramp) if b.ramp else None, warmup_requests=b.warmup_requests),
        started=started, ended=ended, metrics=BenchMetrics.from_dict(metrics),
        requests_file=ctx.rel(requests_path), prompt_check=check, percentiles=b.percentiles,
        goodput_slos=b.goodput or None, budget_exhausted=run.budget_exhausted, not_sent=run.not_sent,
        server_metrics=server_metrics, warnings=warnings, interrupted=interrupted, complete=interrupted is None,
        workload=summary, server_state=state, sampling=sampling, reconciliation=reconciliation,
        spec_decode=spec)
    record.set_cost(cost, watched)
    ok = [r for r in finished if r.success and not r.warmup]
    point_run.judge(ctx, point, record, [r.ttft * 1000.0 for r in ok],
                    [r.tpot * 1000.0 for r in ok if r.tpot is not None])
    record.write(stem + ".json")  # written last: its presence means done
    for w in warnings:  # after the files: an interrupted point is on disk before anything is said
        point_run.log(f"WARNING {point.stem}: {w}")
    for line in workload_lines(summary) + [x for x in [summary_line(spec)] if x]:
        point_run.log(f"{point.stem}: {line}")
    return record.to_dict()


def _measure_point(ctx: Context, point: Point, budget_s: float | None):
    """(measurement, its PointSampling): a workload point by its workload (no adaptive sampling), a sweep point
    in rounds (``_measure_sweep_point``)."""
    from benchmarking import workloads
    if isinstance(point, workloads.WorkloadPoint):
        return workloads.measure(ctx, point, budget_s, lambda: ctx.stop.signum), None
    return _measure_sweep_point(ctx, point, budget_s)


def _point_warnings(ctx: Context, point: Point, measured, metrics: dict, finished: list, budget_s: float | None,
                    interrupted: str | None) -> list[str]:
    """What a reader of the point must know beside its numbers (each is logged and kept in the record):
    output lengths not as asked, prompt drift, a budget that ran out, an interruption, stalls, the workload's own."""
    b, run, check = ctx.bench, measured.run, measured.prompt_check
    warnings = []
    if metrics["output_length_mismatches"]:
        asked = f"osl={point.osl}" if measured.summary is None else "the length each asked for"
        warnings.append(f"{metrics['output_length_mismatches']} of {metrics['completed']} completed requests "
                        f"returned an output length other than {asked} (ignore_eos/min_tokens not honoured?)")
    if check["max_abs_drift"]:
        warnings.append(f"prompt length drift up to {check['max_abs_drift']} tokens after decode/re-encode")
    if run.budget_exhausted:
        warnings.append(f"point budget {budget_s:.0f} s ran out; {run.not_sent} requests never sent")
    if interrupted:
        warnings.append(f"interrupted by {interrupted}: partial point, {sum(1 for r in finished if not r.warmup)} "
                        f"of {point.num_prompts} requests finished, {run.not_sent} never sent")
    stalls = sum(1 for r in finished if r.error_class == "stall")
    if stalls:
        warnings.append(run_control.stall_line(f"point {point.stem}", f"{ctx.base_url}{b.endpoint}",
                                               b.stall_timeout_s, stalls)
                        + (f"; {run.not_sent} request(s) not sent" if run.stopped_by == "stall" else ""))
    return warnings + measured.warnings


def _write_server_metrics(ctx: Context, stem: str, before: dict | None, after: dict | None) -> dict | None:
    """The server's Prometheus counters before and after the point, and their delta, in STEM.prom.json;
    returns the record's ``server_metrics`` (None when either scrape is missing)."""
    from contracts import prometheus as prom
    if before is None or after is None:
        return None
    d = prom.delta(before, after)
    point_run.atomic_write(stem + ".prom.json", json.dumps({"before": before, "after": after, "delta": d}))
    return {"file": ctx.rel(stem + ".prom.json"), "delta": prom.headline(d)}




def run_vllm_point(ctx: Context, point: Point, python: str, budget_s: float | None) -> dict | None:
    """Same point through `vllm bench serve`; saved as <stem>.vllm-bench.json in our schema."""
    from benchmarking import vllm_tool
    b = ctx.bench
    raw_dir = os.path.join(ctx.out_dir, "vllm_raw")
    os.makedirs(raw_dir, exist_ok=True)
    raw_name = point.stem + ".vllm.json"
    tokenizer = ctx.tokenizer_dir or ctx.spec.hf_model_repo or ctx.model
    cmd = vllm_tool.bench_command(python, ctx.base_url, ctx.model, tokenizer, point.isl, point.osl,
                                  point.max_concurrency, point.num_prompts, raw_dir, raw_name,
                                  endpoint=b.endpoint, request_rate=b.request_rate, burstiness=b.burstiness,
                                  percentiles=",".join(f"{p:g}" for p in b.percentiles), seed=b.seed)
    started = point_run.now()
    log_path = os.path.join(raw_dir, point.stem + ".vllm.log")
    probe, watched = probe_for_run(ctx.run_dir)
    probe.start()
    try:
        with open(log_path, "w") as log:
            proc = vllm_tool.run(cmd, ctx.api_key, timeout=budget_s, log=log)
    except Exception as exc:  # noqa: BLE001 - a comparison tool failing must not lose our results
        point_run.log(f"vllm bench serve failed for {point.stem}: {exc!r}")
        return None
    cost = probe.stop()
    raw_path = os.path.join(raw_dir, raw_name)
    if proc.returncode != 0 or not os.path.exists(raw_path):
        point_run.log(f"vllm bench serve exit {proc.returncode} for {point.stem}; see {ctx.rel(log_path)}")
        return None
    with open(raw_path) as fh:
        raw = json.load(fh)
    record = BenchPoint(
        model_id=ctx.model_id, served_model_name=ctx.model, tool="vllm-bench",
        point=point_run.point_params(point, b, dataset="random"), started=started, ended=point_run.now(),
        metrics=BenchMetrics.from_dict(vllm_tool.to_point_metrics(raw)), requests_file=None,
        raw_file=ctx.rel(raw_path), command=" ".join(cmd[:2] + ["<shim>"] + cmd[3:]))
    record.set_cost(cost, watched)
    point_run.judge(ctx, point, record)  # no per-request values from vllm bench: the point value decides its table cell
    record.write(os.path.join(ctx.out_dir, point.stem + ".vllm-bench.json"))
    return record.to_dict()




def load_finished(path: str, point: Point, tool: str) -> dict | None:
    """A previously written, complete summary for exactly this point, or None (resume support)."""
    try:
        rec = BenchPoint.read(path)
    except RecordError:
        return None
    p = rec.point
    same = (p.isl, p.osl, p.max_concurrency, p.num_prompts) == \
        (point.isl, point.osl, point.max_concurrency, point.num_prompts)
    return rec.to_dict() if rec.tool == tool and same and not rec.partial else None


def _fmt(v, nd=1) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def _tier_word(tier: dict) -> str:
    """The report's decision of a tier (pass/fail/inconclusive on the targets' intervals) where the point
    had per-request values; else the point value's ok/MISS (a point of another tool)."""
    decision = tier.get("decision")
    if decision:
        return {"pass": "pass", "fail": "FAIL", "inconclusive": "undecided"}.get(decision, decision)
    return "ok" if tier.get("passed") else "MISS"


def print_table(records: list[dict]) -> None:
    """Plain-text summary table of every point of this run."""
    head = ("tool", "ISL", "OSL", "Con", "N", "ok", "fail", "TTFT ms", "TPOT ms", "t/s/u", "Decode t/s",
            "Prefill t/s", "E2EL ms", "Req/s", "targets")
    rows = []
    for rec in records:
        m, p = rec["metrics"], rec["point"]
        verdicts = [f"{tier[0]}:{_tier_word(t)}" for tier, t in (rec.get("targets") or {}).items()
                    if t.get("passed") is not None or t.get("decision")]
        rows.append((rec["tool"], str(p["isl"]), str(p["osl"]), str(p["max_concurrency"]), str(p["num_prompts"]),
                     str(m.get("completed")), str(m.get("failed")), _fmt(m.get("mean_ttft_ms")),
                     _fmt(m.get("mean_tpot_ms")), _fmt(m.get("tput_user"), 2), _fmt(m.get("decode_throughput")),
                     _fmt(m.get("prefill_throughput")), _fmt(m.get("mean_e2el_ms")),
                     _fmt(m.get("request_throughput"), 3), " ".join(verdicts) or "-"))
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    point_run.say("\n".join([line(head), "  ".join("-" * w for w in widths), *map(line, rows),
                     "TTFT: first chunk with non-empty choices; TPOT: (e2el-ttft)/(out-1); t/s/u = 1000/TPOT; "
                     "Decode = t/s/u x min(con, N); Prefill = ISL x min(con, N) / TTFT. "
                     "Full legend: records/bench.py"]))


def main(argv: list[str] | None = None) -> int:
    from benchmarking.ab_points import add_arguments
    return run_client("benchmarks", "tt-inference-server benchmarks workflow", run, argv, add_arguments=add_arguments)


def run(invocation: ClientInvocation) -> int:
    if not invocation.server_url:
        raise BadInput("--server-url is empty: benchmarks need a live server")
    try:
        bench = parse_workflow_args(invocation.workflow_args)
        if bench.workload:  # checked here, before anything is sent (a bad trace names its line)
            from benchmarking import workloads
            points = workloads.points(invocation.spec, bench)
        else:
            points = build_points(invocation.spec, bench)
            from benchmarking import requirement_points
            reqs = requirement_points.read_run_requirements(invocation.run_dir)
            requirement_points.attach(reqs, points)
            points += requirement_points.agentic_points(reqs)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BadInput(str(exc)) from None
    if not points:
        raise BadInput("no benchmark points left after filtering (check max_context / points=)")
    span = max((getattr(p, "span_s", 0.0) for p in points), default=0.0)
    if bench.point_budget_s is not None and bench.point_budget_s <= span:
        raise BadInput(f"point_budget_s={bench.point_budget_s:g} ends before the trace does ({span:g} s at "
                       f"time_scale={bench.time_scale:g}): the replay would be cut short")
    vllm_python = None
    if "vllm" in bench.tools:
        from benchmarking.vllm_tool import default_python
        vllm_python = bench.vllm_python or default_python()
        if not vllm_python or not os.path.exists(vllm_python):
            raise BadInput("tools=vllm needs a python with vllm installed: pass vllm_python=PATH or set "
                           "TT_VLLM_BENCH_PYTHON")
    if bench.dataset == "jsonl" and not os.path.isfile(bench.dataset_path):
        raise BadInput(f"dataset file not found: {bench.dataset_path}")

    ctx = Context(invocation, bench)
    from benchmarking.prompts import load_tokenizer
    try:
        ctx.tokenizer, ctx.tokenizer_note = load_tokenizer(ctx.tokenizer_dir, ctx.base_url, ctx.model, ctx.api_key)
    except Exception as exc:  # noqa: BLE001 - bad tokenizer dir is bad input
        raise BadInput(f"cannot load tokenizer from TT_TOKENIZER_DIR={ctx.tokenizer_dir}: {exc}") from None
    if ctx.tokenizer_note:
        point_run.log(f"NOTE: {ctx.tokenizer_note}; prompts are whitespace words and lengths are unverified")
    point_run.log(f"model {ctx.model} at {ctx.base_url}; mode {bench.mode}; {len(points)} point(s); "
         f"tokenizer {getattr(ctx.tokenizer, 'source', 'none')}; stall timeout {bench.stall_timeout_s:g} s")
    if bench.body_fields:
        point_run.log("request body fields from --workflow-args: "
             + " ".join(f"{k}={json.dumps(v)}" for k, v in sorted(bench.body_fields.items())))
    for p in points:
        point_run.log(f"  point isl={p.isl} osl={p.osl} con={p.max_concurrency} n={p.num_prompts} ({p.source})")
    return run_sweep(ctx, points, vllm_python, ctx.stop)


def run_sweep(ctx: Context, points: list[Point], vllm_python: str | None, stop: StopSignals) -> int:
    """Warm up, then every point and tool in order; stops early on a signal or a silent server."""
    bench = ctx.bench
    point_default, sweep_default = DEFAULT_BUDGETS[bench.mode]
    per_point = run_control.point_budget(bench.point_budget_s, point_default, bench.stall_timeout_s)
    sweep_budget = bench.budget_s or sweep_default
    sweep_deadline = time.monotonic() + sweep_budget if sweep_budget else None
    halt = None  # why the sweep stops early: "interrupted", "silent" (warm-up) or a SERVER_GONE class
    from benchmarking.tools import RECORD_TOOL, ToolUnavailable
    main_tool = RECORD_TOOL[bench.tool]  # who measures each point (tool=); "tt" below is that point's slot
    todo = reconcile.todo_after_quiet(ctx, points, main_tool, load_finished)  # a resume: the server idle first
    if not ctx.disable_warmup and todo and not stop.signum:
        halt = point_run.warm_up(ctx, sorted({(p.isl, p.osl) for p in todo}))

    records, outputs, failed_points, skipped, not_run = [], [], [], [], []
    agreeing = agreement_points(points) if bench.agreement else []
    for p in points:
        for tool in bench.tools:
            if stop.signum:
                halt = "interrupted"
            suffix = ".json" if tool == "tt" else ".vllm-bench.json"
            label = bench.tool if tool == "tt" and bench.tool != "ours" else tool  # who measures, in the log
            path = os.path.join(ctx.out_dir, p.stem + suffix)
            done = load_finished(path, p, main_tool if tool == "tt" else "vllm-bench")
            if done is not None:
                point_run.log(f"{p.stem} ({label}): already finished, skipping (resume)")
                rec = done
            elif halt:
                skipped.append(p.stem)
                continue
            else:
                remaining = sweep_deadline - time.monotonic() if sweep_deadline else None
                if remaining is not None and remaining <= 0:
                    point_run.log(f"{p.stem} ({label}): sweep budget {sweep_budget:.0f} s exhausted, not run")
                    skipped.append(p.stem)
                    continue
                # a trace's budget starts after its last release: its span plus the mode's point budget
                own = per_point + getattr(p, "span_s", 0.0) if bench.point_budget_s is None else per_point
                budget = min(x for x in (own, remaining) if x is not None)
                point_run.log(f"{p.stem} ({label}): running (budget {budget:.0f} s)")
                try:
                    rec = _run_one(ctx, p, tool, vllm_python, budget)
                except ToolUnavailable as exc:
                    point_run.log(f"{p.stem} ({label}): NOT RUN: {exc}")
                    not_run.append(f"{p.stem} ({exc})")
                    continue
                if rec is None:
                    failed_points.append(f"{p.stem} ({label})")
                    continue
                if rec.get("interrupted") or stop.signum:
                    halt = "interrupted"
                elif tool == "tt" and bench.tool == "ours":
                    halt = run_control.server_gone(rec_requests(ctx, rec))
            m = rec["metrics"]
            point_run.log(f"{p.stem} ({label}): completed {m['completed']} failed {m['failed']} "
                 f"ttft {_fmt(m.get('mean_ttft_ms'))} ms tpot {_fmt(m.get('mean_tpot_ms'))} ms "
                 f"t/s/u {_fmt(m.get('tput_user'), 2)} failures {m.get('failures_by_class') or {}}"
                 + (f" PARTIAL (interrupted by {rec['interrupted']})" if rec.get("interrupted") else "")
                 + (f"; stopped: {rec['sampling']['stop_reason']} ({rec['sampling']['detail']})"
                    if rec.get("sampling") else ""))
            records.append(rec)
            outputs.append(ctx.rel(path))
            if rec.get("requests_file"):
                outputs.append(rec["requests_file"])
            if (rec.get("server_metrics") or {}).get("file"):
                outputs.append(rec["server_metrics"]["file"])
            if m["completed"] == 0 and not rec.get("interrupted"):
                failed_points.append(f"{p.stem} ({label})")
            elif (rec.get("workload") or {}).get("failed_check"):
                failed_points.append(f"{p.stem} ({label}): {rec['workload']['failed_check']}")
    if not halt:
        measured = [p for p in agreeing if p.stem not in skipped and not any(p.stem in f for f in failed_points)]
        outputs += agreement_pass(ctx, measured, sweep_deadline, not_run)
        from benchmarking.ab_points import ab_pass
        outputs += ab_pass(ctx, agreement_points([p for p in points if p.stem not in skipped and not any(
            p.stem in f for f in failed_points)]), sweep_deadline, not_run)
    ctx.invocation.write_outputs(outputs, failed_points=failed_points, skipped_points=skipped,
                                 not_run_points=not_run, interrupted=stop.name or None)
    print_table(records)
    return closing_lines(records, failed_points, skipped, halt, stop, not_run)




def _run_one(ctx: Context, point: Point, slot: str, vllm_python: str | None, budget: float) -> dict | None:
    """The point's own measurement (slot "tt": by our client, or by the tool= tool) or the side-by-side
    `vllm bench serve` run (slot "vllm", tools=tt,vllm)."""
    if slot != "tt":
        return run_vllm_point(ctx, point, vllm_python, budget)
    return run_tt_point(ctx, point, budget) if ctx.bench.tool == "ours" else run_tool_point(ctx, point, budget)


def rec_requests(ctx: Context, rec: dict) -> list[dict]:
    """The measured request rows of a point record (its .requests.jsonl)."""
    try:
        with open(os.path.join(ctx.run_dir, rec["requests_file"]), encoding="utf-8") as fh:
            return [row for row in map(json.loads, fh) if not row.get("warmup")]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def closing_lines(records: list[dict], failed_points: list[str], skipped: list[str], halt: str | None,
                  stop: StopSignals, not_run: list[str] | None = None) -> int:
    """The last lines say why the run failed (failure classes and counts); returns the exit code."""
    if failed_points:
        point_run.log(f"FAILED points (no request completed or tool error): {', '.join(failed_points)}")
    if not_run:
        point_run.log(f"NOT RUN (the tool could not measure them): {'; '.join(not_run)}")
    if skipped:
        why = {"interrupted": f"interrupted by {stop.name}", None: "sweep budget"}.get(
            halt, f"the server is silent or unreachable ({halt} in the previous step)")
        point_run.log(f"NOT RUN ({why}): {', '.join(skipped)}")
    summary = run_control.failure_summary(records)
    if summary:
        point_run.log(f"failed requests: {summary}")
    if stop.signum:
        partial = [r["point"] for r in records if r.get("interrupted")]
        kept = f"; partial point kept: isl={partial[0]['isl']} osl={partial[0]['osl']} " \
               f"con={partial[0]['max_concurrency']}" if partial else ""
        point_run.log(f"INTERRUPTED by {stop.name}{kept}; exit {stop.exit_code}")
        return stop.exit_code
    return 1 if failed_points or skipped or not_run else 0


if __name__ == "__main__":
    sys.exit(main())
