"""The FastAPI application factory; the lifespan starts and stops the device workers.

Start-up problems end the process with ONE line on stderr (exit code 1 before serving, 3 when the
first worker of a model cannot load): invalid settings naming the variable and its range, an
unknown runner, a runner whose stack is absent.
"""
from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import signal
import sys
import time

from fastapi import FastAPI

from media_server import metrics
from media_server.all_settings import check_component_settings, unknown_setting_warnings
from media_server.auth import BodySizeLimit
from media_server.config import ConfigError, Settings, load_settings
from media_server.errors import install_handlers
from media_server.request_id import RequestIdMiddleware, install_log_filter
from media_server.runners.base import RunnerUnavailable
from media_server.runners.registry import UnknownRunner
from media_server.scheduler import Scheduler
from media_server.speech.settings import AUDIO_PATHS, speech_settings

log = logging.getLogger("media_server")

# One router module per kind of API; modules not present in this build are skipped.
ROUTER_MODULES = ("health", "images", "cnn", "audio", "embeddings", "embeddings_llamacpp", "rerank", "text",
                  "inference")
FATAL_EXIT_CODE = 3


def _fail_startup(line: str) -> "SystemExit":
    return SystemExit(f"tt-media-server: cannot start: {line}")


def model_device_line(model_device: str, uses_model_device: dict[str, bool]) -> str | None:
    """The start-up line for a MODEL_DEVICE (cuda, mps) that some served models do not use: they run on the CPU
    whatever it says (Whisper, text slots, image, CNN), which must not pass unsaid. None when nothing to say."""
    cpu_only = sorted(model for model, uses in uses_model_device.items() if not uses)
    if not cpu_only or model_device.strip().lower() in ("auto", "cpu"):
        return None
    return (f"MODEL_DEVICE={model_device} applies to the vision, embedding and rerank runners; "
            f"{', '.join(cpu_only)} run on the CPU")


def create_app(settings: Settings | None = None) -> FastAPI:
    try:
        settings = settings or load_settings()
        check_component_settings()
    except ConfigError as exc:
        raise _fail_startup(str(exc)) from None
    _configure_logging(settings)
    unknown = unknown_setting_warnings()
    if unknown:
        log.warning("ignoring unknown setting(s) that look like this server's: %s", "; ".join(unknown))
    try:
        scheduler = Scheduler(settings)
        scheduler.preflight()
    except (UnknownRunner, RunnerUnavailable, ValueError) as exc:
        raise _fail_startup(str(exc)) from None
    device_line = model_device_line(settings.model_device, {pool.model_id: pool.runner_cls.uses_model_device
                                                            for pool in scheduler.pools.values()})
    if device_line:
        log.warning(device_line)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        metrics.reset_directory()
        loop = asyncio.get_running_loop()
        scheduler._on_fatal = lambda line: loop.create_task(_fatal(line))
        _chain_exit_signals(loop, scheduler)
        scheduler.start()
        try:
            yield
        finally:
            await scheduler.stop()
            metrics.cleanup()

    async def _fatal(line: str) -> None:
        print(f"tt-media-server: cannot start: {line}", file=sys.stderr, flush=True)
        await scheduler.stop()
        metrics.cleanup()
        os._exit(FATAL_EXIT_CODE)  # uvicorn has no exit-code API; every worker is already stopped

    development = settings.environment == "development"
    app = FastAPI(title="tt-media-server", version=_version(), lifespan=lifespan,
                  docs_url="/docs" if development else None, redoc_url=None,
                  openapi_url="/openapi.json" if settings.environment != "production" else None)
    app.state.settings = settings
    app.state.scheduler = scheduler
    app.state.started_at = time.time()
    install_handlers(app)
    for name in ROUTER_MODULES:
        module = _optional_module(f"media_server.api.{name}")
        if module is not None:
            app.include_router(module.router)
    speech = speech_settings()
    if speech.sample_rate_line():
        log.warning(speech.sample_rate_line())
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_payload_bytes,
                       path_limits={path: (speech.audio_body_limit,
                                           f"file: the audio is over MAX_AUDIO_SIZE_BYTES="
                                           f"{speech.max_audio_size_bytes} (request body over "
                                           f"{speech.audio_body_limit} bytes)")
                                    for path in AUDIO_PATHS})
    app.add_middleware(RequestIdMiddleware)  # outermost: the body limit's 413 carries the id too
    return app


LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"


def _configure_logging(settings: Settings) -> None:
    """LOG_LEVEL for the server's loggers; LOG_FILE adds a file next to stderr (set once per path:
    create_app may run more than once in one process, e.g. in tests)."""
    level = settings.log_level.upper()
    logging.basicConfig(level=level, format=LOG_FORMAT)
    logging.getLogger().setLevel(level)
    if settings.log_file:
        path = os.path.abspath(settings.log_file)
        root = logging.getLogger()
        if not any(isinstance(h, logging.FileHandler) and h.baseFilename == path for h in root.handlers):
            handler = logging.FileHandler(path, encoding="utf-8")
            handler.setFormatter(logging.Formatter(LOG_FORMAT))
            root.addHandler(handler)
    install_log_filter()


def _chain_exit_signals(loop: asyncio.AbstractEventLoop, scheduler: Scheduler) -> None:
    """On SIGINT/SIGTERM fail queued and running requests at once (503), then let uvicorn stop.

    uvicorn waits for open requests before the lifespan shutdown; without this, a deep queue
    would be run to the end (or to its deadlines) before the server could exit.
    """
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(signum)

        def handler(number, frame, previous=previous):
            loop.call_soon_threadsafe(scheduler.begin_shutdown)
            if callable(previous):
                previous(number, frame)

        try:
            signal.signal(signum, handler)
        except ValueError:  # not the main thread (e.g. an embedding test harness)
            return


def _optional_module(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise


def _version() -> str:
    path = os.path.join(os.path.dirname(__file__), "..", "..", "VERSION")
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return "0"
