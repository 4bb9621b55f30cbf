"""Points measured by another load generator (``tool=``) and the agreement blocks (``agreement=``).

``run_tool_point`` measures a sweep point with a tool of ``benchmarking/tools/`` in rounds, as our client's
points are sampled; ``run_agreement_point`` measures a judged point again in ABBA blocks of our client and the
named tool (``benchmarking/agreement.py``); ``agreement_pass`` runs those after the sweep on an equal share of
what its budget leaves. Both write records the report reads like any other.
"""
from __future__ import annotations

import json
import os
import time
from collections import Counter

from benchmarking import point_run, run_control
from benchmarking.point_run import Context
from benchmarking.sweeps import Point
from contracts.cpu_cost import probe_for_run
from contracts.typed_record import RecordError
from records.bench import BenchMetrics, BenchPoint, point_key

def run_tool_point(ctx: Context, point: Point, budget_s: float | None) -> dict:
    """Measure one point with another tool (``tool=``, benchmarking/tools/) and write it like our own:
    the tool's per-request output becomes our rows, so metrics, intervals and the judge are unchanged.
    Raises ``ToolUnavailable`` (one line) when the tool cannot measure it."""
    from benchmarking import tools
    from benchmarking.metrics import compute_metrics
    b, name = ctx.bench, ctx.bench.tool
    stem = os.path.join(ctx.out_dir, point.stem)
    probe, watched = probe_for_run(ctx.run_dir)
    probe.start()
    started = point_run.now()
    run, sampling = _tool_rounds(ctx, point, name, budget_s)
    cost = probe.stop()
    metrics = compute_metrics(run.rows, run.duration, isl=point.isl, osl=point.osl,
                              max_concurrency=point.max_concurrency, num_prompts=point.num_prompts,
                              percentiles=b.percentiles, goodput=b.goodput or None)
    requests_path = stem + ".requests.jsonl"
    point_run.atomic_write(requests_path, "".join(json.dumps(r.to_json()) + "\n" for r in run.rows))
    record = BenchPoint(
        model_id=ctx.model_id, served_model_name=ctx.model, tool=tools.RECORD_TOOL[name],
        point=point_run.point_params(point, b, dataset=b.dataset if run.prompts == "ours" else "random"),
        started=started, ended=point_run.now(), metrics=BenchMetrics.from_dict(metrics),
        requests_file=ctx.rel(requests_path),
        raw_file=ctx.rel(run.raw_file), tool_version=run.version, tool_command=run.command, prompts_from=run.prompts,
        percentiles=b.percentiles, goodput_slos=b.goodput or None, warnings=list(run.warnings) or None, complete=True,
        sampling=sampling)
    record.set_cost(cost, watched)
    ok = [r for r in run.rows if r.success]
    point_run.judge(ctx, point, record, [r.ttft * 1000.0 for r in ok],
                    [r.tpot * 1000.0 for r in ok if r.tpot is not None])
    record.write(stem + ".json")  # written last: its presence means done
    for w in run.warnings:
        point_run.log(f"NOTE {point.stem}: {w}")
    return record.to_dict()


