"""Dispatch: queued requests to idle workers, and the workers' answers back to their requests.

Why its own module: this is the hot path every request crosses twice (out in a RunBatch or
AddRequest, back in BatchResults or StreamEvents); it holds no lifecycle logic, so its cost per
request is easy to see and to measure (benchmarks/scheduler_overhead.py).

Batch runners: an idle worker takes up to its ``max_batch`` queued requests at once; with fewer
queued, the oldest waits up to MAX_BATCH_DELAY_TIME_MS for company. What is queued is shared evenly
among the idle workers (two queued requests and two idle workers: one each, where the first worker
would otherwise take both and the second would wait). Streaming runners: each
request goes alone to a worker with a free slot, and a cancel is forwarded to it.
"""
from __future__ import annotations

import asyncio
import time

from media_server import metrics
from media_server.errors import error_for_status
from media_server.pool.admission import Admission, Pending
from media_server.runners.base import ItemError, StreamEvent
from media_server.worker_messages import (AddRequest, BatchResults, CancelRequest, FromWorker, RunBatch,
                                          StreamEvents)


class Dispatcher:
    """Moves one model's work between its Admission queue and its workers."""

    def __init__(self, model_id: str, admission: Admission, workers: list, streaming: bool):
        self.model_id = model_id
        self.admission = admission
        self.workers = workers
        self.streaming = streaming
        self.window_handle: asyncio.TimerHandle | None = None
        self._window_s = admission.settings.max_batch_delay_time_ms / 1000
        self._stream_timeout_s = admission.settings.default_inference_timeout_seconds
        self._batch_size = metrics.BATCH_SIZE.labels(model=model_id)
        self._queue_wait = metrics.QUEUE_WAIT_SECONDS.labels(model=model_id)

    def dispatch(self) -> None:
        """Hand queued requests to idle workers (greedy batches within the batching window)."""
        if self.window_handle:
            self.window_handle.cancel()
            self.window_handle = None
        queue = self.admission.queue
        while queue:
            worker = self._idle_worker()
            if worker is None:
                return
            if self.streaming:
                pending = queue.popleft()
                self._assign(worker, [pending])
                worker.send(AddRequest(pending.request_id, pending.payload, pending.http_request_id))
                continue
            limit = worker.max_batch
            waited = time.monotonic() - queue[0].enqueued
            if len(queue) < limit and self._window_s > 0 and waited < self._window_s:
                self.window_handle = asyncio.get_running_loop().call_later(
                    self._window_s - waited, self.dispatch)
                return
            share = -(-len(queue) // self._idle_count())
            batch = [queue.popleft() for _ in range(min(limit, share))]
            self._assign(worker, batch)
            self._batch_size.observe(len(batch))
            worker.send(RunBatch([(p.request_id, p.payload) for p in batch],
                                 tuple(p.http_request_id for p in batch)))
        self.admission.depth.set(0)

    def cancel_window(self) -> None:
        if self.window_handle:
            self.window_handle.cancel()
            self.window_handle = None

    def _idle_count(self) -> int:
        """Ready workers with room for a batch (at least 1: called once `_idle_worker` found one)."""
        return max(1, sum(1 for w in self.workers if w.state == "ready" and len(w.inflight) < w.capacity))

    def _idle_worker(self):
        for worker in self.workers:
            if worker.state == "ready" and len(worker.inflight) < worker.capacity:
                return worker
        return None

    def _assign(self, worker, batch: list[Pending]) -> None:
        now = time.monotonic()
        for pending in batch:
            pending.worker = worker
            worker.inflight[pending.request_id] = pending
            self._queue_wait.observe(now - pending.enqueued)
        self.admission.depth.set(len(self.admission.queue))

    def forward_cancel(self, pending: Pending) -> None:
        """A running request's client went away: a streaming worker frees its slot now; a batch
        already on a worker runs to the end and its result is dropped on arrival."""
        worker = pending.worker
        if self.streaming and worker.inflight.pop(pending.request_id, None) is not None:
            worker.send(CancelRequest(pending.request_id))
            self.dispatch()

    def on_message(self, worker, message: FromWorker) -> None:
        """Route a worker's answers to their requests, then refill the worker."""
        if isinstance(message, BatchResults):
            self.admission.note_batch_time(message.seconds)
            finish = self.admission.finish
            for request_id, result in message.results:
                pending = worker.inflight.pop(request_id, None)
                if pending is None:
                    continue
                if isinstance(result, ItemError):
                    finish(pending, error=error_for_status(result.status, result.message))
                else:
                    finish(pending, result=result)
            self.dispatch()
        elif isinstance(message, StreamEvents):
            if message.seconds:
                self.admission.note_batch_time(message.seconds)
            deadline = time.monotonic() + self._stream_timeout_s
            for request_id, event_type, data in message.events:
                pending = worker.inflight.get(request_id)
                if pending is None:
                    continue
                pending.deadline = deadline
                if event_type == "chunk":
                    pending.events.put_nowait(StreamEvent(request_id, "chunk", data))
                    continue
                worker.inflight.pop(request_id, None)
                if event_type == "done":
                    self.admission.finish(pending, result=data)
                else:
                    self.admission.finish(pending, error=error_for_status(
                        int(data.get("status", 500)), str(data.get("message", ""))))
            self.dispatch()
