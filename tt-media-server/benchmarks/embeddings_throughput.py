"""Embeddings/s through the media server vs sentence-transformers called directly with the same batches.

For each batching mode (ENABLE_BATCHING=1 and 0) a real server (uvicorn, one worker process with
all-MiniLM-L6-v2 from its wheel) takes `--requests` requests of one distinct sentence each at
every `--concurrency` level (distinct texts: the cache never answers, every text is computed).
The server's Prometheus counters say how many forward passes it made
(`tt_media_server_batch_size_count`) for how many texts (`embedding_batch_texts_sum`); the same
sentences are then encoded by sentence-transformers in this process, in batches of that mean size,
right after each point with the server idle (both sides see the same background load).

    loss = 1 - server embeddings/s / direct embeddings/s        (goal at concurrency 32: < 15 %)

The cache-hit path is measured too: one cached sentence requested `--hit-requests` times in a
row (client-side HTTP round trip, p50/p99, beside `GET /tt-liveness` on the same connection as the
floor of the HTTP stack) and the in-process batcher lookup alone (goal: p50 < 1 ms).

    cd tt-media-server && ../.workflow_venvs/media-server/bin/python benchmarks/embeddings_throughput.py \\
        [--requests 512] [--concurrency 1 32] [--batching on off] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import httpx
import numpy as np

SERVER_DIR = Path(__file__).resolve().parents[1]
import _paths  # noqa: E402,F401  (media_server and the repository importable: benchmarks/_paths.py)

from contracts.intervals import percentile  # noqa: E402
from contracts.retry import GaveUp, NotYet, retry, wait_http_ok  # noqa: E402

MODEL = "all-MiniLM-L6-v2"

_PHRASES = (
    "the server answered quickly", "embeddings place similar sentences near each other in vector space",
    "a cat sleeps", "semantic search ranks documents by the cosine similarity of their vectors to the query",
    "the weather was cold and windy on the hill above the town all through the long winter evening",
    "tokens", "batching shares one forward pass between many requests that arrive at nearly the same moment",
    "tenstorrent accelerators run transformer models", "short text", "queues, windows and caches")


def sentences(count: int, offset: int) -> list[str]:
    """Distinct sentences of mixed length (a number makes each one unique)."""
    return [f"{offset + i} {_PHRASES[i % len(_PHRASES)]} {_PHRASES[(i * 7 + 3) % len(_PHRASES)]}"
            for i in range(count)]


@dataclass
class Point:
    """One (batching, concurrency) measurement."""

    batching: bool
    concurrency: int
    requests: int
    failed: int
    server_embeddings_per_s: float
    latency_p50_ms: float
    latency_p99_ms: float
    forward_passes: int
    mean_texts_per_forward: float
    direct_embeddings_per_s: float = 0.0
    loss_vs_direct: float = 0.0
    description: dict = field(default_factory=lambda: {
        "server_embeddings_per_s": "texts embedded per second through HTTP (one text per request)",
        "mean_texts_per_forward": "texts per model call the server made (cache and batching included)",
        "direct_embeddings_per_s": "sentence-transformers encode() in this process, same texts, batches "
                                   "of mean_texts_per_forward",
        "loss_vs_direct": "1 - server/direct"})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A real media server serving the embedding model, in its own process group."""

    def __init__(self, batching: bool, window_ms: float, max_size: int, log_dir: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, MODEL=MODEL, NO_AUTH="1", HF_HUB_OFFLINE="1", ENABLE_BATCHING=str(int(batching)),
                   BATCH_WINDOW_MS=str(window_ms), BATCH_WINDOW_MAX_SIZE=str(max_size), LOG_LEVEL="WARNING",
                   MAX_QUEUE_SIZE="4096")
        if not batching:
            env["MAX_BATCH_SIZE"] = "1"  # off means off: no merging in the worker either
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        self.log_path = log_dir / f"server-batching-{int(batching)}.log"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "main:app", "--lifespan", "on", "--host", "127.0.0.1",
                 "--port", str(self.port), "--no-access-log"], cwd=SERVER_DIR, env=env, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float) -> None:
        def not_exited() -> None:
            if self.process.poll() is not None:
                raise SystemExit(f"benchmark: the server exited ({self.process.returncode}); see {self.log_path}")

        def every_worker_started(remaining_s: float) -> None:
            # /health turns 200 with the first warm worker; a second one still loading would share the cores
            # with the first round, so the rounds start once no worker is starting any more.
            not_exited()
            models = httpx.get(self.url + "/tt-liveness", timeout=min(5.0, max(remaining_s, 0.1))).json()["models"]
            starting = [w["devices"] for m in models for w in m["workers"] if w["state"] in ("new", "starting")]
            if starting:
                raise NotYet(f"workers on {', '.join(starting)} still starting")

        started = time.monotonic()
        try:
            wait_http_ok(f"the server to answer {self.url}/health with 200", self.url + "/health", deadline_s=timeout,
                         alive_check=not_exited, delay_s=0.5)
            retry(f"every worker of {self.url} to be ready", every_worker_started,
                  deadline_s=max(1.0, timeout - (time.monotonic() - started)), delay_s=0.5)
        except GaveUp as exc:
            self.stop()
            raise SystemExit(f"benchmark: {exc}; see {self.log_path}") from None

    def metric(self, name: str, label: str) -> float:
        text = httpx.get(self.url + "/metrics", timeout=10).text
        match = re.search(rf'^{name}\{{{label}="{re.escape(MODEL)}"\}} ([0-9.e+]+)$', text, re.M)
        return float(match.group(1)) if match else 0.0

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait(10)


