"""Drive one stress load with the benchmark client, watching it as it runs.

Unlike a benchmark point, a stress load may run for a duration instead of a request count
(endurance), may be open-loop (a request rate, with up to ``max_in_flight`` in flight), and is
watched while it runs: every quarter second the in-flight count feeds the over-saturation detector, every
``window_s`` a window closes with its latency percentiles and a server memory sample. When the
detector fires the load stops: nothing new is sent and requests still in flight are cut and
classed ``stopped_early`` (kept apart from server errors).

The HTTP client, request records, prompts and request bodies are the benchmark client's own.

Why a loop of its own and not ``benchmarking.runner``'s: the benchmark point loop is the one whose
release timing is certified (``benchmarking/certify.py``: the client's own timing error p99 under
1 ms at concurrency 64), so it runs nothing between releases. A stress load needs exactly that
extra work on the same event loop: a monitor task every quarter second, windows closed with their
percentiles and memory samples, and a stop decided while requests are in flight. Everything below
the loop (transport, request records, work items, the event loop policy) is shared.
"""
from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import dataclass, field
from typing import Callable

from benchmarking.client import ClientConfig, RawTransport
from benchmarking.metrics import RequestRecord
from contracts.intervals import percentile
from benchmarking.runner import WorkItem, new_event_loop
from stress_tests.saturation import SaturationDetector, SaturationVerdict

STOPPED_EARLY = "stopped_early"
MONITOR_TICK_S = 0.25  # how often the in-flight count is sampled and the detector asked


@dataclass
class Load:
    concurrency: int                 # closed loop: this many workers; open loop: cap on in flight
    num_prompts: int | None          # requests to send (None: until duration_s)
    duration_s: float | None = None
    request_rate: float = math.inf   # finite: open loop, Poisson arrivals at this rate
    seed: int = 0


@dataclass
class Window:
    """One closed window of an ongoing load (t_end is seconds since the load started)."""

    t_end: float
    completed: int
    failed: int
    in_flight: int
    ttft_p50_ms: float | None
    tpot_p50_ms: float | None
    e2el_p50_ms: float | None
    memory_bytes: float | None
    e2el_p95_ms: float | None = None
    e2el_p99_ms: float | None = None


@dataclass
class LoadRun:
    records: list[RequestRecord] = field(default_factory=list)
    duration_s: float = 0.0
    windows: list[Window] = field(default_factory=list)
    saturation: SaturationVerdict | None = None
    stopped_reason: str | None = None
    not_sent: int = 0


def close_window(records: list[RequestRecord], t0: float, lo: float, hi: float, in_flight: int,
                 memory: float | None) -> Window:
    """The window [lo, hi) seconds into the load: requests that ended in it, its percentiles, memory."""
    done = [r for r in records if r.latency is not None and lo <= r.send_time - t0 + r.latency < hi]
    ok = [r for r in done if r.success]
    failed = [r for r in records if not r.success and r.error_class and r.error_class != STOPPED_EARLY
              and lo <= (r.send_time - t0) < hi]
    ms = lambda xs, q=50: percentile([x * 1000.0 for x in xs], q) if xs else None  # noqa: E731
    e2el = [r.latency for r in ok]
    return Window(round(hi, 3), len(ok), len(failed), in_flight, ms([r.ttft for r in ok]),
                  ms([r.tpot for r in ok if r.tpot is not None]), ms(e2el), memory, ms(e2el, 95), ms(e2el, 99))


def close_load(run: LoadRun, records: list[RequestRecord], t0: float, load: Load, issued: int,
               memory: Callable[[], float | None] | None, detector: SaturationDetector | None) -> None:
    """What every load does once it has ended (``run.duration_s`` set): count the requests never sent, close
    the last partial window of a timed load, and ask the detector for its verdict over the whole load."""
    if load.num_prompts is not None:
        run.not_sent += max(0, load.num_prompts - issued)
    if run.windows or load.duration_s:  # close the last partial window of a timed load
        last = run.windows[-1].t_end if run.windows else 0.0
        if run.duration_s - last > 0.5:
            run.windows.append(close_window(records, t0, last, run.duration_s + 1e-6, 0,
                                            memory() if memory else None))
    if detector is not None and run.saturation is None:
        run.saturation = detector.check(run.duration_s)


