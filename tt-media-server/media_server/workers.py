"""Device worker processes: one per device group, one runner each, talking over a pipe.

Messages (typed, media_server/worker_messages.py): main -> worker RunBatch, AddRequest,
CancelRequest, Stop; worker -> main Ready, LoadFailed, BatchResults, StreamEvents.
The main side (``WorkerHandle``) reads the pipe from the event loop; a closed pipe means the
process died, which the scheduler learns at once (no polling interval).
"""
from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
from typing import Any, Callable

from media_server.config import DeviceGroup, Settings
from media_server.request_id import bound_request_ids, joined_request_ids
from media_server.worker_messages import (AddRequest, BatchResults, CancelRequest, FromWorker, LoadFailed,
                                          Ready, RunBatch, Stop, StreamEvents, ToWorker)

log = logging.getLogger("media_server.workers")
_CONTEXT = multiprocessing.get_context("spawn")


def _device_env(group: DeviceGroup) -> None:
    """Each worker sees only its own devices (the TT stack reads these)."""
    ids = ",".join(str(d) for d in group.device_ids)
    os.environ["TT_VISIBLE_DEVICES"] = ids
    os.environ["TT_METAL_VISIBLE_DEVICES"] = ids
    cache_root = os.environ.get("TT_METAL_CACHE_ROOT")
    if cache_root:
        os.environ["TT_METAL_CACHE"] = os.path.join(cache_root, f"device_group_{group.index}")


def worker_main(conn, runner_name: str, model_id: str, settings: Settings, group: DeviceGroup) -> None:
    """Entry point of a worker process."""
    # Ctrl-C / SIGTERM to the process group go to the server, which stops its workers in order;
    # if the server itself is killed, the kernel kills the worker too (no orphan holds a device).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with_parent()
    _device_env(group)
    if settings.cpu_threads_per_worker:
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[name] = str(settings.cpu_threads_per_worker)
    configure_logging(group.index, settings.log_level, settings.log_file)
    # tt-metal's model code reads IS_GALAXY from the environment (graph split, class init).
    os.environ["IS_GALAXY"] = "1" if settings.is_galaxy else "0"
    from media_server.runners.base import RunnerUnavailable
    from media_server.runners.registry import runner_class

    started = time.monotonic()
    try:
        runner = runner_class(runner_name)(settings, group)
        runner.load()
        log.info("%s loaded %s on devices %s in %.1f s", runner_name, model_id, group.label,
                 time.monotonic() - started)
    except RunnerUnavailable as exc:
        conn.send(LoadFailed(str(exc)))
        return
    except Exception as exc:  # noqa: BLE001 - reported as one line, the process ends
        conn.send(LoadFailed(f"{runner_name} failed to load on devices {group.label}: "
                             f"{type(exc).__name__}: {exc}"))
        return
    inbox: queue.Queue = queue.Queue()
    threading.Thread(target=_receive_forever, args=(conn, inbox), daemon=True).start()
    from media_server import metrics

    observe = metrics.inference_observer(model_id, group.label)
    try:
        if runner.streaming:
            conn.send(Ready(os.getpid(), runner.capacity(), 1))
            _streaming_loop(conn, inbox, runner, observe)
        else:
            max_batch = max(1, min(runner.max_batch_size(), settings.max_batch_size))
            conn.send(Ready(os.getpid(), 1, max_batch))
            _batch_loop(conn, inbox, runner, observe)
    except (BrokenPipeError, EOFError, OSError):
        pass  # the server went away; nothing is waiting for results
    finally:
        try:
            runner.close()
        except Exception:  # noqa: BLE001 - closing must not hide the exit
            log.exception("runner close failed")


def configure_logging(index: int, level: str, log_file: str | None = None) -> None:
    """The worker's log lines: ``<time> worker-<index> <LEVEL> <message>``, plus ``request_id=<id>`` on
    those written for a request's work (``bound_request_ids`` around a batch, an admission, a step), as
    the server's own lines of that request carry it."""
    from media_server.request_id import install_log_filter

    worker_format = f"%(asctime)s worker-{index} %(levelname)s %(message)s"
    logging.basicConfig(level=level.upper(), format=worker_format)
    if log_file:  # the workers' lines belong in the same file as the server's
        handler = logging.FileHandler(log_file, encoding="utf-8")
        handler.setFormatter(logging.Formatter(worker_format))
        logging.getLogger().addHandler(handler)
    install_log_filter(("",))


