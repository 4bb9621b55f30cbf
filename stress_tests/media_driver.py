"""Drive one stress load of a media kind (speech, embedding, CNN, image), watching it as it runs.

The media twin of ``stress_tests.driver``: the same ``Load`` (closed loop at a concurrency, or
open loop at a request rate with a cap on requests in flight; a request count or a duration),
the same ``LoadRun`` result, the same windows, over-saturation detector and memory samples, so
the judge, the records and the report treat both alike. The requests are the media clients' own
(``media_clients.workloads``: one request of a kind is described once); each outcome becomes a
``RequestRecord`` whose first-token time is its end-to-end latency (a media answer arrives whole).

Why threads and not asyncio: the media transport is blocking (large bodies, few requests); a
thread per in-flight request is plenty. A thread blocked in a request cannot be cut, so when a
load is stopped (saturation, signal, budget) nothing new is sent and the requests that end after
the stop are classed ``stopped_early`` (kept apart from server errors); the load returns once
they end or ``STOP_GRACE_S`` after the stop, whichever is first.
"""
from __future__ import annotations

import math
import random
import threading
import time
from typing import Callable

from benchmarking.metrics import RequestRecord
from media_clients.transport import MediaHttp
from media_clients.workloads import Workload
from stress_tests.driver import MONITOR_TICK_S, STOPPED_EARLY, Load, LoadRun, close_load, close_window
from stress_tests.saturation import SaturationDetector

STOP_GRACE_S = 10.0  # after a stop: how long requests in flight may still finish before they are cut


class _State:
    """Counters shared by the sending threads and the monitor (guarded by ``lock``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.issued = 0
        self.in_flight = 0
        self.stop_at: float | None = None  # perf_counter time of the stop, once stopped
        self.done = threading.Event()


def _send(workload: Workload, http: MediaHttp, model: str, state: _State, run: LoadRun, tag: str,
          t0: float, detector: SaturationDetector | None, index: int) -> None:
    rec = RequestRecord(index=index, request_id=f"tt-stress-{tag}-{index}", prompt_len=0, requested_output_len=0)
    with state.lock:
        run.records.append(rec)
        state.in_flight += 1
    rec.send_time = time.perf_counter()
    try:
        sent = workload.send(http, model, index)
    except Exception as exc:  # noqa: BLE001 - a broken answer is a failed request, never a crash
        sent = None
        rec.error_class, rec.error = "client_error", f"{type(exc).__name__}: {exc}"
    ended = time.perf_counter()
    with state.lock:
        state.in_flight -= 1
        cut = state.stop_at is not None and ended > state.stop_at
    if sent is not None:
        rec.status = sent.answer.status
        rec.output_tokens = sent.items  # items of the request (clips, images, inputs): the media "output"
        rec.output_token_source = "items"
        rec.error_class, rec.error = sent.error_class, sent.error
    if cut:
        rec.success, rec.error_class, rec.error = False, STOPPED_EARLY, "answered after the load was stopped"
        return
    if rec.error_class is None:
        rec.success = True
        rec.latency = rec.ttft = ended - rec.send_time
        if detector is not None:
            with state.lock:
                detector.add_ttft(ended - t0, rec.latency * 1000.0)


def drive_media(workload: Workload, http: MediaHttp, model: str, load: Load, *, tag: str, window_s: float = 5.0,
                detector: SaturationDetector | None = None, memory: Callable[[], float | None] | None = None,
                budget_s: float | None = None, should_stop: Callable[[], bool] = lambda: False) -> LoadRun:
    """Blocking: run ``load`` with requests of ``workload``; request ``i`` uses the workload's input ``i``."""
    return _MediaLoad(workload, http, model, load, tag, window_s, detector, memory, budget_s, should_stop).drive()