async def drive(url: str, path: str, bodies: list[dict], concurrency: int,
                check: Callable[[httpx.Response], str | None]) -> tuple[list[float], int, float]:
    """POST every body to `path` with `concurrency` in flight: (latencies ms of good answers, failed,
    seconds). `check` returns why an answer is bad (None: good); failures are counted and named,
    never averaged in."""
    latencies: list[float] = []
    failed = 0
    queue = list(reversed(bodies))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        async def worker() -> None:
            nonlocal failed
            while queue:
                body = queue.pop()
                started = time.perf_counter()
                try:
                    response = await client.post(path, json=body)
                except httpx.TransportError as error:
                    failed += 1
                    print(f"  request failed: {type(error).__name__}: {error}", flush=True)
                    continue
                why = check(response)
                if why:
                    failed += 1
                    print(f"  request failed: {why}", flush=True)
                    continue
                latencies.append((time.perf_counter() - started) * 1000)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return latencies, failed, time.perf_counter() - started


def _embedding_problem(response: httpx.Response) -> str | None:
    if response.status_code != 200 or len(response.json()["data"][0]["embedding"]) != 384:
        return f"HTTP {response.status_code}: {response.text[:200]}"
    return None


async def _drive(url: str, texts: list[str], concurrency: int) -> tuple[list[float], int, float]:
    return await drive(url, "/v1/embeddings", [{"input": text, "model": MODEL} for text in texts], concurrency,
                       _embedding_problem)


def measure_server(server: Server, batching: bool, concurrency: int, requests: int, offset: int) -> Point:
    texts = sentences(requests, offset)
    forwards = server.metric("tt_media_server_batch_size_count", "model")
    texts_sent = server.metric("embedding_batch_texts_sum", "model")
    latencies, failed, seconds = asyncio.run(_drive(server.url, texts, concurrency))
    forwards = int(server.metric("tt_media_server_batch_size_count", "model") - forwards)
    texts_sent = server.metric("embedding_batch_texts_sum", "model") - texts_sent
    if failed:
        print(f"  {failed} of {requests} requests FAILED (not counted in the rate)", flush=True)
    return Point(batching, concurrency, requests, failed, len(latencies) / seconds,
                 percentile(latencies, 50) if latencies else 0.0, percentile(latencies, 99) if latencies else 0.0,
                 forwards, texts_sent / max(1, forwards))


def cache_hit_path(server: Server, repeats: int) -> dict:
    text = "the cached sentence of the hit-path benchmark"
    with httpx.Client(base_url=server.url, timeout=30) as client:
        client.post("/v1/embeddings", json={"input": text, "model": MODEL}).raise_for_status()
        hits_before = server.metric("embedding_cache_hits_total", "model")
        latencies = []
        for _ in range(repeats):
            started = time.perf_counter()
            client.post("/v1/embeddings", json={"input": text, "model": MODEL}).raise_for_status()
            latencies.append((time.perf_counter() - started) * 1000)
        floor = []  # the same client and server answering the cheapest route: the HTTP stack alone
        for _ in range(repeats):
            started = time.perf_counter()
            client.get("/tt-liveness").raise_for_status()
            floor.append((time.perf_counter() - started) * 1000)
    hits = server.metric("embedding_cache_hits_total", "model") - hits_before
    return {"http_p50_ms": percentile(latencies, 50), "http_p99_ms": percentile(latencies, 99),
            "http_floor_p50_ms": percentile(floor, 50), "requests": repeats, "cache_hits_counted": hits}


def in_process_hit_path(repeats: int) -> dict:
    """The batcher's cache-hit path alone (no HTTP): lookup, count, return."""
    from media_server.embeddings.batcher import BatchingConfig, EmbeddingBatcher
    from media_server.embeddings.cache import Embedding, EmbeddingCache

    async def never(model, texts):
        raise AssertionError("a cache hit must not reach the model")

    async def run() -> list[float]:
        batcher = EmbeddingBatcher(never, EmbeddingCache(100), BatchingConfig())
        batcher.cache.store(MODEL, "cached", Embedding(np.zeros(384, np.float32), 5))
        samples = []
        for _ in range(repeats):
            started = time.perf_counter()
            await batcher.embed(MODEL, ["cached"])
            samples.append((time.perf_counter() - started) * 1000)
        return samples

    samples = asyncio.run(run())
    return {"p50_ms": percentile(samples, 50), "p99_ms": percentile(samples, 99), "lookups": repeats}


