"""run.py's command line: arguments, validation and spec resolution.

Every invalid input becomes one ``UsageError`` line (exit code 2) that names the valid choices.
Choices come from the catalog, so the CLI never drifts from it.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import json
import os
from pathlib import Path
from typing import Any, Sequence

from workflows.catalog import Catalog, render_tt_config
from contracts.model_spec import DeviceType, InferenceEngine, ModelSpec
from contracts.workflow_args import (
    NOT_YET_AVAILABLE,
    WorkflowArgsError,
    WorkflowType,
    parse_workflow_args,
    validate_workflow_args,
)

WORKFLOWS = [w.value for w in WorkflowType]
DEVICES = [d.value for d in DeviceType]
ENGINES = [e.value for e in InferenceEngine]


class UsageError(Exception):
    """Bad user input: printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="run.py",
        description="Serve, benchmark, evaluate and report a model from the catalog.",
        epilog="Run `python3 run.py --list` to see every model, device and impl.",
    )
    parser.add_argument("--model", help="model name from the catalog (see --list)")
    parser.add_argument("--workflow", help=f"one of: {', '.join(WORKFLOWS)}")
    parser.add_argument("--device", help=f"one of: {', '.join(DEVICES)}")
    parser.add_argument("--impl", help="model implementation (default: the catalog's default for the device)")
    parser.add_argument("--engine", help=f"inference engine filter: {', '.join(ENGINES)}")
    parser.add_argument("--local-server", action="store_true", help="start the server as a process on this host")
    parser.add_argument("--docker-server", action="store_true", help="start the server in a Docker container")
    parser.add_argument("--server-url", help="use an already running server at this base URL")
    parser.add_argument("--service-port", default=os.environ.get("SERVICE_PORT", "8000"),
                        help="server port (default: $SERVICE_PORT or 8000)")
    parser.add_argument("--bind-host", default="127.0.0.1", help="host address a Docker server publishes on")
    parser.add_argument("-it", "--interactive", action="store_true", help="docker: keep an interactive shell")
    parser.add_argument("--workflow-args", default="", help="'key=value ...' passed to the workflow (e.g. mode=smoke)")
    parser.add_argument("--disable-trace-capture", action="store_true", help="skip warm-up requests")
    parser.add_argument("--dev-mode", action="store_true", help="use the -dev- image variant")
    parser.add_argument("--override-docker-image", help="use this image instead of the spec's")
    parser.add_argument("--device-id", help="comma-separated Tenstorrent device ids, e.g. 0 or 0,1")
    parser.add_argument("--override-tt-config", help="JSON object replacing the spec's override_tt_config")
    parser.add_argument("--vllm-override-args", help="JSON object merged over the spec's vLLM args")
    parser.add_argument("--reset-venvs", action="store_true", help="delete .workflow_venvs/ first")
    parser.add_argument("--model-spec-json", help="use this resolved ModelSpec JSON instead of the catalog")
    parser.add_argument("--print-docker-cmd", action="store_true", help="print the docker run command and exit")
    parser.add_argument("--no-auth", action="store_true", help="no bearer token; servers we launch do not enforce auth")
    parser.add_argument("--output-dir", help="run directory (default: workflow_logs/runs/<run_id>)")
    parser.add_argument("--ignore-verdict", action="store_true",
                        help="write reports but exit 0 even when the release verdict is FAIL")
    parser.add_argument("--list", action="store_true", help="print the catalog as a table and exit")
    return parser


# ---------------------------------------------------------------------- helpers


def _choice(flag: str, value: str, choices: Sequence[str]) -> str:
    if value in choices:
        return value
    close = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.6)
    if close:
        raise UsageError(f"unknown {flag} {value!r}; did you mean {close[0]!r}?")
    shown = ", ".join(choices) if len(choices) <= 12 else ", ".join(choices[:12]) + ", … (see --list)"
    raise UsageError(f"unknown {flag} {value!r}; valid: {shown}")


def parse_json_object(flag: str, text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}, char {exc.pos})")
    if not isinstance(value, dict):
        raise UsageError(f"{flag} must be a JSON object, got {type(value).__name__}")
    return value


def parse_device_ids(text: str | None) -> list[int] | None:
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(p.isdigit() for p in parts):
        raise UsageError(
            f"invalid --device-id {text!r}: must be comma-separated non-negative integers (e.g. '0' or '0,1,2')"
        )
    ids = [int(p) for p in parts]
    if len(set(ids)) != len(ids):
        raise UsageError(f"invalid --device-id {text!r}: device ids repeat")
    return ids


def parse_port(text: str) -> int:
    if not str(text).isdigit() or not 1 <= int(text) <= 65535:
        raise UsageError(f"invalid --service-port {text!r}: must be an integer in 1..65535")
    return int(text)


# ---------------------------------------------------------------------- validation


