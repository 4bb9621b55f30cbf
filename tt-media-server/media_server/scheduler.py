"""The scheduler: admission, a bounded queue per model, batching, deadlines, worker lifecycle.

The queue lives in the server process (not in a multiprocessing queue), so the scheduler always
knows where each request is: queued (a client that leaves is simply dropped from the queue), or
on which worker (a worker that dies fails exactly its requests, at once, with 503 naming it; a
request past its deadline gets 504 and its stuck worker is killed and restarted).

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
import collections
import dataclasses
import itertools
import logging
import math
import os
import time
from typing import Any, AsyncIterator, Callable

from media_server import metrics
from media_server.config import Settings
from media_server.errors import (DeadlineExceeded, MediaError, NotReady, QueueFull, ShuttingDown,
                                 UnknownModel, WorkerLost, error_for_status)
from media_server.runners.base import ItemError, StreamEvent
from media_server.runners.registry import UnknownRunner, runner_class
from media_server.workers import WorkerHandle

log = logging.getLogger("media_server.scheduler")
_ids = itertools.count()
_EWMA_WEIGHT = 0.3


@dataclasses.dataclass(eq=False)
class Pending:
    """One admitted request.

    request_id: routes the worker's answer back to it.
    payload: the runner input.
    deadline: monotonic time after which it fails with 504 (streams: renewed by each event).
    future: result of a batch request; events: queue of a streaming request.
    worker: the worker running it, None while queued.
    """

    request_id: str
    payload: Any
    enqueued: float
    deadline: float
    future: asyncio.Future | None = None
    events: asyncio.Queue | None = None
    worker: WorkerHandle | None = None
    done: bool = False


class ModelPool:
    """One served model: its runner class, queue and worker processes (one per device group)."""

    def __init__(self, model_id: str, runner_name: str, settings: Settings,
                 on_fatal: Callable[[str], None]):
        self.runner_name = runner_name
        self.runner_cls = runner_class(runner_name)
        self.model_id = model_id or self.runner_cls.model_id or runner_name
        self.kind = self.runner_cls.kind
        self.streaming = self.runner_cls.streaming
        self.settings = settings
        self._on_fatal = on_fatal
        self.queue: collections.deque[Pending] = collections.deque()
        self.by_id: dict[str, Pending] = {}
        self.workers = [WorkerHandle(g.index, g, runner_name, self.model_id, settings,
                                     self._on_message, self._on_exit)
                        for g in settings.device_groups()]
        self.batch_seconds = 0.0  # EWMA of recent batch/step time
        self.closing = False
        self._start_task: asyncio.Task | None = None
        self._check_task: asyncio.Task | None = None
        self._window_handle: asyncio.TimerHandle | None = None
        self._restart_tasks: set[asyncio.Task] = set()
        self._depth = metrics.QUEUE_DEPTH.labels(model=self.model_id)
        self._ready_gauge = metrics.WORKERS_READY.labels(model=self.model_id)

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._start_task = asyncio.create_task(self._start_all(), name=f"start-{self.model_id}")
        self._check_task = asyncio.create_task(self._check_workers(), name=f"check-{self.model_id}")

    async def _check_workers(self) -> None:
        """Every WORKER_CHECK_SLEEP_TIMEOUT seconds, a ready worker whose process is gone is
        handled as a death. A backstop: the pipe's EOF reports a death at once, unless something
        else holds the pipe open (a process the runner started, for instance)."""
        while not self.closing:
            await asyncio.sleep(self.settings.worker_check_sleep_timeout)
            for worker in self.workers:
                if worker.state == "ready" and worker.process is not None and not worker.process.is_alive():
                    log.warning("%s found dead by the periodic worker check", worker.name)
                    worker._detach()
                    self._on_exit(worker)

    async def _start_all(self) -> None:
        """Start workers one after another, each once the previous one is warm."""
        for position, worker in enumerate(self.workers):
            if self.closing:
                return
            if position and self.settings.new_device_delay_seconds:
                await asyncio.sleep(self.settings.new_device_delay_seconds)
            ok = await self._start_worker(worker)
            if not ok and position == 0 and not self.closing:
                self._on_fatal(f"{self.model_id}: {worker.failure}")
                return

    async def _start_worker(self, worker: WorkerHandle) -> bool:
        if self.closing:
            return False
        worker.start()
        try:
            await asyncio.wait_for(worker.ready_event.wait(),
                                   self.settings.worker_start_timeout_seconds)
        except asyncio.TimeoutError:
            worker.failure = (f"{self.runner_name} on {worker.name} did not warm up within "
                              f"WORKER_START_TIMEOUT_SECONDS={self.settings.worker_start_timeout_seconds:g}")
            worker.kill()
        if worker.state != "ready":
            if worker.failure is None:
                worker.failure = f"{worker.name} exited during load (exit code {worker.exit_code()})"
            worker.state = "failed"
            log.error("cannot start %s", worker.failure)
            return False
        log.info("%s of %s is ready", worker.name, self.model_id)
        self._ready_gauge.inc()
        self._dispatch()
        return True

    def begin_shutdown(self) -> None:
        """Refuse new work and fail every queued or running request with a clear 503."""
        self.closing = True
        if self._window_handle:
            self._window_handle.cancel()
        error = ShuttingDown("the server is shutting down; the request was not completed")
        for pending in list(self.by_id.values()):
            self._finish(pending, error=error)
        self.queue.clear()
        self._depth.set(0)

    async def stop(self) -> None:
        """Fail everything still waiting, then stop every worker."""
        self.begin_shutdown()
        for task in [self._start_task, self._check_task, *self._restart_tasks]:
            if task and not task.done():
                task.cancel()
        for worker in self.workers:
            worker.request_stop()
        await asyncio.gather(*(asyncio.to_thread(w.wait_stopped, 10.0) for w in self.workers
                               if w.process is not None))
        for worker in self.workers:
            metrics.mark_process_dead(worker.process.pid if worker.process else None)

    # ---- views -------------------------------------------------------------------------------
    def ready_workers(self) -> list[WorkerHandle]:
        return [w for w in self.workers if w.state == "ready"]

    @property
    def is_ready(self) -> bool:
        return bool(self.ready_workers())

    def describe(self) -> dict[str, Any]:
        return {"id": self.model_id, "kind": self.kind, "runner": self.runner_name,
                "streaming": self.streaming, "ready": self.is_ready,
                "queue_size": len(self.queue), "workers": [
                    {"index": w.index, "devices": w.group.label, "state": w.state,
                     "restarts": w.restarts, "inflight": len(w.inflight)} for w in self.workers]}

    # ---- admission ---------------------------------------------------------------------------
    def admit(self, payload: Any, deadline_s: float, stream: bool) -> Pending:
        if self.closing:
            raise ShuttingDown("the server is shutting down")
        ready = self.ready_workers()
        if not ready:
            raise NotReady(f"model {self.model_id} is not ready: no warm worker yet")
        if len(self.queue) >= self.settings.max_queue_size:
            metrics.REJECTED.labels(model=self.model_id, reason="queue_full").inc()
            raise QueueFull(f"queue of {self.model_id} is full ({self.settings.max_queue_size} "
                            "waiting)", retry_after=max(1.0, self.batch_seconds))
        estimate = self.estimated_wait(len(ready))
        if estimate > deadline_s:
            metrics.REJECTED.labels(model=self.model_id, reason="estimated_wait").inc()
            raise QueueFull(f"estimated wait {estimate:.1f} s (queue {len(self.queue)} x recent "
                            f"batch {self.batch_seconds:.2f} s) exceeds the {deadline_s:g} s "
                            "deadline", retry_after=estimate - deadline_s)
        now = time.monotonic()
        pending = Pending(f"r{next(_ids)}-{os.getpid()}", payload, now, now + deadline_s)
        if stream:
            pending.events = asyncio.Queue()
        else:
            pending.future = asyncio.get_running_loop().create_future()
        self.queue.append(pending)
        self.by_id[pending.request_id] = pending
        self._depth.set(len(self.queue))
        self._dispatch()
        return pending

    def estimated_wait(self, ready_count: int) -> float:
        """Seconds until a new request would be answered: the batches ahead of it (queued and
        running) plus its own, times the recent batch time."""
        if not self.batch_seconds or not ready_count:
            return 0.0
        ready = self.ready_workers()
        per_round = max(1, sum(w.max_batch * w.capacity for w in ready))
        running = sum(len(w.inflight) for w in ready)
        rounds = math.ceil((len(self.queue) + running + 1) / per_round)
        return rounds * self.batch_seconds

    # ---- dispatch ----------------------------------------------------------------------------
    def _dispatch(self) -> None:
        """Hand queued requests to idle workers (greedy batches within the batching window)."""
        if self._window_handle:
            self._window_handle.cancel()
            self._window_handle = None
        while self.queue:
            worker = self._idle_worker()
            if worker is None:
                return
            if self.streaming:
                pending = self.queue.popleft()
                self._assign(worker, [pending])
                worker.send(("add", pending.request_id, pending.payload))
                continue
            limit = worker.max_batch
            window = self.settings.max_batch_delay_time_ms / 1000
            waited = time.monotonic() - self.queue[0].enqueued
            if len(self.queue) < limit and window > 0 and waited < window:
                self._window_handle = asyncio.get_running_loop().call_later(
                    window - waited, self._dispatch)
                return
            batch = [self.queue.popleft() for _ in range(min(limit, len(self.queue)))]
            self._assign(worker, batch)
            metrics.BATCH_SIZE.labels(model=self.model_id).observe(len(batch))
            worker.send(("batch", [(p.request_id, p.payload) for p in batch]))
        self._depth.set(0)

    def _idle_worker(self) -> WorkerHandle | None:
        for worker in self.workers:
            if worker.state == "ready" and len(worker.inflight) < worker.capacity:
                return worker
        return None

    def _assign(self, worker: WorkerHandle, batch: list[Pending]) -> None:
        now = time.monotonic()
        wait = metrics.QUEUE_WAIT_SECONDS.labels(model=self.model_id)
        for pending in batch:
            pending.worker = worker
            worker.inflight[pending.request_id] = pending
            wait.observe(now - pending.enqueued)
        self._depth.set(len(self.queue))

    # ---- messages from workers -----------------------------------------------------------------
    def _on_message(self, worker: WorkerHandle, message: tuple) -> None:
        kind = message[0]
        if kind == "results":
            _, results, seconds, _size = message
            self._note_batch_time(seconds)
            for request_id, result in results:
                pending = worker.inflight.pop(request_id, None)
                if pending is None:
                    continue
                if isinstance(result, ItemError):
                    self._finish(pending, error=error_for_status(result.status, result.message))
                else:
                    self._finish(pending, result=result)
            self._dispatch()
        elif kind == "events":
            _, events, seconds = message
            if seconds:
                self._note_batch_time(seconds)
            now = time.monotonic()
            for request_id, event_type, data in events:
                pending = worker.inflight.get(request_id)
                if pending is None:
                    continue
                pending.deadline = now + self.settings.default_inference_timeout_seconds
                if event_type == "chunk":
                    pending.events.put_nowait(StreamEvent(request_id, "chunk", data))
                    continue
                worker.inflight.pop(request_id, None)
                if event_type == "done":
                    self._finish(pending, result=data)
                else:
                    self._finish(pending, error=error_for_status(int(data.get("status", 500)),
                                                                 str(data.get("message", ""))))
            self._dispatch()

    def _note_batch_time(self, seconds: float) -> None:
        if self.batch_seconds:
            self.batch_seconds += _EWMA_WEIGHT * (seconds - self.batch_seconds)
        else:
            self.batch_seconds = seconds

    def _on_exit(self, worker: WorkerHandle) -> None:
        """The worker's pipe closed: it died (or failed to load). Fail its requests now."""
        was_ready = worker.state == "ready"
        code = worker.exit_code(0.5)
        if worker.state == "starting":
            worker.state = "dead"
            return  # _start_worker reports it
        worker.state = "dead"
        if was_ready:
            self._ready_gauge.dec()
        metrics.mark_process_dead(worker.process.pid if worker.process else None)
        reason = f"{worker.name} of {self.model_id} died (exit code {code})"
        log.error("%s; failing %d in-flight request(s)", reason, len(worker.inflight))
        self._fail_inflight(worker, WorkerLost(reason + " while running this request"))
        if not self.closing:
            self._schedule_restart(worker, "died")

    def _fail_inflight(self, worker: WorkerHandle, error: MediaError) -> None:
        for pending in list(worker.inflight.values()):
            self._finish(pending, error=error)
        worker.inflight.clear()

    def _schedule_restart(self, worker: WorkerHandle, reason: str) -> None:
        task = asyncio.create_task(self._restart(worker, reason))
        self._restart_tasks.add(task)
        task.add_done_callback(self._restart_tasks.discard)

    async def _restart(self, worker: WorkerHandle, reason: str) -> None:
        """Restart until the worker is warm again, at most MAX_WORKER_RESTART_COUNT times.

        Past that count the worker is marked failed (WORKER_RESTART_LIMIT_ACTION=fail, the
        documented behaviour: a worker that keeps dying is not retried forever), or
        (=reset) the device reset command runs and the count starts again; two resets in a
        row that do not help: give up on it."""
        resets_without_success = 0
        while not self.closing:
            if worker.restarts >= self.settings.max_worker_restart_count:
                if not self.settings.reset_on_restart_limit:
                    self._give_up(worker, f"it was restarted MAX_WORKER_RESTART_COUNT="
                                          f"{self.settings.max_worker_restart_count} times ({reason})")
                    return
                if resets_without_success >= 2:
                    self._give_up(worker, f"it did not come back after two device resets ({worker.failure})")
                    return
                await self._reset_device(worker)
                resets_without_success += 1
                worker.restarts = 0
            worker.restarts += 1
            metrics.WORKER_RESTARTS.labels(model=self.model_id, reason=reason).inc()
            log.info("restarting %s (restart %d, reason: %s)", worker.name, worker.restarts, reason)
            if await self._start_worker(worker):
                return
            reason = "load_failed"

    def _give_up(self, worker: WorkerHandle, why: str) -> None:
        """Mark the worker failed; with no worker left, queued requests get 503 now instead of
        waiting for their deadline."""
        worker.state = "failed"
        log.error("%s of %s marked failed: %s", worker.name, self.model_id, why)
        if any(w.state not in ("failed", "stopped") for w in self.workers):
            return  # another worker serves, or is on its way
        error = WorkerLost(f"every worker of {self.model_id} has failed; the server needs a restart")
        while self.queue:
            self._finish(self.queue.popleft(), error=error)
        self._depth.set(0)

    async def _reset_device(self, worker: WorkerHandle) -> None:
        command = self.settings.reset_device_command
        if not command:
            return
        log.warning("%s restarted MAX_WORKER_RESTART_COUNT=%d times; running "
                    "RESET_DEVICE_COMMAND: %s", worker.name, self.settings.max_worker_restart_count,
                    command)
        env = dict(os.environ, TT_VISIBLE_DEVICES=",".join(map(str, worker.group.device_ids)))
        try:
            process = await asyncio.create_subprocess_shell(command, env=env)
            code = await asyncio.wait_for(process.wait(), 300)
            log.warning("device reset command exited with %s", code)
        except (OSError, asyncio.TimeoutError) as exc:
            log.error("device reset command failed: %s", exc)
        await asyncio.sleep(self.settings.reset_device_sleep_time)

    def recycle(self, worker: WorkerHandle, culprit: Pending) -> None:
        """A request outlived its deadline on this worker: kill it, fail the rest, restart it."""
        if worker.state != "ready":
            return
        was_ready = worker.state == "ready"
        worker.kill()
        worker.state = "dead"
        if was_ready:
            self._ready_gauge.dec()
        metrics.mark_process_dead(worker.process.pid if worker.process else None)
        log.error("%s recycled: request %s exceeded its deadline", worker.name, culprit.request_id)
        worker.inflight.pop(culprit.request_id, None)
        self._fail_inflight(worker, WorkerLost(
            f"{worker.name} of {self.model_id} was recycled after another request in its batch "
            "exceeded its deadline"))
        if not self.closing:
            self._schedule_restart(worker, "deadline")

    # ---- completion and cancellation ----------------------------------------------------------
    def _finish(self, pending: Pending, result: Any = None, error: MediaError | None = None) -> None:
        if pending.done:
            return
        pending.done = True
        self.by_id.pop(pending.request_id, None)
        status = error.status if error else 200
        metrics.REQUESTS.labels(model=self.model_id, status=str(status)).inc()
        metrics.REQUEST_SECONDS.labels(model=self.model_id).observe(time.monotonic() - pending.enqueued)
        if pending.future is not None:
            if not pending.future.done():
                if error:
                    pending.future.set_exception(error)
                else:
                    pending.future.set_result(result)
        else:
            pending.events.put_nowait(error if error else StreamEvent(pending.request_id, "done", result))

    def cancel(self, pending: Pending, reason: str = "cancelled") -> None:
        """The client went away: drop the request from the queue, or tell its worker."""
        if pending.done:
            return
        pending.done = True
        self.by_id.pop(pending.request_id, None)
        metrics.REQUESTS.labels(model=self.model_id, status=reason).inc()
        if pending.worker is None:
            try:
                self.queue.remove(pending)
            except ValueError:
                pass
            self._depth.set(len(self.queue))
            return
        worker = pending.worker
        if self.streaming and worker.inflight.pop(pending.request_id, None) is not None:
            worker.send(("cancel", pending.request_id))
            self._dispatch()
        # A batch already on a worker runs to the end; its result is dropped on arrival.

    def expire(self, pending: Pending) -> DeadlineExceeded:
        """The request's deadline passed: 504, and its worker recycled if it was running it."""
        seconds = time.monotonic() - pending.enqueued
        if pending.worker is None:
            self.cancel(pending, reason="504")
            return DeadlineExceeded(f"request waited {seconds:.1f} s in the queue of "
                                    f"{self.model_id}, past its deadline")
        worker = pending.worker
        pending.done = True
        self.by_id.pop(pending.request_id, None)
        metrics.REQUESTS.labels(model=self.model_id, status="504").inc()
        self.recycle(worker, pending)
        return DeadlineExceeded(f"{worker.name} of {self.model_id} did not answer within "
                                f"{seconds:.1f} s; the worker is being recycled")


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
