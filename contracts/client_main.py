"""The child contract, once: what every client workflow entry script shares (stdlib only).

The orchestrator starts each client workflow as ``<venv python> <package>/run_*.py --run-dir R
--model-spec-json R/model_spec.json --server-url URL --workflow-args-json '{...}'``
(docs/architecture.md, "Client workflow contract"). Every entry script used to parse those
arguments, read the spec, install signal handlers, write ``outputs.json`` and map outcomes to exit
codes by itself, each slightly differently. ``run_client`` does it for all of them:

- arguments: ``client_workflow_parser`` plus the script's own flags (``add_arguments``);
- the spec: read once through ``ModelSpec`` (a typed record, never a dict of guessed keys);
- ``--workflow-args-json``: must be a JSON object of strings;
- signals: SIGINT/SIGTERM are recorded (``StopSignals``), the body sees ``stop.requested`` and
  winds down, keeping what it measured; the exit code is then 128+N;
- exit codes: the body's own (0 passed, 1 failed, or its documented others), 2 for bad input
  (``BadInput`` raised while reading the invocation or by the body), 128+N on signal N;
- ``outputs.json``: ``ClientInvocation.write_outputs`` lists the result files relative to the run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Iterable

from contracts.model_spec import ModelSpec
from contracts.workflow_args import client_workflow_parser

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(ValueError):
    """The invocation cannot be run as given; the message is one line for the user (exit 2)."""


class StopSignals:
    """SIGINT/SIGTERM seen by this process: recorded, never acted on inside the handler.

    ``event`` is set too, so threads waiting on it wake. A script that must interrupt a blocking
    call (lm-eval's loop) passes ``raise_as``: the handler then also raises that exception in the
    main thread.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self.event = threading.Event()
        self._raise_as: type[BaseException] | None = None

    def install(self, raise_as: type[BaseException] | None = None) -> None:
        self._raise_as = raise_as
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._record)

    def _record(self, signum: int, _frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
        self.event.set()
        if self._raise_as is not None:
            raise self._raise_as(signum)

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""

    @property
    def exit_code(self) -> int:
        return 128 + (self.signum or 0)


@dataclass
class ClientInvocation:
    """One client workflow run: where to write, which server, which model, which arguments."""

    workflow: str  # the results directory below the run: benchmarks, evals, tests, stress_tests ...
    run_dir: Path
    spec: ModelSpec
    server_url: str
    workflow_args: dict[str, str]
    disable_trace_capture: bool = False
    options: argparse.Namespace = field(default_factory=argparse.Namespace)  # the script's own flags
    stop: StopSignals = field(default_factory=StopSignals)

    @property
    def mode(self) -> str:
        return str(self.workflow_args.get("mode") or "ci")

    @property
    def served_model_name(self) -> str:
        """The name requests carry: TT_SERVED_MODEL_NAME (the orchestrator's) wins over the spec's."""
        return (os.environ.get("TT_SERVED_MODEL_NAME") or self.spec.served_model_name
                or self.spec.hf_model_repo or self.spec.model_name)

    @property
    def api_key(self) -> str | None:
        return os.environ.get("OPENAI_API_KEY") or None

    @property
    def out_dir(self) -> Path:
        path = self.run_dir / self.workflow
        path.mkdir(parents=True, exist_ok=True)
        return path

    def rel(self, path: Path | str) -> str:
        """``path`` relative to the run directory (how records and outputs.json name files); a relative
        ``path`` is taken as relative to the run directory already."""
        path = Path(path)
        if not path.is_absolute():
            path = self.run_dir / path
        return Path(os.path.relpath(path, self.run_dir)).as_posix()

    def write_outputs(self, paths: Iterable[Path | str], **details: Any) -> Path:
        """``<workflow>/outputs.json``: the result files, relative to the run (atomically replaced);
        ``details`` are extra keys a workflow reports beside them (e.g. the points it did not run)."""
        listing = self.out_dir / "outputs.json"
        rel = sorted({self.rel(p) for p in paths})
        tmp = listing.with_name(listing.name + ".tmp")
        tmp.write_text(json.dumps({"outputs": rel, **details}, indent=2) + "\n")
        os.replace(tmp, listing)
        return listing


def read_invocation(workflow: str, args: argparse.Namespace) -> ClientInvocation:
    """The invocation from parsed arguments; BadInput names what is wrong."""
    try:
        spec = ModelSpec.read(Path(args.model_spec_json))
    except OSError as exc:
        raise BadInput(f"cannot read the model spec {args.model_spec_json}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise BadInput(f"{args.model_spec_json} is not a valid model spec: {exc}") from None
    try:
        workflow_args = json.loads(args.workflow_args_json or "{}")
    except ValueError as exc:
        raise BadInput(f"--workflow-args-json is not JSON: {exc}") from None
    if not isinstance(workflow_args, dict):
        raise BadInput("--workflow-args-json must be a JSON object of key -> value")
    workflow_args = {str(k): "" if v is None else str(v) for k, v in workflow_args.items()}
    return ClientInvocation(workflow=workflow, run_dir=Path(args.run_dir), spec=spec,
                            server_url=(args.server_url or "").rstrip("/"), workflow_args=workflow_args,
                            disable_trace_capture=bool(args.disable_trace_capture), options=args)


def add_baseline_arguments(parser: argparse.ArgumentParser) -> None:
    """The A/B flags a client gets from the orchestrator (``workflows.ab_servers.child_args``; absent: no A/B):
    the benchmarks client's paired blocks and the evals client's paired items read the same three."""
    parser.add_argument("--baseline-url", default="", help="base URL of the baseline server: run the A/B")
    parser.add_argument("--baseline-label", default="", help="what the baseline is, as the user asked for it")
    parser.add_argument("--baseline-tolerance", type=float, default=0.05,
                        help="regression_tolerance of the A/B decisions (share)")


def run_client(workflow: str, description: str, body: Callable[[ClientInvocation], int],
               argv: list[str] | None = None, *, server_required: bool = False,
               add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
               raise_on_signal: type[BaseException] | None = None) -> int:
    """Parse, read the spec, install the signal handlers, run ``body``; the exit code by the contract."""
    parser = client_workflow_parser(description, server_required=server_required)
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        invocation = read_invocation(workflow, args)
        invocation.stop.install(raise_as=raise_on_signal)
        code = body(invocation)
    except BadInput as exc:
        print(f"{workflow}: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    if invocation.stop.requested:
        return invocation.stop.exit_code
    return code