def measure_direct(model, point: Point, offset: int) -> None:
    texts = sentences(point.requests, offset)
    size = max(1, round(point.mean_texts_per_forward))
    model.encode(texts[:size], batch_size=size, show_progress_bar=False)  # warm this batch shape
    started = time.perf_counter()
    for start in range(0, len(texts), size):
        batch = texts[start:start + size]
        model.encode(batch, batch_size=len(batch), convert_to_numpy=True, show_progress_bar=False)
    point.direct_embeddings_per_s = len(texts) / (time.perf_counter() - started)
    point.loss_vs_direct = 1 - point.server_embeddings_per_s / point.direct_embeddings_per_s


def load_direct_model():
    """sentence-transformers in this process, same weights and threads as the server's worker."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    from media_server.config import load_settings
    from media_server.embeddings.settings import embedding_settings
    from media_server.runners.embedding_cpu import EmbeddingCpuRunner
    threads = embedding_settings().cpu_threads(load_settings())
    if threads:
        torch.set_num_threads(threads)
    transformers.utils.logging.disable_progress_bar()
    return SentenceTransformer(str(EmbeddingCpuRunner.model_path()), device="cpu", local_files_only=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=512)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--batching", choices=["on", "off"], nargs="+", default=["on", "off"])
    parser.add_argument("--window-ms", type=float, default=5.0)
    parser.add_argument("--max-size", type=int, default=32)
    parser.add_argument("--hit-requests", type=int, default=500)
    parser.add_argument("--ready-timeout", type=float, default=900.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # like Ctrl-C: the finally blocks stop the server

    model = load_direct_model()
    log_dir = Path(tempfile.mkdtemp(prefix="bench-embeddings-"))
    points: list[Point] = []
    hit_http: dict = {}
    for mode in args.batching:
        batching = mode == "on"
        print(f"== server with ENABLE_BATCHING={int(batching)} (log {log_dir})", flush=True)
        server = Server(batching, args.window_ms, args.max_size, log_dir)
        try:
            server.wait_ready(args.ready_timeout)
            asyncio.run(_drive(server.url, sentences(64, 10**6), 8))  # warm-up
            for concurrency in args.concurrency:
                offset = len(points) * 10**5
                point = measure_server(server, batching, concurrency, args.requests, offset=offset)
                # Right after, with the server idle: both sides see the same background load.
                measure_direct(model, point, offset=offset)
                points.append(point)
                print(f"  c={concurrency}: {point.server_embeddings_per_s:.1f} emb/s, p50 {point.latency_p50_ms:.1f} ms"
                      f", {point.mean_texts_per_forward:.1f} texts/forward; direct {point.direct_embeddings_per_s:.1f}"
                      f" emb/s; loss {point.loss_vs_direct * 100:.1f}%", flush=True)
            if batching or not hit_http:
                hit_http = cache_hit_path(server, args.hit_requests)
        finally:
            server.stop()

    hit_process = in_process_hit_path(args.hit_requests * 10)

    print()
    print(f"{'batching':>8} {'conc':>5} {'server emb/s':>13} {'direct emb/s':>13} {'loss':>7} {'texts/fwd':>9} "
          f"{'p50 ms':>8} {'p99 ms':>8} {'failed':>6}")
    for p in points:
        print(f"{'on' if p.batching else 'off':>8} {p.concurrency:>5} {p.server_embeddings_per_s:>13.1f} "
              f"{p.direct_embeddings_per_s:>13.1f} {p.loss_vs_direct * 100:>6.1f}% {p.mean_texts_per_forward:>9.1f} "
              f"{p.latency_p50_ms:>8.1f} {p.latency_p99_ms:>8.1f} {p.failed:>6}")
    print(f"cache hit, HTTP round trip: p50 {hit_http.get('http_p50_ms', 0):.2f} ms, p99 "
          f"{hit_http.get('http_p99_ms', 0):.2f} ms (GET /tt-liveness on the same connection: p50 "
          f"{hit_http.get('http_floor_p50_ms', 0):.2f} ms); "
          f"in-process lookup: p50 {hit_process['p50_ms'] * 1000:.1f} us, "
          f"p99 {hit_process['p99_ms'] * 1000:.1f} us")
    result = {"schema": "tt-media-embeddings-bench/1", "model": MODEL, "window_ms": args.window_ms,
              "max_size": args.max_size, "cpu_count": os.cpu_count(), "load_average": os.getloadavg(),
              "points": [asdict(p) for p in points], "cache_hit_http": hit_http, "cache_hit_in_process": hit_process}
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    failed = sum(p.failed for p in points)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