class _LoadDriver:
    """One load on one event loop: its senders (closed-loop workers or an open-loop dispatcher) and the
    monitor that watches them, sharing the counters below."""

    def __init__(self, cfg: ClientConfig, pool: list[WorkItem], load: Load, tag: str, window_s: float,
                 detector: SaturationDetector | None, memory: Callable[[], float | None] | None,
                 deadline: float | None, should_stop: Callable[[], bool]) -> None:
        self.pool, self.load, self.tag, self.window_s = pool, load, tag, window_s
        self.detector, self.memory, self.deadline, self.should_stop = detector, memory, deadline, should_stop
        self.transport = RawTransport(cfg)
        self.run = LoadRun()
        self.in_flight = self.issued = 0
        self.stop = False
        self.perf = time.perf_counter
        self.t0 = self.perf()
        self.end = self.t0 + load.duration_s if load.duration_s else None
        self.rng = random.Random(load.seed)

    async def drive(self) -> LoadRun:
        if math.isinf(self.load.request_rate):
            main = asyncio.gather(*(self.closed_worker() for _ in range(max(1, self.load.concurrency))))
        else:
            main = asyncio.ensure_future(self.open_dispatcher())
        watcher = asyncio.ensure_future(self.monitor(main))
        try:
            await self.wait_within_deadline(main)
        finally:
            self.run.duration_s = self.perf() - self.t0
            watcher.cancel()
            await self.transport.close()
        close_load(self.run, self.run.records, self.t0, self.load, self.issued, self.memory, self.detector)
        return self.run

    async def wait_within_deadline(self, main: asyncio.Future) -> None:
        """Until the senders are done; at the workflow's deadline, stop them and cut what is in flight."""
        if self.deadline is None:
            await main
            return
        try:
            await asyncio.wait_for(asyncio.shield(main), max(0.0, self.deadline - self.perf()) + 0.001)
        except asyncio.TimeoutError:
            self.stop = True
            self.run.stopped_reason = self.run.stopped_reason or "the workflow's time budget ran out"
            self.transport.abort_all(STOPPED_EARLY, "time budget ran out while in flight")
            await main

    def more(self) -> bool:
        """Whether another request may be sent: not stopped, count, duration and deadline not reached."""
        if self.stop or (self.load.num_prompts is not None and self.issued >= self.load.num_prompts):
            return False
        now = self.perf()
        return not ((self.end is not None and now >= self.end) or (self.deadline is not None and now >= self.deadline))

    async def send_one(self) -> None:
        i = self.issued
        self.issued += 1
        item = self.pool[i % len(self.pool)]
        rec = RequestRecord(index=i, request_id=f"tt-stress-{self.tag}-{i}", prompt_len=item.prompt_len,
                            requested_output_len=item.osl)
        self.run.records.append(rec)
        self.in_flight += 1
        try:
            await self.transport.send(rec, item.body)
        finally:
            self.in_flight -= 1
        if rec.success and self.detector is not None and rec.ttft is not None:
            self.detector.add_ttft(rec.send_time - self.t0 + rec.ttft, rec.ttft * 1000.0)

    async def closed_worker(self) -> None:
        while self.more():
            await self.send_one()

    async def open_dispatcher(self) -> None:
        """Poisson arrivals at the load's rate; an arrival while ``concurrency`` are in flight is not sent."""
        tasks: set[asyncio.Future] = set()
        next_t = self.t0
        while self.more():
            next_t += self.rng.expovariate(self.load.request_rate)
            delay = next_t - self.perf()
            if delay > 0:
                await asyncio.sleep(delay)
            if not self.more():
                break
            if self.in_flight >= self.load.concurrency:
                self.run.not_sent += 1  # the cap is full: an arrival the server could not take
                continue
            task = asyncio.ensure_future(self.send_one())
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)

    async def monitor(self, main: asyncio.Future) -> None:
        """Every tick: a stop asked for, the detector's view of the in-flight count, a window due."""
        next_window = self.window_s
        while not main.done():
            await asyncio.sleep(min(MONITOR_TICK_S, self.window_s))
            now = self.perf() - self.t0
            if self.should_stop() and not self.stop:
                self.stop_load("interrupted", "interrupted")
            if self.detector is not None:
                self.detector.add_concurrency(now, self.in_flight)
                verdict = self.detector.check(now)
                if verdict.fired and not self.stop:
                    self.run.saturation = verdict
                    self.stop_load(verdict.reason, verdict.reason)
            if now >= next_window:
                mem = self.memory() if self.memory else None
                self.run.windows.append(close_window(self.run.records, self.t0, next_window - self.window_s,
                                                     next_window, self.in_flight, mem))
                next_window += self.window_s

    def stop_load(self, reason: str, abort_detail: str) -> None:
        """Send nothing more and cut the requests in flight (classed ``stopped_early``)."""
        self.run.stopped_reason, self.stop = reason, True
        self.transport.abort_all(STOPPED_EARLY, abort_detail)


async def _drive(cfg: ClientConfig, pool: list[WorkItem], load: Load, tag: str, window_s: float,
                 detector: SaturationDetector | None, memory: Callable[[], float | None] | None,
                 deadline: float | None, should_stop: Callable[[], bool]) -> LoadRun:
    return await _LoadDriver(cfg, pool, load, tag, window_s, detector, memory, deadline, should_stop).drive()


def drive(cfg: ClientConfig, pool: list[WorkItem], load: Load, *, tag: str, window_s: float = 5.0,
          detector: SaturationDetector | None = None, memory: Callable[[], float | None] | None = None,
          budget_s: float | None = None, should_stop: Callable[[], bool] = lambda: False) -> LoadRun:
    """Blocking: run ``load`` over the prompts in ``pool`` (cycled) on a fresh event loop.

    ``should_stop`` is polled by the monitor (a signal handler sets what it reads): the load then
    ends like a saturated one, its in-flight requests cut as ``stopped_early``.
    """
    loop = new_event_loop()
    try:
        deadline = time.perf_counter() + budget_s if budget_s else None
        return loop.run_until_complete(_drive(cfg, pool, load, tag, window_s, detector, memory, deadline,
                                              should_stop))
    finally:
        loop.close()
