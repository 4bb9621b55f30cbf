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
from stress_tests.driver import MONITOR_TICK_S, STOPPED_EARLY, Load, LoadRun, close_window
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
    run = LoadRun()
    state = _State()
    perf = time.perf_counter
    t0 = perf()
    end = t0 + load.duration_s if load.duration_s else None
    deadline = t0 + budget_s if budget_s else None
    total = load.num_prompts
    rng = random.Random(load.seed)

    def stop(reason: str) -> None:
        with state.lock:
            if state.stop_at is None:
                state.stop_at = perf()
                run.stopped_reason = run.stopped_reason or reason

    def take_index() -> int | None:
        """The next request's index, or None when the load is over (count, duration, deadline or stop)."""
        now = perf()
        if deadline is not None and now >= deadline:
            stop("the workflow's time budget ran out")
        with state.lock:
            if state.stop_at is not None or (total is not None and state.issued >= total) or (
                    end is not None and now >= end):
                return None
            state.issued += 1
            return state.issued - 1

    def closed_worker() -> None:
        while (i := take_index()) is not None:
            _send(workload, http, model, state, run, tag, t0, detector, i)

    def open_dispatcher() -> None:
        next_t = t0
        while True:
            next_t += rng.expovariate(load.request_rate)
            delay = next_t - perf()
            if delay > 0:
                time.sleep(delay)
            with state.lock:
                full = state.in_flight >= load.concurrency
            if full and take_index() is not None:
                with state.lock:
                    run.not_sent += 1  # the cap is full: an arrival the server could not take
                continue
            i = take_index()
            if i is None:
                return
            threading.Thread(target=_send, args=(workload, http, model, state, run, tag, t0, detector, i),
                             name=f"{tag}-{i}", daemon=True).start()

    if math.isinf(load.request_rate):
        senders = [threading.Thread(target=closed_worker, name=f"{tag}-worker-{k}", daemon=True)
                   for k in range(max(1, load.concurrency))]
    else:
        senders = [threading.Thread(target=open_dispatcher, name=f"{tag}-dispatch", daemon=True)]
    for thread in senders:
        thread.start()

    next_window = window_s
    while True:
        time.sleep(min(MONITOR_TICK_S, window_s))
        now = perf() - t0
        with state.lock:
            in_flight, stopped_at = state.in_flight, state.stop_at
        senders_done = not any(t.is_alive() for t in senders)
        if senders_done and in_flight == 0:
            break
        if stopped_at is not None and perf() - stopped_at > STOP_GRACE_S:
            break  # requests still blocked in flight are cut (classed below)
        if should_stop() and stopped_at is None:
            stop("interrupted")
        if detector is not None and stopped_at is None:
            with state.lock:
                detector.add_concurrency(now, in_flight)
                verdict = detector.check(now)
            if verdict.fired:
                run.saturation = verdict
                stop(verdict.reason)
        if now >= next_window:
            with state.lock:
                records = list(run.records)
            run.windows.append(close_window(records, t0, next_window - window_s, next_window, in_flight,
                                            memory() if memory else None))
            next_window += window_s
    run.duration_s = perf() - t0
    with state.lock:
        for rec in run.records:  # still blocked in flight past the grace period
            if not rec.success and rec.error_class is None:
                rec.error_class, rec.error = STOPPED_EARLY, "still in flight when the load was stopped"
        records = list(run.records)
        issued = state.issued
    if total is not None:
        run.not_sent += max(0, total - issued)
    if run.windows or load.duration_s:  # close the last partial window of a timed load
        last = run.windows[-1].t_end if run.windows else 0.0
        if run.duration_s - last > 0.5:
            run.windows.append(close_window(records, t0, last, run.duration_s + 1e-6, 0,
                                            memory() if memory else None))
    if detector is not None and run.saturation is None:
        run.saturation = detector.check(run.duration_s)
    run.records = records
    return run
