"""Supervision: starting a model's workers, noticing their deaths, restarting or giving up on them.

Why apart from admission and dispatch: a worker's life (start one after another, each within
WORKER_START_TIMEOUT_SECONDS; a death seen on the pipe's EOF or by the periodic check; restarts up
to MAX_WORKER_RESTART_COUNT, then a device reset or a failed mark; recycling a worker stuck past a
request's deadline) only touches requests to fail the ones it was running.
"""
from __future__ import annotations

import asyncio
import logging
import os
from typing import Callable

from media_server import metrics
from media_server.config import Settings
from media_server.errors import WorkerLost
from media_server.pool.admission import Admission, Pending

log = logging.getLogger("media_server.scheduler")


class Supervisor:
    """Keeps one model's workers running; ``on_warm`` is called each time one becomes ready."""

    def __init__(self, model_id: str, runner_name: str, settings: Settings, admission: Admission,
                 workers: list, on_warm: Callable[[], None], on_fatal: Callable[[str], None]):
        self.model_id = model_id
        self.runner_name = runner_name
        self.settings = settings
        self.admission = admission
        self.workers = workers
        self._on_warm = on_warm
        self._on_fatal = on_fatal
        self.start_task: asyncio.Task | None = None
        self.check_task: asyncio.Task | None = None
        self.restart_tasks: set[asyncio.Task] = set()
        self.ready_gauge = metrics.WORKERS_READY.labels(model=model_id)

    @property
    def closing(self) -> bool:
        return self.admission.closing

    def start(self) -> None:
        self.start_task = asyncio.create_task(self._start_all(), name=f"start-{self.model_id}")
        self.check_task = asyncio.create_task(self._check_workers(), name=f"check-{self.model_id}")

    def background_tasks(self) -> list[asyncio.Task]:
        return [t for t in (self.start_task, self.check_task, *self.restart_tasks) if t is not None]

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
                    self.on_exit(worker)

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

    async def _start_worker(self, worker) -> bool:
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
        self.ready_gauge.inc()
        self._on_warm()
        return True

    def on_exit(self, worker) -> None:
        """The worker's pipe closed: it died (or failed to load). Fail its requests now."""
        was_ready = worker.state == "ready"
        code = worker.exit_code(0.5)
        if worker.state == "starting":
            worker.state = "dead"
            return  # _start_worker reports it
        worker.state = "dead"
        if was_ready:
            self.ready_gauge.dec()
        metrics.mark_process_dead(worker.process.pid if worker.process else None)
        reason = f"{worker.name} of {self.model_id} died (exit code {code})"
        log.error("%s; failing %d in-flight request(s)", reason, len(worker.inflight))
        self._fail_inflight(worker, WorkerLost(reason + " while running this request"))
        if not self.closing:
            self._schedule_restart(worker, "died")

    def _fail_inflight(self, worker, error: WorkerLost) -> None:
        for pending in list(worker.inflight.values()):
            self.admission.finish(pending, error=error)
        worker.inflight.clear()

    def _schedule_restart(self, worker, reason: str) -> None:
        task = asyncio.create_task(self._restart(worker, reason))
        self.restart_tasks.add(task)
        task.add_done_callback(self.restart_tasks.discard)

    async def _restart(self, worker, reason: str) -> None:
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

    def _give_up(self, worker, why: str) -> None:
        """Mark the worker failed; with no worker left, queued requests get 503 now instead of
        waiting for their deadline."""
        worker.state = "failed"
        log.error("%s of %s marked failed: %s", worker.name, self.model_id, why)
        if any(w.state not in ("failed", "stopped") for w in self.workers):
            return  # another worker serves, or is on its way
        self.admission.fail_all(WorkerLost(f"every worker of {self.model_id} has failed; the server "
                                           "needs a restart"), only_queued=True)

    async def _reset_device(self, worker) -> None:
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

    def recycle(self, worker, culprit: Pending) -> None:
        """A request outlived its deadline on this worker: kill it, fail the rest, restart it."""
        if worker.state != "ready":
            return
        worker.kill()
        worker.state = "dead"
        self.ready_gauge.dec()
        metrics.mark_process_dead(worker.process.pid if worker.process else None)
        log.error("%s recycled: request %s exceeded its deadline", worker.name, culprit.request_id)
        worker.inflight.pop(culprit.request_id, None)
        self._fail_inflight(worker, WorkerLost(
            f"{worker.name} of {self.model_id} was recycled after another request in its batch "
            "exceeded its deadline"))
        if not self.closing:
            self._schedule_restart(worker, "deadline")

    async def stop_workers(self) -> None:
        """Ask every worker to exit, wait for each (killed past 10 s)."""
        for task in self.background_tasks():
            if not task.done():
                task.cancel()
        for worker in self.workers:
            worker.request_stop()
        await asyncio.gather(*(asyncio.to_thread(w.wait_stopped, 10.0) for w in self.workers
                               if w.process is not None))
        for worker in self.workers:
            metrics.mark_process_dead(worker.process.pid if worker.process else None)
