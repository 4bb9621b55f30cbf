"""The scheduler: every served model's pool, found by id or kind, and the request API of the routes.

A pool per model (media_server/pool/): admission (a bounded queue in the server process, deadlines,
each request answered once), dispatch (batches and streams to idle workers, answers back) and
supervision (worker start, death, restart). The queue lives in the server process (not in a
multiprocessing queue), so the scheduler always knows where each request is: queued (a client that
leaves is simply dropped from the queue), or on which worker (a worker that dies fails exactly its
requests, at once, with 503 naming it; a request past its deadline gets 504 and its stuck worker is
killed and restarted).

API for routes:
    result = await scheduler.submit(model_id_or_None, kind, payload)        # batch runners
    async for event in scheduler.stream(model_id_or_None, kind, payload):   # streaming runners
        ...  # event.type in {"chunk", "done"}; errors are raised as MediaError
Both raise MediaError subclasses (errors.py) that map to one status code each. Cancelling the
awaiting task (or closing the stream iterator) cancels the request: removed from the queue, or
a cancel message sent to a streaming worker.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, AsyncIterator, Callable

from media_server.config import Settings
from media_server.errors import MediaError, UnknownModel
from media_server.pool.admission import Pending
from media_server.pool.model_pool import ModelPool
from media_server.runners.base import StreamEvent
from media_server.runners.registry import UnknownRunner

__all__ = ["ModelPool", "Pending", "Scheduler"]

log = logging.getLogger("media_server.scheduler")


class Scheduler:
    """All served models; routes find theirs by id or kind."""

    def __init__(self, settings: Settings, on_fatal: Callable[[str], None] | None = None):
        self.settings = settings
        self._on_fatal = on_fatal or (lambda line: log.critical("%s", line))
        self.pools: dict[str, ModelPool] = {}
        for model_id, runner_name in settings.model_entries():
            try:
                pool = ModelPool(model_id, runner_name, settings, self._fatal)
            except UnknownRunner as exc:
                if not settings.models:
                    raise
                # The name came from MODELS, not MODEL_RUNNER: say so, or the operator edits the wrong one.
                raise UnknownRunner(str(exc).replace("MODEL_RUNNER=", f"MODELS={settings.models!r}: runner ", 1)) \
                    from None
            if pool.model_id in self.pools:
                raise ValueError(f"MODELS: model id {pool.model_id!r} appears twice")
            self.pools[pool.model_id] = pool

    def _fatal(self, line: str) -> None:
        self._on_fatal(line)

    def preflight(self) -> None:
        """Every runner's cheap start-up check (RunnerUnavailable on a missing dependency)."""
        for pool in self.pools.values():
            pool.runner_cls.preflight(self.settings)

    def start(self) -> None:
        for pool in self.pools.values():
            pool.start()

    def begin_shutdown(self) -> None:
        for pool in self.pools.values():
            pool.begin_shutdown()

    async def stop(self) -> None:
        await asyncio.gather(*(pool.stop() for pool in self.pools.values()))

    @property
    def is_ready(self) -> bool:
        return all(pool.is_ready for pool in self.pools.values())

    def pool(self, model: str | None, kind: str) -> ModelPool:
        """The pool serving `model` (must be of `kind`), or the first of that kind."""
        if model:
            pool = self.pools.get(model)
            if pool is None or (kind and pool.kind != kind):
                served = ", ".join(f"{p.model_id} ({p.kind})" for p in self.pools.values())
                raise UnknownModel(f"model {model!r} is not served here as {kind or 'any kind'}; "
                                   f"served: {served}")
            return pool
        for pool in self.pools.values():
            if pool.kind == kind:
                return pool
        served = ", ".join(f"{p.model_id} ({p.kind})" for p in self.pools.values())
        raise UnknownModel(f"no {kind} model is served here; served: {served}")

    async def submit(self, model: str | None, kind: str, payload: Any,
                     deadline_s: float | None = None) -> Any:
        """Run one request on a batch runner and return its result."""
        pool = self.pool(model, kind)
        deadline_s = deadline_s or self.settings.default_inference_timeout_seconds
        pending = pool.admit(payload, deadline_s, stream=False)
        try:
            return await asyncio.wait_for(asyncio.shield(pending.future), deadline_s)
        except asyncio.TimeoutError:
            if pending.future.done():
                return pending.future.result()
            raise pool.expire(pending) from None
        except asyncio.CancelledError:
            pool.cancel(pending)
            raise

    async def stream(self, model: str | None, kind: str, payload: Any,
                     deadline_s: float | None = None,
                     merge: Callable[[Any, Any], Any] | None = None) -> AsyncIterator[StreamEvent]:
        """Run one request on a streaming runner; yields chunk events, then the done event.

        ``merge(data, later_data)``, when given, folds the chunks already queued for this request
        into one: a reader that fell behind the worker then pays its per-chunk cost (framing,
        one HTTP write) once per read, not once per token.
        """
        pool = self.pool(model, kind)
        deadline_s = deadline_s or self.settings.default_inference_timeout_seconds
        pending = pool.admit(payload, deadline_s, stream=True)
        events = pending.events
        held = None
        try:
            while True:
                if held is not None:
                    event, held = held, None
                elif not events.empty():
                    event = events.get_nowait()  # no timer to arm when the event is already here
                else:
                    timeout = max(0.0, pending.deadline - time.monotonic())
                    try:
                        event = await asyncio.wait_for(events.get(), timeout)
                    except asyncio.TimeoutError:
                        if not events.empty():
                            continue
                        if pending.deadline > time.monotonic():
                            continue
                        raise pool.expire(pending) from None
                if isinstance(event, MediaError):
                    raise event
                if merge is not None and event.type == "chunk":
                    data = event.data
                    while not events.empty():
                        later = events.get_nowait()
                        if isinstance(later, MediaError) or later.type != "chunk":
                            held = later
                            break
                        data = merge(data, later.data)
                    if data is not event.data:
                        event = StreamEvent(event.request_id, "chunk", data)
                yield event
                if event.type == "done":
                    return
        finally:
            if not pending.done:
                pool.cancel(pending)

    def liveness(self) -> dict[str, Any]:
        pools = list(self.pools.values())
        return {
            "status": "alive",
            "model_ready": self.is_ready,
            "queue_size": sum(len(p.queue) for p in pools),
            "max_queue_size": self.settings.max_queue_size,
            "worker_count": sum(len(p.ready_workers()) for p in pools),
            "runner": ",".join(p.runner_name for p in pools),
            "runner_in_use": ",".join(p.runner_name for p in pools),
            "models": [p.describe() for p in pools],
        }