def _die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the pipe's EOF still stops an idle worker


def _receive_forever(conn, inbox: queue.Queue) -> None:
    """Read the pipe on a thread so cancels arrive while a step runs."""
    while True:
        try:
            inbox.put(conn.recv())
        except (EOFError, OSError):
            inbox.put(Stop())
            return


def _batch_loop(conn, inbox: queue.Queue, runner, observe: Callable[[float, int], None]) -> None:
    from media_server.runners.base import ItemError

    while True:
        message = inbox.get()
        if isinstance(message, Stop):
            return
        if not isinstance(message, RunBatch):
            continue
        items = message.items
        started = time.perf_counter()
        with bound_request_ids(message.http_request_ids):  # every line of this batch names its requests
            try:
                results = runner.run_batch([payload for _, payload in items])
                if len(results) != len(items):
                    raise RuntimeError(f"run_batch returned {len(results)} results for {len(items)} inputs")
            except Exception as exc:  # noqa: BLE001 - the batch fails, the worker lives on
                log.exception("batch of %d failed", len(items))
                results = [ItemError(500, f"{type(exc).__name__}: {exc}")] * len(items)
            seconds = time.perf_counter() - started
            log.debug("batch of %d ran in %.1f ms", len(items), seconds * 1000)
        observe(seconds, len(items))
        conn.send(BatchResults([(rid, result) for (rid, _), result in zip(items, results)],
                               seconds, len(items)))


def _streaming_loop(conn, inbox: queue.Queue, runner, observe: Callable[[float, int], None]) -> None:
    outbox = _EventSender(conn, inbox)
    try:
        _run_streaming(outbox, inbox, runner, observe)
    finally:
        outbox.close()


def _run_streaming(outbox: "_EventSender", inbox: queue.Queue, runner,
                   observe: Callable[[float, int], None]) -> None:
    http_ids: dict[str, str | None] = {}  # request_id -> its X-Request-ID, while the runner holds it
    step_ids: str | None = None  # http_ids joined, kept while they do not change (a step is frequent)
    while True:
        try:
            message = inbox.get(block=not runner.has_work())
        except queue.Empty:
            message = None
        while message is not None:
            if isinstance(message, Stop):
                return
            if isinstance(message, AddRequest):
                with bound_request_ids((message.http_request_id,)):
                    try:
                        runner.add(message.request_id, message.payload)
                    except Exception as exc:  # noqa: BLE001 - only this request fails
                        log.warning("request %s not admitted by the runner: %s: %s", message.request_id,
                                    type(exc).__name__, exc)
                        outbox.send([(message.request_id, "error", {
                            "status": getattr(exc, "status", 500), "message": f"{type(exc).__name__}: {exc}"})], 0.0)
                    else:
                        http_ids[message.request_id] = message.http_request_id
                        step_ids = joined_request_ids(http_ids.values())
                        log.debug("request %s admitted (%d running)", message.request_id, len(http_ids))
            elif isinstance(message, CancelRequest):
                with bound_request_ids((http_ids.pop(message.request_id, None),)):
                    runner.cancel(message.request_id)
                    log.debug("request %s cancelled", message.request_id)
                step_ids = joined_request_ids(http_ids.values())
            try:
                message = inbox.get_nowait()
            except queue.Empty:
                message = None
        if runner.has_work():
            # A step serves every running request: its lines (a failure above all) name them all.
            with bound_request_ids(step_ids):
                started = time.perf_counter()
                try:
                    events = runner.step()
                except Exception:
                    log.exception("step with %d running request(s) failed", len(http_ids))
                    raise
                seconds = time.perf_counter() - started
            if events:
                outbox.send([(e.request_id, e.type, e.data) for e in events], seconds)
                ended = [e.request_id for e in events if e.type != "chunk" and e.request_id in http_ids]
                if ended:
                    for request_id in ended:
                        del http_ids[request_id]
                    step_ids = joined_request_ids(http_ids.values())
            observe(seconds, len(events))


