"""Drive one point: warm-up, release schedule, concurrency cap, time budget (needs the client).

Concurrency is a closed loop of `max_concurrency` workers; each takes the next request, waits for
its release time (open-loop arrivals), sends it and records it. A point stops early, keeping what
finished, for three reasons:

* its time budget runs out: nothing new is sent, in-flight requests fail as `budget_exceeded`;
* SIGINT/SIGTERM (when `stop_on_signals`): the same, with `interrupted`, and `PointRun.interrupted`
  holds the signal, so the caller can write the partial point and exit 128+N;
* a request `stall`s (no data for the stall timeout) while no other request got data or
  completed in that time either (the server went silent, not one stream): nothing new is sent,
  in-flight requests end on their own stall timers. A silent server ends the point within about
  one stall timeout instead of making every remaining request wait for its own.

Warm-up requests run first with the same workers and are marked so metrics skip them.
"""
from __future__ import annotations

import asyncio
import signal
import threading
import time
from dataclasses import dataclass, field

from benchmarking.client import ClientConfig, RawTransport
from benchmarking.metrics import RequestRecord

STOP_SENDING_ON = frozenset({"stall"})  # error classes after which a point sends nothing new


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
    interrupted: int | None = None     # signal number that stopped the point, if any
    stopped_by: str | None = None      # error class that stopped sending (see STOP_SENDING_ON)
    origin: float = 0.0                # perf_counter the measured release offsets count from


class _Halt:
    """Why a point stops early; set from a worker, a signal handler or the budget timer."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.signum: int | None = None
        self.stopped_by: str | None = None

    def on_signal(self, signum: int) -> None:
        self.signum = signum
        self.event.set()


def _server_silent(transport) -> bool:
    check = getattr(transport, "server_silent", None)
    return check() if check is not None else True


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (cheaper I/O), else the default loop."""
    try:
        import uvloop
        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


async def _run_batch(transport, items: list[WorkItem], offsets: list[float], concurrency: int,
                     records: list[RequestRecord], id_prefix: str, warmup: bool,
                     deadline: float | None, halt: _Halt, origin: list[float] | None = None) -> tuple[float, int, bool]:
    """Send `items`; returns (duration from first release to last completion, number never sent, budget hit).

    Request i is released at ``t0 + offsets[i]``; ``origin`` (a one-item list) receives t0, so a
    caller can measure how late each request left."""
    it = iter(range(len(items)))
    stop = halt.event.is_set() or halt.stopped_by is not None
    sent = 0
    t0 = time.perf_counter()
    if origin is not None:
        origin[:] = [t0]
    perf = time.perf_counter
    sleeping: set[asyncio.Task] = set()

    async def worker() -> None:
        nonlocal sent, stop
        for i in it:
            if stop:
                return
            if offsets[i] > 0:
                delay = t0 + offsets[i] - perf()
                if delay > 0:
                    me = asyncio.current_task()
                    sleeping.add(me)
                    try:
                        while delay > 0:  # uvloop's timers are whole ms: a wake-up can come early
                            await asyncio.sleep(delay)
                            delay = t0 + offsets[i] - perf()
                    except asyncio.CancelledError:
                        return  # woken by a stop: this request is never sent
                    finally:
                        sleeping.discard(me)
                if stop:
                    return
            item = items[i]
            rec = RequestRecord(index=len(records), request_id=f"{id_prefix}-{i}", prompt_len=item.prompt_len,
                                requested_output_len=item.osl, warmup=warmup)
            records.append(rec)
            sent += 1
            await transport.send(rec, item.body)
            if rec.error_class in STOP_SENDING_ON and not stop and _server_silent(transport):
                stop, halt.stopped_by = True, rec.error_class
                for task in list(sleeping):
                    task.cancel()

    budget_hit = False
    if not stop:
        workers = [asyncio.ensure_future(worker()) for _ in range(max(1, min(concurrency, len(items))))]
        done_all = asyncio.gather(*workers)
        halted = asyncio.ensure_future(halt.event.wait())
        timeout = None if deadline is None else max(0.0, deadline - perf())
        done, _ = await asyncio.wait({done_all, halted}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        halted.cancel()
        if done_all not in done:
            stop = True
            for task in list(sleeping):
                task.cancel()
            if halt.event.is_set():
                transport.abort_all("interrupted", f"stopped by {signal.Signals(halt.signum).name}")
            else:
                budget_hit = True
                transport.abort_all("budget_exceeded", "point time budget ran out while in flight")
            await done_all
    return perf() - t0, len(items) - sent, budget_hit


def _install_signal_stop(loop: asyncio.AbstractEventLoop, halt: _Halt) -> list[tuple[int, object]]:
    """Route SIGINT/SIGTERM to `halt` while the point runs; returns what to restore afterwards."""
    if threading.current_thread() is not threading.main_thread():
        return []
    installed = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(signum)
        try:
            loop.add_signal_handler(signum, halt.on_signal, signum)
        except (NotImplementedError, RuntimeError, ValueError):
            continue
        installed.append((signum, previous))
    return installed


def _restore_signals(loop: asyncio.AbstractEventLoop, installed: list[tuple[int, object]]) -> None:
    for signum, previous in installed:
        loop.remove_signal_handler(signum)
        signal.signal(signum, previous)  # remove_signal_handler resets to the default, not to ours


async def run_point_async(cfg: ClientConfig, items: list[WorkItem], offsets: list[float], concurrency: int,
                          warmup_items: list[WorkItem] | None = None, budget_s: float | None = None,
                          id_prefix: str = "tt", stop_on_signals: bool = False,
                          pending_signal=None) -> PointRun:
    transport = RawTransport(cfg)
    run = PointRun()
    halt = _Halt()
    loop = asyncio.get_running_loop()
    installed = _install_signal_stop(loop, halt) if stop_on_signals else []
    if pending_signal is not None and pending_signal():  # a signal that came before the handlers did
        halt.on_signal(pending_signal())
    deadline = time.perf_counter() + budget_s if budget_s else None
    try:
        if warmup_items:
            *_, hit = await _run_batch(transport, warmup_items, [0.0] * len(warmup_items), concurrency,
                                       run.records, f"{id_prefix}-warmup", True, deadline, halt)
            run.budget_exhausted = hit
        measured: list[RequestRecord] = []
        origin: list[float] = []
        run.duration, run.not_sent, hit = await _run_batch(transport, items, offsets, concurrency, measured,
                                                           id_prefix, False, deadline, halt, origin)
        run.origin = origin[0] if origin else 0.0
        run.budget_exhausted = run.budget_exhausted or hit
        for rec in measured:
            rec.index = len(run.records)
            run.records.append(rec)
    finally:
        _restore_signals(loop, installed)
        await transport.close()
    run.interrupted, run.stopped_by = halt.signum, halt.stopped_by
    return run


def run_point(cfg: ClientConfig, items: list[WorkItem], offsets: list[float], concurrency: int,
              warmup_items: list[WorkItem] | None = None, budget_s: float | None = None,
              id_prefix: str = "tt", stop_on_signals: bool = False, pending_signal=None) -> PointRun:
    """Blocking wrapper: a fresh (uv)loop per point so nothing leaks between points.

    With ``stop_on_signals`` SIGINT/SIGTERM stop the point (see module doc); ``pending_signal()``
    returns a signal the caller already received before the point started (the point then sends
    nothing and reports it as interrupted)."""
    loop = new_event_loop()
    try:
        return loop.run_until_complete(run_point_async(cfg, items, offsets, concurrency, warmup_items,
                                                       budget_s, id_prefix, stop_on_signals,
                                                       pending_signal))
    finally:
        loop.close()
