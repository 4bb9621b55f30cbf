"""What every media client entry point shares: its arguments, the spec, signals, outputs.json."""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from media_clients.transport import MediaHttp
from records.media import kind_of

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def log(message: str) -> None:
    print(message, flush=True)


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class ClientRun:
    """One client workflow invocation: where to write, which server, which model, which kind."""

    run_dir: Path
    spec: dict
    kind: str
    http: MediaHttp
    served_model_name: str
    workflow_args: dict
    stop: threading.Event

    @property
    def mode(self) -> str:
        return str(self.workflow_args.get("mode") or "ci")

    @property
    def model_id(self) -> str:
        return str(self.spec.get("model_id", ""))

    def out_dir(self, workflow: str) -> Path:
        path = self.run_dir / workflow
        path.mkdir(parents=True, exist_ok=True)
        return path

    def write_outputs(self, workflow: str, paths: list[Path]) -> None:
        rel = sorted({p.relative_to(self.run_dir).as_posix() for p in paths})
        (self.out_dir(workflow) / "outputs.json").write_text(json.dumps({"outputs": rel}, indent=2) + "\n")


class BadInput(ValueError):
    pass


def parse_args(argv: list[str] | None, description: str) -> argparse.Namespace:
    from contracts.workflow_args import client_workflow_parser

    args = client_workflow_parser(description, server_required=True).parse_args(argv)
    args.run_dir, args.model_spec_json = Path(args.run_dir), Path(args.model_spec_json)
    return args


def client_run(args: argparse.Namespace) -> ClientRun:
    """Read the spec and arguments; BadInput names what is wrong."""
    try:
        spec = json.loads(args.model_spec_json.read_text())
    except (OSError, ValueError) as exc:
        raise BadInput(f"cannot read the model spec {args.model_spec_json}: {exc}") from None
    kind = kind_of(spec)
    if kind is None:
        raise BadInput(f"model_type {spec.get('model_type')!r} of {spec.get('model_id')} has no media client variant")
    try:
        workflow_args = json.loads(args.workflow_args_json or "{}")
    except ValueError as exc:
        raise BadInput(f"--workflow-args-json is not JSON: {exc}") from None
    if not args.server_url:
        raise BadInput("--server-url is empty")
    served = os.environ.get("TT_SERVED_MODEL_NAME") or spec.get("served_model_name") or spec.get("model_name")
    timeout = float(spec.get("readiness_timeout_s") or 600)
    http = MediaHttp(args.server_url, os.environ.get("OPENAI_API_KEY") or None, timeout_s=min(600.0, timeout))
    return ClientRun(args.run_dir, spec, kind, http, str(served), dict(workflow_args), threading.Event())


def install_stop(run: ClientRun) -> dict[str, Any]:
    """SIGINT/SIGTERM set ``run.stop``: the client stops sending, writes what it measured, exits 128+N."""
    state: dict[str, Any] = {"signum": None}

    def handler(signum: int, _frame: Any) -> None:
        state["signum"] = signum
        run.stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    return state


def main_wrapper(body, argv: list[str] | None, description: str) -> int:
    """Parse, build the run, call ``body(run) -> exit code``; bad input exits 2 with one line."""
    args = parse_args(argv, description)
    try:
        run = client_run(args)
    except BadInput as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    state = install_stop(run)
    code = body(run)
    if state["signum"] is not None:
        return 128 + int(state["signum"])
    return code
