"""Documents reranked per second through ``POST /v1/rerank`` vs the same scoring done directly.

A real server (uvicorn, one worker, all-MiniLM-L6-v2 from its wheel: the bi-encoder path) takes
``--requests`` rerank requests of one query and ``--documents`` documents each at every
``--concurrency`` level; every text is distinct, so the embeddings cache never answers and every
text is computed. Directly: sentence-transformers ``encode`` in this process on the same texts,
in batches of the mean size the server's micro-batcher formed (its Prometheus counters), plus the
cosine scoring and sort, right after each point with the server idle (same background load).

    loss = 1 - server documents/s / direct documents/s        (goal at concurrency 32: < 15 %)

    cd tt-media-server && ../.workflow_venvs/media-server/bin/python benchmarks/rerank_throughput.py \\
        [--requests 96] [--documents 8] [--concurrency 1 32] [--json out.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import numpy as np

SERVER_DIR = Path(__file__).resolve().parents[1]
import _paths  # noqa: E402,F401  (media_server and the repository importable: benchmarks/_paths.py)

from benchmarks.embeddings_throughput import MODEL, Server, drive, sentences  # noqa: E402
from contracts.intervals import percentile  # noqa: E402
from media_server.embeddings.rerank import cosine_scores  # noqa: E402


@dataclass
class RerankPoint:
    concurrency: int
    requests: int
    documents_per_request: int
    failed: int
    server_documents_per_s: float
    latency_p50_ms: float
    latency_p99_ms: float
    mean_texts_per_forward: float
    direct_documents_per_s: float = 0.0
    loss_vs_direct: float = 0.0
    description: dict = field(default_factory=lambda: {
        "server_documents_per_s": "documents scored per second through HTTP /v1/rerank (query embedded too)",
        "mean_texts_per_forward": "texts per model call the server made (micro-batching of concurrent requests)",
        "direct_documents_per_s": "sentence-transformers encode() of the same query+documents in batches of "
                                  "mean_texts_per_forward, then cosine and sort, in this process",
        "loss_vs_direct": "1 - server/direct"})


def requests_of(count: int, documents: int, offset: int) -> list[tuple[str, list[str]]]:
    texts = sentences(count * (documents + 1), offset)
    return [(texts[i * (documents + 1)], texts[i * (documents + 1) + 1:(i + 1) * (documents + 1)])
            for i in range(count)]


def _drive(url: str, work: list[tuple[str, list[str]]], concurrency: int) -> tuple[list[float], int, float]:
    def problem(response: httpx.Response) -> str | None:
        if response.status_code != 200 or len(response.json()["results"]) != len(work[0][1]):
            return f"HTTP {response.status_code}: {response.text[:200]}"
        return None

    bodies = [{"model": MODEL, "query": query, "documents": documents} for query, documents in work]
    return asyncio.run(drive(url, "/v1/rerank", bodies, concurrency, problem))


def direct_rate(model, work: list[tuple[str, list[str]]], batch: int) -> float:
    """Documents scored per second by encode + cosine + sort in this process, batches of `batch` texts."""
    texts = [text for query, documents in work for text in [query, *documents]]
    started = time.perf_counter()
    vectors = np.concatenate([model.encode(texts[i:i + batch], batch_size=batch, convert_to_numpy=True,
                                           show_progress_bar=False) for i in range(0, len(texts), batch)])
    row = 0
    for _, documents in work:
        scores = cosine_scores(vectors[row], vectors[row + 1:row + 1 + len(documents)])
        sorted(range(len(scores)), key=lambda i: -scores[i])
        row += len(documents) + 1
    return sum(len(d) for _, d in work) / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=96)
    parser.add_argument("--documents", type=int, default=8)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.requests < 1 or args.documents < 1 or min(args.concurrency) < 1:
        print("error: --requests, --documents and --concurrency must be >= 1", file=sys.stderr)
        return 2
    import torch
    from sentence_transformers import SentenceTransformer

    from media_server.runners.embedding_cpu import EmbeddingCpuRunner

    torch.set_num_threads(1)  # the server's worker runs with one thread (EMBEDDING_THREADS default)
    # The same engine on both sides: sentence-transformers on torch (the server could pick ONNX).
    os.environ["EMBEDDING_BACKEND"] = "torch"
    model = SentenceTransformer(str(EmbeddingCpuRunner.model_path()), device="cpu")
    points = []
    with tempfile.TemporaryDirectory() as log_dir:
        server = Server(True, 5.0, 32, Path(log_dir))
        try:
            server.wait_ready(300)
            warm = requests_of(4, args.documents, 10**6)
            _drive(server.url, warm, 2)
            direct_rate(model, warm, 8)
            for index, concurrency in enumerate(args.concurrency):
                work = requests_of(args.requests, args.documents, index * 10**5)
                forwards = server.metric("tt_media_server_batch_size_count", "model")
                texts_sent = server.metric("embedding_batch_texts_sum", "model")
                latencies, failed, seconds = _drive(server.url, work, concurrency)
                forwards = server.metric("tt_media_server_batch_size_count", "model") - forwards
                mean_batch = (server.metric("embedding_batch_texts_sum", "model") - texts_sent) / max(1, forwards)
                done_docs = len(latencies) * args.documents
                point = RerankPoint(concurrency, args.requests, args.documents, failed, done_docs / seconds,
                                    percentile(latencies, 50) if latencies else 0.0,
                                    percentile(latencies, 99) if latencies else 0.0, round(mean_batch, 2))
                point.direct_documents_per_s = direct_rate(model, work, max(1, round(mean_batch)))
                point.loss_vs_direct = 1 - point.server_documents_per_s / point.direct_documents_per_s
                points.append(point)
                print(f"concurrency {concurrency:3d}: server {point.server_documents_per_s:8.1f} docs/s "
                      f"(p50 {point.latency_p50_ms:.1f} ms, p99 {point.latency_p99_ms:.1f} ms, "
                      f"{point.mean_texts_per_forward:.1f} texts/forward, {failed} failed) | direct "
                      f"{point.direct_documents_per_s:8.1f} docs/s | server/direct "
                      f"{point.server_documents_per_s / point.direct_documents_per_s:.3f} "
                      f"(loss {point.loss_vs_direct:+.1%})", flush=True)
        finally:
            server.stop()
    if args.json:
        args.json.write_text(json.dumps([asdict(p) for p in points], indent=2) + "\n")
    return 1 if any(p.failed for p in points) else 0


if __name__ == "__main__":
    sys.exit(main())
