"""Prometheus metrics that stay correct across the worker processes.

prometheus_client's multiprocess mode: every process (the server and each device worker) writes
its samples to files in PROMETHEUS_MULTIPROC_DIR and /metrics merges them. The directory must be
known before prometheus_client is imported, so this module sets it (a fresh temporary directory
unless the variable is given) at import time; workers inherit it. Dead workers are marked dead so
their live gauges vanish while their counters and histograms are kept.
"""
from __future__ import annotations

import glob
import os
import shutil
import tempfile

_OWN_DIR = False
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="tt-media-metrics-")
    _OWN_DIR = True

from prometheus_client import (  # noqa: E402 - must follow the directory set-up
    CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess)

PREFIX = "tt_media_server"
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
                    120, 300)

REQUESTS = Counter(f"{PREFIX}_requests_total", "Requests finished, by model and HTTP status",
                   ["model", "status"])
REQUEST_SECONDS = Histogram(f"{PREFIX}_request_duration_seconds",
                            "Time from admission to result, seconds", ["model"],
                            buckets=_LATENCY_BUCKETS)
QUEUE_WAIT_SECONDS = Histogram(f"{PREFIX}_queue_wait_seconds",
                               "Time a request waited in the queue before a worker took it, seconds",
                               ["model"], buckets=_LATENCY_BUCKETS)
BATCH_SIZE = Histogram(f"{PREFIX}_batch_size", "Requests per batch sent to a worker", ["model"],
                       buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256))
QUEUE_DEPTH = Gauge(f"{PREFIX}_queue_depth", "Requests waiting in the queue", ["model"],
                    multiprocess_mode="livesum")
WORKERS_READY = Gauge(f"{PREFIX}_workers_ready", "Worker processes warm and serving", ["model"],
                      multiprocess_mode="livesum")
WORKER_RESTARTS = Counter(f"{PREFIX}_worker_restarts_total", "Worker processes restarted, by reason",
                          ["model", "reason"])
REJECTED = Counter(f"{PREFIX}_rejected_total", "Requests refused at admission, by reason",
                   ["model", "reason"])
INFERENCE_SECONDS = Histogram(f"{PREFIX}_model_inference_duration_seconds",
                              "Runner time per batch or step inside the worker, seconds",
                              ["model", "device_id"], buckets=_LATENCY_BUCKETS)


def inference_observer(model_id: str, device_label: str):
    """A callable(seconds, items) for a worker to record its runner time."""
    child = INFERENCE_SECONDS.labels(model=model_id, device_id=device_label)

    def observe(seconds: float, _items: int) -> None:
        child.observe(seconds)

    return observe


def mark_process_dead(pid: int | None) -> None:
    if pid:
        multiprocess.mark_process_dead(pid)


def render() -> tuple[bytes, str]:
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return generate_latest(registry), CONTENT_TYPE_LATEST


def reset_directory() -> None:
    """Drop samples a previous server left in the directory (called once at start-up)."""
    for path in glob.glob(os.path.join(os.environ["PROMETHEUS_MULTIPROC_DIR"], "*.db")):
        if not path.endswith(f"_{os.getpid()}.db"):
            os.remove(path)


def cleanup() -> None:
    if _OWN_DIR:
        shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)
