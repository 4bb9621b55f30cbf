"""Direct texts/s of two or more embedding ONNX graphs in one process, in alternating turns.

Why alternating in one process: on a shared machine the background load drifts; two graphs timed
one after the other in separate runs measure the drift as much as the graphs. Here every round
times each graph once (order rotated each round) on the same texts, and the speed-up of a graph
over the first one is sum(first's seconds) / sum(its seconds) over the rounds, with a 95%
percentile bootstrap over rounds (contracts/intervals.bootstrap_ratio).

Each graph runs through the server's own encode path (media_server.embeddings.onnx_backend
OnnxEncoder: tokenizer, length sort, the layout's split into calls) on the throughput benchmark's `sentences`,
`--batch` texts per encode() call, at each `--threads` intra-op thread count. Also printed per
graph: the min cosine to sentence-transformers fp32 PyTorch over the texts, and the largest
difference between a text's vector encoded alone and in its batch.

    cd tt-media-server && ../.workflow_venvs/media-server/bin/python benchmarks/embeddings_onnx_ab.py \\
        --models old=/path/old-int8.onnx new=/path/new-int8.onnx [--threads 1 2] [--rounds 7] [--texts 512]

The cached graphs are under ~/.cache/tt-media-server/onnx/all-MiniLM-L6-v2's model dir name-<key>/.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

SERVER_DIR = Path(__file__).resolve().parents[1]
import _paths  # noqa: E402,F401  (media_server and the repository importable: benchmarks/_paths.py)

from contracts.intervals import bootstrap_ratio  # noqa: E402
from embeddings_throughput import sentences  # noqa: E402


def encoder(path: Path, model_dir: Path, threads: int):
    """An OnnxEncoder over a given .onnx file (not the cache's): the server's session options and encode()."""
    from media_server.embeddings.onnx_backend import OnnxEncoder

    return OnnxEncoder(path, model_dir, threads, max_tokens=0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", required=True, help="label=path.onnx; the first is the baseline")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    from media_server.runners.embedding_cpu import EmbeddingCpuRunner

    model_dir = EmbeddingCpuRunner.model_path()
    models = dict(item.split("=", 1) for item in args.models)
    texts = sentences(args.texts, 0)
    reference = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True).encode(
        texts[:args.batch], batch_size=args.batch)
    reference /= np.linalg.norm(reference, axis=1, keepdims=True)

    print(f"{args.texts} texts, {args.batch} per encode(), {args.rounds} rounds, cpu_count {os.cpu_count()}, "
          f"load {os.getloadavg()[0]:.2f}")
    for threads in args.threads:
        encoders = {label: encoder(Path(path), model_dir, threads) for label, path in models.items()}
        seconds: dict[str, list[float]] = {label: [] for label in encoders}
        for label, enc in encoders.items():
            batch, _ = enc.encode(texts[:args.batch])
            alone = np.concatenate([enc.encode([text])[0] for text in texts[:args.batch]])
            cosine = (batch / np.linalg.norm(batch, axis=1, keepdims=True) * reference).sum(1)
            print(f"  threads {threads} {label}: cosine to fp32 PyTorch min {cosine.min():.4f}, "
                  f"alone vs batched max |diff| {np.abs(alone - batch).max():.2e}")
        labels = list(encoders)
        for round_ in range(args.rounds):
            for label in labels[round_ % len(labels):] + labels[:round_ % len(labels)]:
                started = time.perf_counter()
                for start in range(0, len(texts), args.batch):
                    encoders[label].encode(texts[start:start + args.batch])
                seconds[label].append(time.perf_counter() - started)
        base = labels[0]
        for label in labels:
            rate = args.texts * len(seconds[label]) / sum(seconds[label])
            line = f"  threads {threads} {label}: {rate:.1f} texts/s (mean over {args.rounds} rounds)"
            if label != base:
                speedup = sum(seconds[base]) / sum(seconds[label])
                interval = bootstrap_ratio(seconds[base], seconds[label])
                line += f", speed-up over {base} {speedup:.3f} [95% {interval.low:.3f}, {interval.high:.3f}]"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
