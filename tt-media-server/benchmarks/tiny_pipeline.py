"""Save the tiny RANDOM-WEIGHT diffusers pipeline as a folder (a fake model; images are noise).

    ../.workflow_venvs/media-server/bin/python benchmarks/tiny_pipeline.py OUT_DIR [--size small|medium]

The builder lives in media_server/runners/tiny_diffusion.py; the image-cpu runner also builds it
in memory for IMAGE_CPU_WEIGHTS_PATH=tiny-random (MODEL=tiny-diffusion-cpu sets that).
"""
from __future__ import annotations

import argparse

import _paths  # noqa: E402,F401  (media_server and the repository importable: benchmarks/_paths.py)

from media_server.runners.tiny_diffusion import build  # noqa: E402

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--size", choices=("small", "medium"), default="small")
    args = parser.parse_args()
    print(build(args.out_dir, args.size))