class _MediaLoad:
    """One media load: its sending threads (closed-loop workers or an open-loop dispatcher) and the monitor
    (the calling thread) that watches them through the shared ``_State``."""

    def __init__(self, workload: Workload, http: MediaHttp, model: str, load: Load, tag: str, window_s: float,
                 detector: SaturationDetector | None, memory: Callable[[], float | None] | None,
                 budget_s: float | None, should_stop: Callable[[], bool]) -> None:
        self.workload, self.http, self.model, self.load, self.tag = workload, http, model, load, tag
        self.window_s, self.detector, self.memory, self.should_stop = window_s, detector, memory, should_stop
        self.run = LoadRun()
        self.state = _State()
        self.perf = time.perf_counter
        self.t0 = self.perf()
        self.end = self.t0 + load.duration_s if load.duration_s else None
        self.deadline = self.t0 + budget_s if budget_s else None
        self.rng = random.Random(load.seed)

    def drive(self) -> LoadRun:
        if math.isinf(self.load.request_rate):
            senders = [threading.Thread(target=self.closed_worker, name=f"{self.tag}-worker-{k}", daemon=True)
                       for k in range(max(1, self.load.concurrency))]
        else:
            senders = [threading.Thread(target=self.open_dispatcher, name=f"{self.tag}-dispatch", daemon=True)]
        for thread in senders:
            thread.start()
        self.monitor(senders)
        self.run.duration_s = self.perf() - self.t0
        state = self.state
        with state.lock:
            for rec in self.run.records:  # still blocked in flight past the grace period
                if not rec.success and rec.error_class is None:
                    rec.error_class, rec.error = STOPPED_EARLY, "still in flight when the load was stopped"
            records = list(self.run.records)
            issued = state.issued
        close_load(self.run, records, self.t0, self.load, issued, self.memory, self.detector)
        self.run.records = records
        return self.run

    def stop(self, reason: str) -> None:
        with self.state.lock:
            if self.state.stop_at is None:
                self.state.stop_at = self.perf()
                self.run.stopped_reason = self.run.stopped_reason or reason

    def take_index(self) -> int | None:
        """The next request's index, or None when the load is over (count, duration, deadline or stop)."""
        state, total = self.state, self.load.num_prompts
        now = self.perf()
        if self.deadline is not None and now >= self.deadline:
            self.stop("the workflow's time budget ran out")
        with state.lock:
            if state.stop_at is not None or (total is not None and state.issued >= total) or (
                    self.end is not None and now >= self.end):
                return None
            state.issued += 1
            return state.issued - 1

    def send(self, index: int) -> None:
        _send(self.workload, self.http, self.model, self.state, self.run, self.tag, self.t0, self.detector, index)

    def closed_worker(self) -> None:
        while (i := self.take_index()) is not None:
            self.send(i)

    def open_dispatcher(self) -> None:
        """Poisson arrivals at the load's rate, a thread each; an arrival while the cap is full is not sent."""
        next_t = self.t0
        while True:
            next_t += self.rng.expovariate(self.load.request_rate)
            delay = next_t - self.perf()
            if delay > 0:
                time.sleep(delay)
            with self.state.lock:
                full = self.state.in_flight >= self.load.concurrency
            if full and self.take_index() is not None:
                with self.state.lock:
                    self.run.not_sent += 1  # the cap is full: an arrival the server could not take
                continue
            i = self.take_index()
            if i is None:
                return
            threading.Thread(target=_send, args=(self.workload, self.http, self.model, self.state, self.run, self.tag,
                                                 self.t0, self.detector, i),
                             name=f"{self.tag}-{i}", daemon=True).start()

    def monitor(self, senders: list[threading.Thread]) -> None:
        """Every tick until the senders are done and nothing is in flight (or the grace after a stop ran out):
        a stop asked for, the detector's view of the in-flight count, a window due."""
        next_window = self.window_s
        while True:
            time.sleep(min(MONITOR_TICK_S, self.window_s))
            now = self.perf() - self.t0
            with self.state.lock:
                in_flight, stopped_at = self.state.in_flight, self.state.stop_at
            senders_done = not any(t.is_alive() for t in senders)
            if senders_done and in_flight == 0:
                break
            if stopped_at is not None and self.perf() - stopped_at > STOP_GRACE_S:
                break  # requests still blocked in flight are cut (classed in drive)
            if self.should_stop() and stopped_at is None:
                self.stop("interrupted")
            if self.detector is not None and stopped_at is None:
                with self.state.lock:
                    self.detector.add_concurrency(now, in_flight)
                    verdict = self.detector.check(now)
                if verdict.fired:
                    self.run.saturation = verdict
                    self.stop(verdict.reason)
            if now >= next_window:
                with self.state.lock:
                    records = list(self.run.records)
                self.run.windows.append(close_window(records, self.t0, next_window - self.window_s, next_window,
                                                     in_flight, self.memory() if self.memory else None))
                next_window += self.window_s