class _EventSender:
    """Writes StreamEvents messages to the pipe on its own thread.

    Why: pickling and the pipe write then overlap the runner's next step (a device wait releases
    the GIL) instead of adding to every step's time, and events queued while the pipe was busy
    go as ONE message (their lists joined, in order). A broken pipe stops the worker's loop.
    """

    def __init__(self, conn, inbox: queue.Queue):
        self._conn = conn
        self._inbox = inbox
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="event-sender", daemon=True)
        self._thread.start()

    def send(self, events: list, seconds: float) -> None:
        self._queue.put((events, seconds))

    def close(self, timeout_s: float = 10.0) -> None:
        """Flush what is queued (deadline ``timeout_s``), then stop the thread."""
        self._queue.put(None)
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            events, seconds = item
            closing = False
            while not self._queue.empty():
                more = self._queue.get_nowait()
                if more is None:
                    closing = True
                    break
                events = events + more[0]
                seconds = more[1] or seconds
            try:
                self._conn.send(StreamEvents(events, seconds))
            except (OSError, EOFError, ValueError):
                self._inbox.put(Stop())  # the server went away: end the loop
                return
            if closing:
                return


class WorkerHandle:
    """The main process's view of one worker process."""

    def __init__(self, index: int, group: DeviceGroup, runner_name: str, model_id: str,
                 settings: Settings, on_message: Callable[["WorkerHandle", FromWorker], None],
                 on_exit: Callable[["WorkerHandle"], None]):
        self.index = index
        self.group = group
        self.runner_name = runner_name
        self.model_id = model_id
        self.settings = settings
        self._on_message = on_message
        self._on_exit = on_exit
        self.process: multiprocessing.Process | None = None
        self.conn = None
        self.state = "new"  # new | starting | ready | dead | stopped | failed
        self.capacity = 1
        self.max_batch = 1
        self.inflight: dict[str, Any] = {}
        self.restarts = 0
        self.ready_event = asyncio.Event()
        self.failure: str | None = None
        self.generation = 0

    @property
    def name(self) -> str:
        pid = self.process.pid if self.process else None
        return f"worker {self.index} (devices {self.group.label}, pid {pid})"

    def start(self) -> None:
        parent, child = _CONTEXT.Pipe(duplex=True)
        self.generation += 1
        self.process = _CONTEXT.Process(
            target=worker_main, name=f"DeviceWorker-{self.index}",
            args=(child, self.runner_name, self.model_id, self.settings, self.group), daemon=True)
        self.process.start()
        child.close()  # so the parent sees EOF the moment the worker dies
        self.conn = parent
        self.state = "starting"
        self.failure = None
        self.ready_event = asyncio.Event()
        asyncio.get_running_loop().add_reader(parent.fileno(), self._readable)
        # uvloop (uvicorn's loop whenever it is installed) makes a watched fd non-blocking; the pipe's
        # recv() and send() of a message larger than the pipe's buffer then fail half-way with
        # BlockingIOError, which read as the worker's death. The reader only needs readiness.
        os.set_blocking(parent.fileno(), True)

    def send(self, message: ToWorker) -> bool:
        """Send a message; False when the pipe is already broken (death is handled elsewhere)."""
        try:
            self.conn.send(message)
            return True
        except (OSError, ValueError, BrokenPipeError):
            return False

    def _readable(self) -> None:
        try:
            while self.conn is not None and self.conn.poll():
                message = self.conn.recv()
                if isinstance(message, Ready):
                    self.capacity = message.capacity
                    self.max_batch = message.max_batch
                    self.state = "ready"
                    self.ready_event.set()
                elif isinstance(message, LoadFailed):
                    self.failure = message.reason
                self._on_message(self, message)
        except (EOFError, OSError):
            self._detach()
            self._on_exit(self)

    def _detach(self) -> None:
        if self.conn is not None:
            try:
                asyncio.get_running_loop().remove_reader(self.conn.fileno())
            except (ValueError, OSError):
                pass
            self.conn.close()
            self.conn = None
        self.ready_event.set()

    def exit_code(self, wait_s: float = 0.5) -> int | None:
        if self.process is None:
            return None
        self.process.join(wait_s)
        return self.process.exitcode

    def kill(self) -> None:
        """Stop the process now (a stuck worker cannot be asked)."""
        self._detach()
        if self.process is not None and self.process.is_alive():
            self.process.kill()
            self.process.join(5)

    def request_stop(self) -> None:
        """Ask the worker to close its runner and exit (event-loop thread)."""
        if self.conn is not None:
            self.send(Stop())
        self._detach()
        self.state = "stopped"

    def wait_stopped(self, timeout: float) -> None:
        """Wait for the exit; kill it past the timeout (blocking: run it in a thread)."""
        if self.process is not None:
            self.process.join(timeout)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(5)
