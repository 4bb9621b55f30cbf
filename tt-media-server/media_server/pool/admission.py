"""Admission: which requests a model takes, its bounded queue, and how each request ends.

Why apart from dispatch and supervision: whether a request may wait (queue room, the estimated
wait against its deadline, a server shutting down) and how it is answered exactly once (result,
error, cancellation, 504) do not depend on how work reaches workers or how workers are kept
alive; both of those call in here to finish requests.
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import math
import os
import time
from typing import Any

from media_server import metrics
from media_server.config import Settings
from media_server.errors import MediaError, NotReady, QueueFull, ShuttingDown
from media_server.request_id import current_request_id
from media_server.runners.base import StreamEvent

_ids = itertools.count()
_EWMA_WEIGHT = 0.3


@dataclasses.dataclass(eq=False)
class Pending:
    """One admitted request.

    request_id: routes the worker's answer back to it.
    payload: the runner input.
    enqueued: monotonic time it was admitted.
    deadline: monotonic time after which it fails with 504 (streams: renewed by each event).
    future: result of a batch request; events: queue of a streaming request.
    worker: the worker running it (a WorkerHandle), None while queued.
    done: answered, failed or cancelled; nothing more happens to it.
    http_request_id: the X-Request-ID of the HTTP request(s) it serves (``request_id``'s context at
      admission), sent to the worker so the worker's log lines for it carry it too.
    """

    request_id: str
    payload: Any
    enqueued: float
    deadline: float
    future: asyncio.Future | None = None
    events: asyncio.Queue | None = None
    worker: Any = None
    done: bool = False
    http_request_id: str | None = None


class Admission:
    """The queue of one model and the bookkeeping of its admitted requests.

    queue: requests waiting for a worker, oldest first; by_id: every admitted request not yet
    finished (queued or running); batch_seconds: EWMA of recent batch (or step) times, the unit
    of the estimated wait; closing: set at shutdown, after which nothing is admitted.
    """

    def __init__(self, model_id: str, settings: Settings):
        self.model_id = model_id
        self.settings = settings
        self.queue: collections.deque[Pending] = collections.deque()
        self.by_id: dict[str, Pending] = {}
        self.batch_seconds = 0.0
        self.closing = False
        self.depth = metrics.QUEUE_DEPTH.labels(model=model_id)
        self._requests = {}  # status -> counter child, looked up once
        self._seconds = metrics.REQUEST_SECONDS.labels(model=model_id)

    def admit(self, payload: Any, deadline_s: float, stream: bool, ready: list) -> Pending:
        """Queue one request, or raise the MediaError that says why not (503, 429)."""
        if self.closing:
            raise ShuttingDown("the server is shutting down")
        if not ready:
            raise NotReady(f"model {self.model_id} is not ready: no warm worker yet")
        if len(self.queue) >= self.settings.max_queue_size:
            metrics.REJECTED.labels(model=self.model_id, reason="queue_full").inc()
            raise QueueFull(f"queue of {self.model_id} is full ({self.settings.max_queue_size} "
                            "waiting)", retry_after=max(1.0, self.batch_seconds))
        estimate = self.estimated_wait(ready)
        if estimate > deadline_s:
            metrics.REJECTED.labels(model=self.model_id, reason="estimated_wait").inc()
            raise QueueFull(f"estimated wait {estimate:.1f} s (queue {len(self.queue)} x recent "
                            f"batch {self.batch_seconds:.2f} s) exceeds the {deadline_s:g} s "
                            "deadline", retry_after=estimate - deadline_s)
        now = time.monotonic()
        pending = Pending(f"r{next(_ids)}-{os.getpid()}", payload, now, now + deadline_s,
                          http_request_id=current_request_id())
        if stream:
            pending.events = asyncio.Queue()
        else:
            pending.future = asyncio.get_running_loop().create_future()
        self.queue.append(pending)
        self.by_id[pending.request_id] = pending
        self.depth.set(len(self.queue))
        return pending

    def estimated_wait(self, ready: list) -> float:
        """Seconds until a new request would be answered: the batches ahead of it (queued and
        running) plus its own, times the recent batch time."""
        if not self.batch_seconds or not ready:
            return 0.0
        per_round = max(1, sum(w.max_batch * w.capacity for w in ready))
        running = sum(len(w.inflight) for w in ready)
        rounds = math.ceil((len(self.queue) + running + 1) / per_round)
        return rounds * self.batch_seconds

    def note_batch_time(self, seconds: float) -> None:
        if self.batch_seconds:
            self.batch_seconds += _EWMA_WEIGHT * (seconds - self.batch_seconds)
        else:
            self.batch_seconds = seconds

    def _count(self, status: str) -> None:
        counter = self._requests.get(status)
        if counter is None:
            counter = self._requests[status] = metrics.REQUESTS.labels(model=self.model_id, status=status)
        counter.inc()

    def finish(self, pending: Pending, result: Any = None, error: MediaError | None = None) -> None:
        """Answer the request once: its result, or its error."""
        if pending.done:
            return
        pending.done = True
        self.by_id.pop(pending.request_id, None)
        self._count(str(error.status if error else 200))
        self._seconds.observe(time.monotonic() - pending.enqueued)
        if pending.future is not None:
            if not pending.future.done():
                if error:
                    pending.future.set_exception(error)
                else:
                    pending.future.set_result(result)
        else:
            pending.events.put_nowait(error if error else StreamEvent(pending.request_id, "done", result))

    def withdraw(self, pending: Pending, reason: str) -> bool:
        """Mark the request ended without an answer (counted under ``reason``); a queued one
        leaves the queue. False when it had already ended."""
        if pending.done:
            return False
        pending.done = True
        self.by_id.pop(pending.request_id, None)
        self._count(reason)
        if pending.worker is None:
            try:
                self.queue.remove(pending)
            except ValueError:
                pass
            self.depth.set(len(self.queue))
        return True

    def fail_all(self, error: MediaError, only_queued: bool = False) -> None:
        """Fail every queued request (and, unless ``only_queued``, every running one too)."""
        doomed = list(self.queue) if only_queued else list(self.by_id.values())
        for pending in doomed:
            self.finish(pending, error=error)
        self.queue.clear()
        self.depth.set(0)
