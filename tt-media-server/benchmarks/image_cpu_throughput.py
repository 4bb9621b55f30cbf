"""Images/s and seconds/step of the CPU diffusers runner (the image-cpu runner's own run_batch).

By default it serves the tiny RANDOM-WEIGHT pipeline (IMAGE_CPU_WEIGHTS_PATH=tiny-random): the
figures then measure the runner and diffusers' loop on a toy network, not Stable Diffusion. Point
--weights at a real diffusers folder to measure a real checkpoint.
s/step is the slope between two step counts (so encode/decode time cancels out); images/s is at
the larger step count for each batch size.

    cd tt-media-server && OMP_NUM_THREADS=1 ../.workflow_venvs/media-server/bin/python \
        benchmarks/image_cpu_throughput.py [--weights tiny-random|DIR] [--size 64] [--steps 2 8] \
        [--batch 1 4] [--repeats 3]
"""
from __future__ import annotations

import argparse
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

from media_server.config import DeviceGroup, load_settings  # noqa: E402
from media_server.runners.image_cpu import DiffusersImageRunner  # noqa: E402


def timed(runner, batch: int, steps: int, size: int, repeats: int) -> float:
    payload = {"prompt": "a lighthouse at dusk", "negative_prompt": "", "num_inference_steps": steps,
               "seed": 1, "guidance_scale": None, "number_of_images": 1, "width": size, "height": size}
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        results = runner.run_batch([payload] * batch)
        samples.append(time.perf_counter() - started)
        assert all(isinstance(r, list) and r for r in results), results
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", default="tiny-random")
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--steps", type=int, nargs=2, default=[2, 8])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    settings = load_settings(model_runner="image-cpu", image_cpu_weights_path=args.weights,
                             no_auth=True, max_batch_size=max(args.batch))
    runner = DiffusersImageRunner(settings, DeviceGroup(0, (0,)))
    runner.load()
    low, high = args.steps
    rows = []
    for batch in args.batch:
        t_low = timed(runner, batch, low, args.size, args.repeats)
        t_high = timed(runner, batch, high, args.size, args.repeats)
        row = {"batch": batch, "size": args.size, "weights": args.weights,
               "seconds_per_step": round((t_high - t_low) / (high - low), 5),
               "images_per_s": round(batch / t_high, 3), "steps": high,
               "seconds_per_request_batch": round(t_high, 4)}
        rows.append(row)
        print(f"batch {batch}: {row['images_per_s']} images/s at {high} steps, "
              f"{row['seconds_per_step']} s/step ({args.size}x{args.size}, weights={args.weights})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"schema": "tt-media-image-cpu/1", "rows": rows}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
