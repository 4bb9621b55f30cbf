"""Drive one point: warm-up, release schedule, concurrency cap, time budget (needs the client).

Concurrency is a closed loop of `max_concurrency` workers; each takes the next request, waits for
its release time (open-loop arrivals), sends it and records it. When the point's budget runs
out, nothing new is sent and in-flight requests are failed as `budget_exceeded`; what finished
is kept. Warm-up requests run first with the same workers and are marked so metrics skip them.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from benchmarking.client import ClientConfig, RawTransport
from benchmarking.metrics import RequestRecord


@dataclass
class WorkItem:
    body: bytes
    prompt_len: int
    osl: int


@dataclass
class PointRun:
    records: list[RequestRecord] = field(default_factory=list)
    duration: float = 0.0
    budget_exhausted: bool = False
    not_sent: int = 0


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (cheaper I/O), else the default loop."""
    try:
        import uvloop
        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


async def _run_batch(transport, items: list[WorkItem], offsets: list[float], concurrency: int,
                     records: list[RequestRecord], id_prefix: str, warmup: bool,
                     deadline: float | None) -> tuple[float, int, bool]:
    """Send `items`; returns (duration from first release to last completion, number never sent, budget hit)."""
    it = iter(range(len(items)))
    stop = False
    sent = 0
    t0 = time.perf_counter()
    perf = time.perf_counter

    async def worker() -> None:
        nonlocal sent
        for i in it:
            if stop:
                return
            if offsets[i] > 0:
                delay = t0 + offsets[i] - perf()
                if delay > 0:
                    await asyncio.sleep(delay)
                if stop:
                    return
            item = items[i]
            rec = RequestRecord(index=len(records), request_id=f"{id_prefix}-{i}", prompt_len=item.prompt_len,
                                requested_output_len=item.osl, warmup=warmup)
            records.append(rec)
            sent += 1
            await transport.send(rec, item.body)

    workers = [asyncio.ensure_future(worker()) for _ in range(max(1, min(concurrency, len(items))))]
    done_all = asyncio.gather(*workers)
    if deadline is None:
        await done_all
    else:
        try:
            await asyncio.wait_for(asyncio.shield(done_all), max(0.0, deadline - perf()))
        except asyncio.TimeoutError:
            stop = True
            transport.abort_all("budget_exceeded", "point time budget ran out while in flight")
            await done_all
    return perf() - t0, len(items) - sent, stop


async def run_point_async(cfg: ClientConfig, items: list[WorkItem], offsets: list[float], concurrency: int,
                          warmup_items: list[WorkItem] | None = None, budget_s: float | None = None,
                          id_prefix: str = "tt", transport_kind: str = "raw") -> PointRun:
    if transport_kind == "aiohttp":
        from benchmarking.aiohttp_transport import AiohttpTransport
        transport = AiohttpTransport(cfg)
    else:
        transport = RawTransport(cfg)
    run = PointRun()
    deadline = time.perf_counter() + budget_s if budget_s else None
    try:
        if warmup_items:
            *_, hit = await _run_batch(transport, warmup_items, [0.0] * len(warmup_items), concurrency,
                                       run.records, f"{id_prefix}-warmup", True, deadline)
            run.budget_exhausted = hit
        measured: list[RequestRecord] = []
        run.duration, run.not_sent, hit = await _run_batch(transport, items, offsets, concurrency, measured,
                                                           id_prefix, False, deadline)
        run.budget_exhausted = run.budget_exhausted or hit
        for rec in measured:
            rec.index = len(run.records)
            run.records.append(rec)
    finally:
        await transport.close()
    return run


def run_point(cfg: ClientConfig, items: list[WorkItem], offsets: list[float], concurrency: int,
              warmup_items: list[WorkItem] | None = None, budget_s: float | None = None,
              id_prefix: str = "tt", transport_kind: str = "raw") -> PointRun:
    """Blocking wrapper: a fresh (uv)loop per point so nothing leaks between points."""
    loop = new_event_loop()
    try:
        return loop.run_until_complete(run_point_async(cfg, items, offsets, concurrency, warmup_items,
                                                       budget_s, id_prefix, transport_kind))
    finally:
        loop.close()
