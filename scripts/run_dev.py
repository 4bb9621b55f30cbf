#!/usr/bin/env python3
"""Start tt-media-server for development: the small-model server's ``scripts/run_dev.py --device ...``.

Usage: python3 scripts/run_dev.py [--device auto|cpu|cuda|cuda:N|mps] [--models BAAI/bge-m3,...]
                                  [--host 127.0.0.1] [--port 8000] [--no-auth] [--reload]
Runs ``uvicorn main:app`` from tt-media-server/ in the media-server venv (built on first use) with
MODEL_DEVICE and MODELS set from the flags (the environment's values otherwise; AUTO_DOWNLOAD_MODELS,
HF_TOKEN and every other setting pass through). Bad flags exit 2; the server's own exit code is returned.

Auth: the small-model server's quick start calls it with no key, so with no API_KEY (environment or
tt-media-server/.env) a server bound to loopback serves without auth and says so in one line; bound
to any other address it refuses to start (exit 2) until API_KEY is set or --no-auth is given, so no
model is served to the network without a key by accident. With API_KEY set, every model route needs it.
"""
from __future__ import annotations

import argparse
import ipaddress
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SERVER_DIR = REPO / "tt-media-server"


def server_python() -> Path | None:
    """The media-server venv's python, built (or checked) by the venv manager run.py uses: requirements/
    media-server.txt with torch's CPU build from where this host has it. So the first ``run_dev.py`` after
    ``uv sync`` (whose environment holds only the orchestrator) builds the server's venv once, saying so.
    None, with one line on stderr, when it cannot be built."""
    import _repo  # noqa: F401,PLC0415  (the repository importable: scripts/_repo.py)
    from workflows.venvs import VenvError, ensure_venv  # noqa: PLC0415 (the repository is importable only now)

    try:
        info = ensure_venv("media-server")
    except VenvError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"run_dev: cannot start: the media-server venv could not be built: {first}", file=sys.stderr)
        return None
    return info.python


class AuthRefused(ValueError):
    """No key configured for a server other hosts can reach; the message is the one line to print."""


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach ``host`` (127.0.0.0/8, ::1, localhost); names other than
    localhost count as reachable, since they may resolve to any address."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def _setting(name: str, env: dict[str, str]) -> str:
    """A server setting as the server will read it: the environment (any case), else tt-media-server/.env."""
    for key, value in env.items():
        if key.upper() == name:
            return value.strip()
    dotenv = SERVER_DIR / ".env"
    if dotenv.is_file():
        for line in dotenv.read_text(errors="replace").splitlines():
            match = re.fullmatch(rf"\s*(?:export\s+)?{name}\s*=\s*(.*?)\s*", line, re.IGNORECASE)
            if match:
                return match.group(1).strip("'\"")
    return ""


def auth_line(host: str, no_auth: bool, env: dict[str, str]) -> str:
    """Set NO_AUTH in ``env`` when the server should serve without a key, and return the line that says
    how the server authenticates; AuthRefused when no key guards an address other hosts can reach."""
    asked = _setting("NO_AUTH", env).lower()
    if no_auth or asked in ("1", "true", "yes", "on"):
        env["NO_AUTH"] = "1"
        return "run_dev: auth off (--no-auth / NO_AUTH=1): any client may call every route"
    if _setting("API_KEY", env) or asked in ("0", "false", "no", "off"):
        return "run_dev: auth on: model routes need 'Authorization: Bearer <API_KEY>'"
    if is_loopback(host):
        env["NO_AUTH"] = "1"
        return (f"run_dev: no API_KEY set: auth off, since {host} is reachable from this machine only "
                f"(set API_KEY to require a key)")
    raise AuthRefused(f"error: --host {host} is reachable from other machines and no API_KEY is set: "
                      f"set API_KEY (or pass --no-auth to serve without a key)")


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
    env = dict(os.environ, MODEL_DEVICE=args.device.strip().lower())
    if args.models:
        env["MODELS"] = args.models
    try:
        auth = auth_line(args.host, args.no_auth, env)
    except AuthRefused as exc:
        print(exc, file=sys.stderr)
        return 2
    python = server_python()
    if python is None:
        return 1
    command = [str(python), "-m", "uvicorn", "main:app", "--lifespan", "on", "--host", args.host,
               "--port", str(args.port)] + (["--reload"] if args.reload else [])
    print(f"run_dev: MODEL_DEVICE={env['MODEL_DEVICE']} MODELS={env.get('MODELS', '') or '(MODEL_RUNNER)'} "
          f"on http://{args.host}:{args.port}", flush=True)
    print(auth, flush=True)
    os.chdir(SERVER_DIR)
    os.execve(str(python), command, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