def parse_args(argv: Sequence[str], catalog: Catalog | None) -> argparse.Namespace:
    """Parse and validate everything that does not need the resolved spec."""
    args = build_parser().parse_args(list(argv))
    if args.list:
        return args
    if args.workflow is None:
        raise UsageError("--workflow is required; one of: " + ", ".join(WORKFLOWS))
    args.workflow = _choice("--workflow", args.workflow, WORKFLOWS)
    workflow = WorkflowType(args.workflow)
    if args.workflow == "reports" and args.output_dir and not args.model:
        pass  # rebuilding from a run directory needs nothing else
    elif args.model_spec_json is None:
        for flag in ("model", "device"):
            if getattr(args, flag) is None:
                raise UsageError(f"--{flag} is required (see --list)")
    if args.device is not None:
        args.device = _choice("--device", args.device, DEVICES)
    if args.engine is not None:
        args.engine = _choice("--engine", args.engine, ENGINES)
    if catalog is not None and args.model is not None and args.model_spec_json is None:
        args.model = _choice("--model", args.model, catalog.model_names())
    if args.impl is not None and catalog is not None:
        args.impl = _choice("--impl", args.impl, catalog.impl_names())
    if args.local_server and args.docker_server:
        raise UsageError("--local-server and --docker-server cannot be used together; pick one")
    if args.server_url and (args.local_server or args.docker_server):
        raise UsageError("--server-url points at a running server; it cannot be combined with --local-server/--docker-server")
    if workflow is WorkflowType.SERVER and not (args.local_server or args.docker_server):
        raise UsageError("--workflow server starts a server: add --local-server or --docker-server")
    if args.print_docker_cmd and not args.docker_server:
        raise UsageError("--print-docker-cmd needs --docker-server")
    if workflow in NOT_YET_AVAILABLE:
        raise UsageError(f"--workflow {workflow.value} is not available yet: {NOT_YET_AVAILABLE[workflow]} "
                         f"(release runs the available workflows and reports this one as not run)")
    args.service_port = parse_port(args.service_port)
    args.device_ids = parse_device_ids(args.device_id)
    args.override_tt_config_obj = parse_json_object("--override-tt-config", args.override_tt_config)
    args.vllm_override_args_obj = parse_json_object("--vllm-override-args", args.vllm_override_args)
    try:
        args.workflow_args_map = parse_workflow_args(args.workflow_args)
        validate_workflow_args(workflow, args.workflow_args_map)
    except WorkflowArgsError as exc:
        raise UsageError(str(exc)) from None
    if args.workflow_args_map.get("ignore_verdict", "").lower() in ("1", "true", "yes"):
        args.ignore_verdict = True
    return args


def resolve_spec(args: argparse.Namespace, catalog: Catalog) -> ModelSpec:
    """Pick the one ModelSpec for (model, device, impl/engine) and apply runtime overrides."""
    if args.model_spec_json:
        path = Path(args.model_spec_json)
        try:
            spec = ModelSpec.read(path)
        except FileNotFoundError:
            raise UsageError(f"--model-spec-json {path} does not exist") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"--model-spec-json {path} is not a valid model spec: {exc}") from None
    else:
        candidates = catalog.for_model(args.model)
        on_device = [s for s in candidates if s.device_type.value == args.device]
        if not on_device:
            devices = sorted({s.device_type.value for s in candidates})
            raise UsageError(f"model {args.model!r} does not support device {args.device!r}; "
                             f"supported devices: {', '.join(devices)}")
        if args.engine:
            on_device = [s for s in on_device if s.engine.value == args.engine]
            if not on_device:
                raise UsageError(f"model {args.model!r} has no {args.engine!r} engine on {args.device!r}")
        impls = sorted(s.impl.impl_name for s in on_device)
        if args.impl:
            chosen = [s for s in on_device if s.impl.impl_name == args.impl]
            if not chosen:
                raise UsageError(f"model {args.model!r} has no impl {args.impl!r} on {args.device!r}; "
                                 f"impls: {', '.join(impls)}")
        else:
            chosen = [s for s in on_device if s.device_model_spec.default_impl]
            if len(chosen) != 1:
                raise UsageError(f"model {args.model!r} has no default impl on {args.device!r}; "
                                 f"pass --impl with one of: {', '.join(impls)}")
        spec = copy.deepcopy(chosen[0])
    apply_runtime_args(spec, args)
    return spec


def apply_runtime_args(spec: ModelSpec, args: argparse.Namespace) -> None:
    """CLI overrides that change what the server runs, recorded in the spec for the run dir."""
    dms = spec.device_model_spec
    if getattr(args, "override_tt_config_obj", None) is not None:
        dms.override_tt_config = dict(args.override_tt_config_obj)
    render_tt_config(spec)  # after the override, so it reaches vLLM (the reference lost it)
    if getattr(args, "vllm_override_args_obj", None):
        dms.vllm_args.update(args.vllm_override_args_obj)
    dms.vllm_args["port"] = str(args.service_port)
    if args.dev_mode:
        spec.docker_image = spec.docker_image.replace("-release-", "-dev-")
    if args.override_docker_image:
        spec.docker_image = args.override_docker_image
    spec.cli_args = cli_args_record(args)


def cli_args_record(args: argparse.Namespace) -> dict[str, Any]:
    """The parsed arguments as JSON-safe data (what cli_args.json holds)."""
    skip = {"override_tt_config_obj", "vllm_override_args_obj"}
    return {k: v for k, v in sorted(vars(args).items()) if k not in skip}
