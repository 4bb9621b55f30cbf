"""A fixed-size stress load point sent by another load generator (``tool=aiperf|guidellm|vllm``).

Why: a stress point measured by our client alone cannot tell the client's error from the server's
(``benchmarking/tools/``). With ``tool=`` the tool sends the point's requests (its ISL, OSL,
concurrency and count, our prompts when it reads them) from its own pinned venv, and its
per-request output, already turned into our rows by ``benchmarking.tools.run``, becomes the
``LoadRun`` our driver would have returned: the point is judged by ``stress_tests.judge.point_record``
unchanged (error rate on its Wilson interval, at least one success).

What a tool's run cannot give, said in the record's ``warnings``: its output is read after it has
ended, so the point has one window over the whole run (no per-window medians over time) and no
saturation detector watched it; what only our client's loop does (endurance, the capacity search,
the saturation stop) is refused up front (``stress_tests.args.tool_modes``). A tool that cannot run
raises ``ToolUnavailable`` (one line): the caller records the point as not run, never sends it
with our client instead.
"""
from __future__ import annotations

import math
import os
import time
from typing import Callable, Protocol

from benchmarking import tools
from benchmarking.metrics import RequestRecord
from records.stress import StressPointRecord
from stress_tests.driver import LoadRun, close_window
from stress_tests.plan import StressPoint

#: A send time above this (s) is a wall-clock (epoch) time, not ``time.perf_counter``'s (seconds since boot).
EPOCH_MIN_S = 1e9


class ToolContext(Protocol):
    """What a tool point needs of the workflow's context (``run_stress_tests.Context``)."""

    base_url: str
    model: str
    api_key: str | None
    tokenizer_dir: str | None

    def remaining(self) -> float | None: ...


def point_job(ctx: ToolContext, point: StressPoint, name: str, texts: list[str], out_dir: str,
              seed: int) -> tools.ToolJob:
    """The point as a ``ToolJob``: its lengths, concurrency and count; our prompts (the point's pool, cycled
    over its requests as our driver cycles it) when the tool reads them."""
    job = tools.ToolJob(base_url=ctx.base_url, model=ctx.model, api_key=ctx.api_key, tokenizer_dir=ctx.tokenizer_dir,
                        endpoint="/v1/completions", isl=point.isl, osl=point.osl, concurrency=point.concurrency,
                        num_prompts=point.num_prompts, out_dir=out_dir, seed=seed, request_timeout_s=600.0)
    if tools.module(name).PROMPTS == "ours" and texts:
        job.prompts = [texts[k % len(texts)] for k in range(point.num_prompts)]
    return job


def measure(ctx: ToolContext, point: StressPoint, name: str, texts: list[str], out_dir: str, seed: int,
            log: Callable[[str], None]) -> tuple[LoadRun, tools.ToolRun]:
    """Send the point with tool ``name`` within the workflow's remaining budget; (the run as our driver's
    ``LoadRun``, the tool's run). Raises ``ToolUnavailable`` (one line) when the tool cannot measure it."""
    job = point_job(ctx, point, name, texts, out_dir, seed)
    perf0, wall0 = time.perf_counter(), time.time()
    run = tools.run(name, job, ctx.remaining(), log=log)
    on_our_clock(run.rows, wall0 - perf0)
    return as_load_run(run, point.num_prompts), run


def on_our_clock(rows: list[RequestRecord], wall_minus_perf: float) -> None:
    """Move wall-clock send times (aiperf, guidellm) onto ``time.perf_counter``, the clock our rows and the
    server-state sampler share, so the report's timeline places the tool's requests against the server's
    state. Send times a tool does not keep (vllm: 0) are left as they are."""
    for row in rows:
        if row.send_time > EPOCH_MIN_S:
            row.send_time -= wall_minus_perf


def as_load_run(run: tools.ToolRun, num_prompts: int) -> LoadRun:
    """The tool's rows as our driver's ``LoadRun``: one window over the whole run (the tool is read after it
    ended), requests it never sent counted as not sent; nothing was stopped early and no detector ran."""
    rows = run.rows
    sent = [r.send_time for r in rows if r.send_time]
    ends = [r.send_time + r.latency for r in rows if r.send_time and r.latency is not None]
    duration = run.duration if run.duration > 0 else (max(ends) - min(sent) if sent and ends else 0.0)
    window = close_window(rows, min(sent, default=0.0), -math.inf, math.inf, 0, None)
    window.t_end = round(duration, 3)
    return LoadRun(records=rows, duration_s=duration, windows=[window], not_sent=max(0, num_prompts - len(rows)))


def name_tool(rec: StressPointRecord, name: str, run: tools.ToolRun | None = None) -> None:
    """Name the tool in the point record and say what its run cannot show."""
    rec.tool = tools.RECORD_TOOL[name]
    if run is None:
        return
    rec.tool_version, rec.tool_command = run.version, run.command
    notes = [f"sent by {rec.tool} {run.version}: one window over its whole run (its output is read after it "
             "ends) and no saturation detector"]
    if run.prompts != "ours":
        notes.append(f"{rec.tool} sent its own random prompts of the point's ISL/OSL, not ours")
    if not any(r.send_time for r in run.rows):
        notes.append(f"{rec.tool} keeps no send times: the request rows cannot be placed against the server's state")
    rec.warnings = notes + list(run.warnings)


def raw_dir(out_dir: str, name: str, point_name: str) -> str:
    """Where the tool writes its own files for a point: ``<out_dir>/<tool>_raw/<point>``."""
    return os.path.join(out_dir, f"{name}_raw", point_name)
