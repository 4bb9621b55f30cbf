"""ModelPool: one served model, composed of its Admission, Dispatcher and Supervisor.

Why a thin composition: each part can be read (and changed) alone; this class only wires the
workers' callbacks to them and offers the scheduler and the routes one object per model
(``queue``, ``workers``, ``describe()``, ``admit()``, ``cancel()``, ``expire()``).
"""
from __future__ import annotations

import time
from typing import Any, Callable

from media_server.config import Settings
from media_server.errors import DeadlineExceeded, ShuttingDown
from media_server.pool.admission import Admission, Pending
from media_server.pool.dispatch import Dispatcher
from media_server.pool.supervision import Supervisor
from media_server.runners.registry import runner_class
from media_server.workers import WorkerHandle


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
        self.admission = Admission(self.model_id, settings)
        self.workers: list[WorkerHandle] = []
        self.dispatcher = Dispatcher(self.model_id, self.admission, self.workers, self.streaming)
        self.supervisor = Supervisor(self.model_id, runner_name, settings, self.admission, self.workers,
                                     on_warm=self.dispatcher.dispatch, on_fatal=on_fatal)
        self.workers.extend(WorkerHandle(g.index, g, runner_name, self.model_id, settings,
                                         self.dispatcher.on_message, self.supervisor.on_exit)
                            for g in settings.device_groups())

    # ---- state the routes and tests read -------------------------------------------------------
    @property
    def queue(self):
        return self.admission.queue

    @property
    def by_id(self) -> dict[str, Pending]:
        return self.admission.by_id

    @property
    def batch_seconds(self) -> float:
        return self.admission.batch_seconds

    @property
    def closing(self) -> bool:
        return self.admission.closing

    def ready_workers(self) -> list[WorkerHandle]:
        return [w for w in self.workers if w.state == "ready"]

    @property
    def is_ready(self) -> bool:
        return any(w.state == "ready" for w in self.workers)

    def describe(self) -> dict[str, Any]:
        return {"id": self.model_id, "kind": self.kind, "runner": self.runner_name,
                "streaming": self.streaming, "ready": self.is_ready,
                "queue_size": len(self.queue), "workers": [
                    {"index": w.index, "devices": w.group.label, "state": w.state,
                     "restarts": w.restarts, "inflight": len(w.inflight)} for w in self.workers]}

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self.supervisor.start()

    def begin_shutdown(self) -> None:
        """Refuse new work and fail every queued or running request with a clear 503."""
        self.admission.closing = True
        self.dispatcher.cancel_window()
        self.admission.fail_all(ShuttingDown("the server is shutting down; the request was not completed"))

    async def stop(self) -> None:
        """Fail everything still waiting, then stop every worker."""
        self.begin_shutdown()
        await self.supervisor.stop_workers()

    # ---- requests ----------------------------------------------------------------------------
    def admit(self, payload: Any, deadline_s: float, stream: bool) -> Pending:
        pending = self.admission.admit(payload, deadline_s, stream, self.ready_workers())
        self.dispatcher.dispatch()
        return pending

    def estimated_wait(self, ready_count: int | None = None) -> float:
        return self.admission.estimated_wait(self.ready_workers())

    def cancel(self, pending: Pending, reason: str = "cancelled") -> None:
        """The client went away: drop the request from the queue, or tell its worker."""
        if self.admission.withdraw(pending, reason) and pending.worker is not None:
            self.dispatcher.forward_cancel(pending)

    def expire(self, pending: Pending) -> DeadlineExceeded:
        """The request's deadline passed: 504, and its worker recycled if it was running it."""
        seconds = time.monotonic() - pending.enqueued
        worker = pending.worker
        self.admission.withdraw(pending, "504")
        if worker is None:
            return DeadlineExceeded(f"request waited {seconds:.1f} s in the queue of "
                                    f"{self.model_id}, past its deadline")
        self.supervisor.recycle(worker, pending)
        return DeadlineExceeded(f"{worker.name} of {self.model_id} did not answer within "
                                f"{seconds:.1f} s; the worker is being recycled")
