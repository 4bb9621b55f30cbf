#!/usr/bin/env python3
"""Start tt-media-server for development: the small-model server's ``scripts/run_dev.py --device ...``.

Usage: python3 scripts/run_dev.py [--device auto|cpu|cuda|cuda:N|mps] [--models BAAI/bge-m3,...]
                                  [--host 127.0.0.1] [--port 8000] [--no-auth] [--reload]
Runs ``uvicorn main:app`` from tt-media-server/ in the media-server venv with MODEL_DEVICE and MODELS
set from the flags (the environment's values otherwise; AUTO_DOWNLOAD_MODELS, HF_TOKEN and every
other setting pass through). Bad flags exit 2; the server's own exit code is returned.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SERVER_DIR = REPO / "tt-media-server"
VENV_PYTHON = REPO / ".workflow_venvs" / "media-server" / "bin" / "python"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=os.environ.get("MODEL_DEVICE", "auto"),
                        help="MODEL_DEVICE: auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N, mps")
    parser.add_argument("--models", default=os.environ.get("MODELS", ""), help="MODELS (comma list)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--no-auth", action="store_true", help="NO_AUTH=1 (no bearer key)")
    parser.add_argument("--reload", action="store_true", help="uvicorn --reload (restart on code changes)")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", args.device.strip().lower()):
        print(f"error: --device {args.device!r}: must be auto, cpu, mps, cuda or cuda:N", file=sys.stderr)
        return 2
    if not 1 <= args.port <= 65535:
        print(f"error: --port {args.port}: must be 1..65535", file=sys.stderr)
        return 2
    python = VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable)
    env = dict(os.environ, MODEL_DEVICE=args.device.strip().lower())
    if args.models:
        env["MODELS"] = args.models
    if args.no_auth:
        env["NO_AUTH"] = "1"
    command = [str(python), "-m", "uvicorn", "main:app", "--lifespan", "on", "--host", args.host,
               "--port", str(args.port)] + (["--reload"] if args.reload else [])
    print(f"run_dev: MODEL_DEVICE={env['MODEL_DEVICE']} MODELS={env.get('MODELS', '') or '(MODEL_RUNNER)'} "
          f"on http://{args.host}:{args.port}", flush=True)
    os.chdir(SERVER_DIR)
    os.execve(str(python), command, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
