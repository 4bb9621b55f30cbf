"""Scheduler overhead per request over a direct runner call, with the mock runner.

Runs the real Scheduler in-process (worker processes, pipes, batching, routing by id) with the
mock image runner at MOCK_INFERENCE_DELAY_MS (default 0), and the same runner called directly.
Overhead of one request = its latency through `Scheduler.submit` minus the median latency of a
direct `run_batch` call. Reports p50/p90/p99 in ms per concurrency level, requests/s, and the
amortized overhead (wall time / requests - direct call): at concurrency 64 with one worker, a
request's latency is mostly its wait behind the 63 others (capacity, not overhead), so the
amortized figure is the per-request cost the scheduler adds. Goal: p50 < 1 ms and p99 < 5 ms.

    cd tt-media-server && ../.workflow_venvs/media-server/bin/python benchmarks/scheduler_overhead.py \
        [--requests 2000] [--concurrency 1 64] [--max-batch-size 1] [--json out.json]
"""
from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import _paths  # noqa: E402,F401  (media_server and the repository importable: benchmarks/_paths.py)
_METRICS_DIR = tempfile.mkdtemp(prefix="bench-metrics-")  # the in-process server's metrics; gone at exit
atexit.register(shutil.rmtree, _METRICS_DIR, True)
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", _METRICS_DIR)

from contracts.intervals import percentile  # noqa: E402
from media_server.config import DeviceGroup, load_settings  # noqa: E402
from media_server.runners.mock import MockImageRunner  # noqa: E402
from media_server.scheduler import Scheduler  # noqa: E402

PAYLOAD = {"prompt": "benchmark", "number_of_images": 1}


def direct_call_ms(settings, batch: int, repeats: int = 2000) -> float:
    runner = MockImageRunner(settings, DeviceGroup(0, (0,)))
    runner.load()
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        runner.run_batch([PAYLOAD] * batch)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def through_scheduler(settings, concurrency: int, requests: int) -> tuple[list[float], float]:
    scheduler = Scheduler(settings)
    scheduler.start()
    deadline = time.monotonic() + 120
    while not scheduler.is_ready:
        if time.monotonic() > deadline:
            raise SystemExit("benchmark: the mock worker did not become ready within 120 s")
        await asyncio.sleep(0.02)
    for _ in range(200):  # warm-up
        await scheduler.submit(None, "image", PAYLOAD)
    latencies: list[float] = []
    remaining = requests

    async def client() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            await scheduler.submit(None, "image", PAYLOAD)
            latencies.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    wall = time.perf_counter() - started
    await scheduler.stop()
    return latencies, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--max-batch-size", type=int, default=1)
    parser.add_argument("--mock-delay-ms", type=float, default=0.0)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    rows = []
    for concurrency in args.concurrency:
        settings = load_settings(model_runner="mock", max_queue_size=max(64, concurrency * 2),
                                 max_batch_size=args.max_batch_size, max_batch_delay_time_ms=0,
                                 mock_inference_delay_ms=args.mock_delay_ms, no_auth=True)
        latencies, wall = asyncio.run(through_scheduler(settings, concurrency, args.requests))
        direct = direct_call_ms(settings, 1)
        overhead = [latency - direct for latency in latencies]
        row = {"concurrency": concurrency, "requests": len(latencies),
               "max_batch_size": args.max_batch_size, "mock_delay_ms": args.mock_delay_ms,
               "direct_call_ms_p50": round(direct, 4),
               "overhead_ms_p50": round(percentile(overhead, 50), 3),
               "overhead_ms_p90": round(percentile(overhead, 90), 3),
               "overhead_ms_p99": round(percentile(overhead, 99), 3),
               "amortized_overhead_ms": round(wall * 1000 / len(latencies) - direct, 4),
               "requests_per_s": round(len(latencies) / wall, 1)}
        rows.append(row)
        print(f"concurrency {concurrency:3d}: overhead per request p50 {row['overhead_ms_p50']:.3f} ms, "
              f"p90 {row['overhead_ms_p90']:.3f} ms, p99 {row['overhead_ms_p99']:.3f} ms, "
              f"amortized {row['amortized_overhead_ms']:.3f} ms "
              f"(direct run_batch {row['direct_call_ms_p50']:.4f} ms; {row['requests_per_s']} req/s, "
              f"MAX_BATCH_SIZE={args.max_batch_size})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"schema": "tt-media-scheduler-overhead/1", "rows": rows}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
