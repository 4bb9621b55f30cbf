"""``workload=multi_turn turns=N``: conversations, each turn carrying everything said so far.

A point's ``num_prompts`` conversations run ``max_concurrency`` at a time. Each has ``turns`` turns:
a new user message of ``isl`` tokens (cut from the local corpus) is appended to the whole exchange
so far, the server's own answers included (kept verbatim from its stream), and the request asks
for ``osl`` tokens. Between an answer and the next turn the user thinks for ``think_time_s``.

Why per-turn TTFT: turn k's prompt starts with turn k-1's prompt and answer, so a server with a
prefix cache prefills only the new part; TTFT per turn, beside the server's prefix-cache hit
rate over the point, shows what the cache saves as conversations grow. A turn that fails ends its
conversation (the next turn has no answer to carry); the turns never asked count as not sent.
"""
from __future__ import annotations

import asyncio
import time

from contracts import prometheus as prom
from benchmarking.client import RawTransport
from benchmarking.metrics import RequestRecord
from benchmarking.prompts import request_body
from benchmarking.runner import STOP_SENDING_ON, PointRun, new_event_loop
from contracts.server_state import prefix_cache_hit_rate
from benchmarking.sweeps import build_points
from benchmarking.workloads import Measured, WorkloadPoint, latency_stats, prompt_check
from benchmarking.workloads.corpus import Corpus
from contracts.model_spec import ModelSpec

_POLL_S = 0.1


def points(spec: ModelSpec, bench) -> list[WorkloadPoint]:
    """The sweep's points, each run as conversations (``num_prompts`` conversations of ``turns`` turns)."""
    return [WorkloadPoint(p.isl, p.osl, p.max_concurrency, p.num_prompts, source="multi_turn",
                          workload="multi_turn") for p in build_points(spec, bench)]


class _Conversations:
    """Runs the conversations of one point on one transport; stops on budget, signal or a silent server."""

    def __init__(self, cfg, ctx, point: WorkloadPoint, corpus: Corpus):
        self.cfg, self.ctx, self.point, self.corpus = cfg, ctx, point, corpus
        self.turns, self.think_s = ctx.bench.turns, ctx.bench.think_time_s
        self.records: list[RequestRecord] = []
        self.prompts = []
        self.stop_reason: str | None = None
        self.signum: int | None = None
        self.stopped_by: str | None = None
        self.wake = asyncio.Event()

    def _body(self, history: list[dict], osl: int) -> bytes:
        b, chat = self.ctx.bench, self.cfg.chat
        if chat:
            return request_body("", osl, self.ctx.model, True, b.body_fields, messages=list(history))
        transcript = "".join(f"{'User' if m['role'] == 'user' else 'Assistant'}: {m['content']}\n" for m in history)
        return request_body(transcript + "Assistant:", osl, self.ctx.model, False, b.body_fields)

    async def conversation(self, c: int, slots: asyncio.Semaphore, transport: RawTransport) -> None:
        p = self.point
        async with slots:
            history: list[dict] = []
            carried = 0  # tokens of earlier turns (user messages and answers)
            for t in range(self.turns):
                if self.stop_reason:
                    return
                prompt = self.corpus.prompt(f"multi_turn:{self.ctx.bench.seed}:{c}:{t}", p.isl)
                self.prompts.append(prompt)
                history.append({"role": "user", "content": prompt.text})
                rec = RequestRecord(index=len(self.records), request_id=f"mt-{p.isl}-{p.osl}-{c}-{t}",
                                    prompt_len=carried + (prompt.token_len or p.isl), requested_output_len=p.osl)
                rec.extra.update({"conversation": c, "turn": t + 1})
                self.records.append(rec)
                await transport.send(rec, self._body(history, p.osl))
                if not rec.success:
                    if rec.error_class in STOP_SENDING_ON and transport.server_silent() and not self.stop_reason:
                        self.stop_reason = self.stopped_by = rec.error_class
                        self.wake.set()
                    return
                history.append({"role": "assistant", "content": rec.generated_text or ""})
                carried = rec.prompt_len + (rec.output_tokens or p.osl)
                if t + 1 < self.turns and self.think_s > 0:
                    try:
                        await asyncio.wait_for(self.wake.wait(), self.think_s)
                    except asyncio.TimeoutError:
                        pass

    async def run(self, budget_s: float | None, pending_signal) -> PointRun:
        transport = RawTransport(self.cfg)
        slots = asyncio.Semaphore(max(1, self.point.max_concurrency))
        t0 = time.perf_counter()
        deadline = t0 + budget_s if budget_s else None
        tasks = [asyncio.ensure_future(self.conversation(c, slots, transport)) for c in range(self.point.num_prompts)]
        everything = asyncio.gather(*tasks)
        budget_hit = False
        try:
            while not everything.done():
                await asyncio.wait({everything}, timeout=_POLL_S)
                signum = pending_signal() if pending_signal else None
                if signum and not self.stop_reason:
                    self.stop_reason, self.signum = "interrupted", signum
                    self.wake.set()
                    transport.abort_all("interrupted", f"stopped by signal {signum}")
                elif deadline and time.perf_counter() >= deadline and not self.stop_reason:
                    self.stop_reason, budget_hit = "budget", True
                    self.wake.set()
                    transport.abort_all("budget_exceeded", "point time budget ran out while in flight")
            await everything
        finally:
            await transport.close()
        ends = [r.send_time + r.latency for r in self.records if r.success and r.latency is not None]
        sends = [r.send_time for r in self.records if r.send_time]
        duration = (max(ends) - min(sends)) if ends and sends else time.perf_counter() - t0
        planned = self.point.num_prompts * self.turns
        return PointRun(records=self.records, duration=duration, budget_exhausted=budget_hit,
                        not_sent=planned - len(self.records), interrupted=self.signum, stopped_by=self.stopped_by,
                        origin=t0)


def measure(ctx, point: WorkloadPoint, budget_s: float | None, pending_signal) -> Measured:
    cfg = ctx.client_config()
    cfg.keep_text = True  # the next turn carries the server's answer
    convs = _Conversations(cfg, ctx, point, Corpus(ctx.tokenizer))
    before = prom.fetch_metrics(ctx.base_url, ctx.api_key)
    loop = new_event_loop()
    try:
        run = loop.run_until_complete(convs.run(budget_s, pending_signal))
    finally:
        loop.close()
    after = prom.fetch_metrics(ctx.base_url, ctx.api_key) if before is not None else None
    per_turn = []
    for t in range(1, ctx.bench.turns + 1):
        done = [r for r in run.records if r.extra.get("turn") == t and r.success]
        inputs = [r.input_tokens for r in done if r.input_tokens is not None]
        per_turn.append({"turn": t, "ttft": latency_stats([r.ttft for r in done]),
                         "mean_input_tokens": round(sum(inputs) / len(inputs), 1) if inputs else None,
                         "failed": sum(1 for r in run.records if r.extra.get("turn") == t and not r.success)})
    for r in run.records:  # the text was needed for the next turn, not for the request rows
        r.generated_text = None
    summary = {"kind": "multi_turn", "conversations": point.num_prompts, "turns": ctx.bench.turns,
               "think_time_s": ctx.bench.think_time_s, "endpoint": cfg.endpoint, "per_turn": per_turn,
               "prefix_cache": prefix_cache_hit_rate(before, after)}
    return Measured(run=run, prompt_check=prompt_check(convs.prompts, ctx.tokenizer), summary=summary)