def run_agreement_point(ctx: Context, point: Point, budget_s: float | None) -> dict:
    """The point measured again by our client and the ``agreement=`` tool in ABBA blocks of the point's size
    (benchmarking/agreement.py), both blocks of a pair sending the same prompts; writes and returns
    ``<stem>.agreement.json`` (``records.agreement.AgreementRecord``)."""
    from benchmarking import tools
    from benchmarking.agreement import run_abba
    from records.agreement import AgreementRecord
    b, name = ctx.bench, ctx.bench.agreement
    assert name is not None
    record = AgreementRecord(point=point_key(point.isl, point.osl, point.max_concurrency), tool=tools.RECORD_TOOL[name],
                             band=b.agreement_band, max_cycles=b.agreement_cycles, block_requests=point.num_prompts)
    deadline = None if budget_s is None else time.monotonic() + budget_s

    def measure(side: str, index: int):
        seed = b.seed + 104729 * (1 + index // 2)  # one seed per pair: both tools send the same prompts
        left = None if deadline is None else max(1.0, deadline - time.monotonic())
        if side == "A" or name == "ours":
            return _ours_block(ctx, point, side, index, seed, left)
        block = _tool_block(ctx, point, name, index, seed, left)
        record.tool_version = record.tool_version or block.extra.pop("version", None)
        return block

    run_abba(record, measure, deadline, lambda: bool(ctx.stop.signum))
    path = os.path.join(ctx.out_dir, point.stem + ".agreement.json")
    record.write(path)
    for m in record.metrics:
        point_run.log(f"{m.name}: {m.detail()}")
    for note in record.notes:
        point_run.log(f"{point.stem}: agreement: {note}")
    return record.to_dict()


def _ours_block(ctx: Context, point: Point, side: str, index: int, seed: int, budget_s: float | None):
    """One block of the point's size sent by our client (no warm-up: the point's own run warmed the server)."""
    from benchmarking.agreement import BlockFailed
    from records.agreement import AgreementBlock, block_values
    prompts = point_run.prompts(ctx, point.isl, point.num_prompts, seed=seed + point.isl * 7 + point.osl)
    items = point_run.items(ctx, prompts, point.osl)
    run = point_run.send_round(ctx, point, items, None, seed, budget_s, f"agree-{point.max_concurrency}-{index}")
    ok = [r for r in run.records if r.success and not r.warmup]
    if not ok:
        classes = Counter(r.error_class or "other" for r in run.records if not r.warmup)
        raise BlockFailed("no request of our block completed ("
                          + (", ".join(f"{c} {n}" for c, n in classes.most_common()) or "none sent") + ")")
    values = block_values([r.ttft for r in ok], [r.tpot for r in ok if r.tpot is not None],
                          sum(r.output_tokens or 0 for r in ok), run.duration)
    return AgreementBlock(index=index, side=side, tool="tt-bench", requests=len(run.records), completed=len(ok),
                          duration_s=round(run.duration, 4), values=values)


def _tool_block(ctx: Context, point: Point, name: str, index: int, seed: int, budget_s: float | None):
    """One block of the point's size sent by the tool (its raw output under ``<tool>_raw/<stem>/agree-N``)."""
    from benchmarking import tools
    from benchmarking.agreement import BlockFailed
    from records.agreement import AgreementBlock, block_values
    out_dir = os.path.join(ctx.out_dir, f"{name}_raw", point.stem, f"agree-{index}")
    try:
        run = tools.run(name, tool_job(ctx, point, name, point.num_prompts, out_dir, seed), budget_s, log=point_run.log)
    except tools.ToolUnavailable as exc:
        raise BlockFailed(str(exc)) from None
    ok = [r for r in run.rows if r.success]
    if not ok:
        raise BlockFailed(f"no request of the {name} block completed")
    values = block_values([r.ttft for r in ok], [r.tpot for r in ok if r.tpot is not None],
                          sum(r.output_tokens or 0 for r in ok), run.duration)
    block = AgreementBlock(index=index, side="B", tool=tools.RECORD_TOOL[name], requests=len(run.rows),
                           completed=len(ok), duration_s=round(run.duration, 4), values=values,
                           raw_file=ctx.rel(run.raw_file))
    block.extra["version"] = run.version
    return block


def tool_job(ctx: Context, point: Point, name: str, n: int, out_dir: str, seed: int):
    """A ``benchmarking.tools.ToolJob`` of ``n`` requests at the point, with our prompts (seeded by ``seed``)
    when the tool reads them."""
    from benchmarking import tools
    b = ctx.bench
    job = tools.ToolJob(base_url=ctx.base_url, model=ctx.model, api_key=ctx.api_key, tokenizer_dir=ctx.tokenizer_dir,
                        endpoint=b.endpoint, isl=point.isl, osl=point.osl, concurrency=point.max_concurrency,
                        num_prompts=n, out_dir=out_dir, request_rate=b.request_rate, seed=seed,
                        request_timeout_s=b.request_timeout_s, body_fields=b.body_fields)
    if tools.module(name).PROMPTS == "ours":
        job.prompts = [p.text for p in point_run.prompts(ctx, point.isl, n, seed=seed + point.isl * 7 + point.osl)]
    return job


def _tool_rounds(ctx: Context, point: Point, name: str, budget_s: float | None):
    """The tool's runs at the point in rounds, as our client's (``_measure_sweep_point``): the point's minimum,
    then more while ``run_control.sampling_stop`` says a required target check is undecided. Returns the
    rounds merged into one ``ToolRun`` (rows in order, durations summed) and the ``PointSampling``."""
    from benchmarking import tools
    from records.bench import PointSampling
    raw_dir = os.path.join(ctx.out_dir, f"{name}_raw", point.stem)
    started = time.monotonic()
    job = tool_job(ctx, point, name, point.num_prompts, raw_dir, ctx.bench.seed)
    run = tools.run(name, job, budget_s, log=point_run.log)
    goal = point_run.sample_goal(ctx, point, budget_s)
    rounds = 1
    while True:
        ok = [r for r in run.rows if r.success]
        state = run_control.sampling_stop(goal, [r.ttft * 1000.0 for r in ok],
                                          [r.tpot * 1000.0 for r in ok if r.tpot is not None],
                                          sent=len(run.rows), failed=len(run.rows) - len(ok), elapsed_s=run.duration,
                                          cut_short=False)
        left = None if budget_s is None else budget_s - (time.monotonic() - started)
        if (state.stop_reason is None and left is not None
                and left < 2 * (time.monotonic() - started) / rounds):
            state.stop_reason, state.detail = "sample_budget", f"{state.detail}; the point's time budget is too short"
        if state.stop_reason is not None:
            break
        rounds += 1
        point_run.log(f"{point.stem} ({name}): round {rounds}: {state.detail}")
        job = tool_job(ctx, point, name, state.next_round, os.path.join(raw_dir, f"round-{rounds}"),
                       ctx.bench.seed + 7919 * (rounds - 1))
        extra = tools.run(name, job, left, log=point_run.log)
        for row in extra.rows:
            row.index, row.request_id = len(run.rows), f"{row.request_id}-r{rounds}"
            run.rows.append(row)
        run.duration += extra.duration
    sampling = PointSampling(min_requests=point.num_prompts, requests=len(run.rows), rounds=rounds,
                             stop_reason=state.stop_reason, precision=goal.precision, budget_s=goal.budget_s,
                             decisions=state.decisions, detail=state.detail)
    return run, sampling


def agreement_points(points: list[Point]) -> list[Point]:
    """The points ``agreement=`` measures again: the judged ones (with targets), else every point."""
    judged = [p for p in points if p.targets]
    return judged or list(points)


def agreement_pass(ctx: Context, points: list[Point], sweep_deadline: float | None, not_run: list[str]) -> list[str]:
    """``agreement=``: each point measured again, after the sweep, each with an equal share of what the sweep
    budget leaves; returns the records' paths for outputs.json."""
    outputs: list[str] = []
    for i, p in enumerate(points):
        if ctx.stop.signum:
            break
        remaining = sweep_deadline - time.monotonic() if sweep_deadline else None
        outputs += _agreement(ctx, p, None if remaining is None else remaining / (len(points) - i), not_run)
    return outputs


def _agreement(ctx: Context, point: Point, budget: float | None, not_run: list[str]) -> list[str]:
    """The point's agreement record (resumed when already complete) within ``budget`` seconds (its share of
    what the sweep budget leaves after every point's own measurement); returns its path for outputs.json. A
    run whose blocks failed is added to ``not_run`` with its reason (the workflow then exits 1)."""
    from benchmarking.tools import RECORD_TOOL
    from records.agreement import AgreementRecord
    path = os.path.join(ctx.out_dir, point.stem + ".agreement.json")
    try:
        done = AgreementRecord.read(path) if os.path.exists(path) else None
    except (OSError, ValueError, RecordError):
        done = None
    same_tool = done is not None and done.tool == RECORD_TOOL[str(ctx.bench.agreement)]
    if done is not None and same_tool and done.stopped in ("decided", "budget"):
        point_run.log(f"{point.stem}: agreement already measured, skipping (resume)")
        return [ctx.rel(path)]
    point_run.log(f"{point.stem}: agreement with {ctx.bench.agreement}: ABBA blocks of {point.num_prompts} requests, "
         f"at most {ctx.bench.agreement_cycles} cycles" + (f" within {budget:.0f} s" if budget else ""))
    rec = run_agreement_point(ctx, point, budget)
    if rec["stopped"] == "failed":
        not_run.append(f"{point.stem} agreement ({'; '.join(rec['notes'])})")
    return [ctx.rel(path)]
