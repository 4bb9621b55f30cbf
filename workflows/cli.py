"""run.py's command line: arguments, validation and spec resolution.

Every invalid input becomes one ``UsageError`` line (exit code 2) that names the valid choices.
Choices come from the catalog, so the CLI never drifts from it.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import json
import re
import stat
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Sequence

from workflows.arguments import check_argv, check_bind_host, check_docker_image
from workflows.catalog import Catalog, render_tt_config
from workflows.options import DEVICES, ENGINES, WORKFLOWS, add_options
from workflows.server_url import ServerUrlError, mask_credentials, parse_server_url
from contracts.model_spec import DeviceType, InferenceEngine, ModelSpec
from contracts.workflow_args import (
    NOT_YET_AVAILABLE,
    WorkflowArgsError,
    WorkflowType,
    parse_workflow_args,
    passthrough_targets,
    validate_workflow_args,
)

_ASCII_DIGITS = re.compile(r"[0-9]{1,9}")


class UsageError(Exception):
    """Bad user input: printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # argparse quotes the refused value ("invalid choice: 'https://user:pw@host'"): never echo a password
        raise UsageError(mask_credentials(message))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="run.py",
        description="Serve, benchmark, evaluate and report a model from the catalog.",
        epilog="Run `python3 run.py --list` to see every model, device and impl.",
    )
    add_options(parser)
    return parser


# ---------------------------------------------------------------------- helpers


def _choice(flag: str, value: str, choices: Sequence[str], *, any_case: bool = False) -> str:
    """``value`` if it is one of ``choices``; else one line with a close match or the valid ones.

    ``any_case``: device names are written in upper case in the documented examples (``--device N150``)
    and in lower case in the catalog; both name the same device, so the case is folded before matching.
    """
    if value in choices:
        return value
    if any_case:
        folded = {c.casefold(): c for c in choices}
        if value.casefold() in folded:
            return folded[value.casefold()]
        close = [folded[m] for m in difflib.get_close_matches(value.casefold(), list(folded), n=1, cutoff=0.6)]
    else:
        close = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.6)
    if close:
        raise UsageError(f"unknown {flag} {_shown(value)}; did you mean {close[0]!r}?")
    shown = ", ".join(choices) if len(choices) <= 12 else ", ".join(choices[:12]) + ", … (see --list)"
    raise UsageError(f"unknown {flag} {_shown(value)}; valid: {shown}")


def _shown(value: str, limit: int = 80) -> str:
    """A user's value as an error line shows it: quoted, escaped, cut to ``limit`` characters."""
    text = mask_credentials(str(value))
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


def _one_line(text: str, limit: int = 300) -> str:
    """A reason fit for one console line: first line only, cut at ``limit`` characters."""
    line = (str(text).splitlines() or [""])[0]
    return line if len(line) <= limit else line[:limit] + "..."


def parse_json_object(flag: str, text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}, char {exc.pos})")
    except RecursionError:
        raise UsageError(f"{flag} is nested too deeply to be an argument object") from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag} must be a JSON object, got {type(value).__name__}")
    return value


def parse_device_ids(text: str | None) -> list[int] | None:
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(_ASCII_DIGITS.fullmatch(p) for p in parts):
        raise UsageError(
            f"invalid --device-id {_shown(text)}: must be comma-separated non-negative integers (e.g. '0' or '0,1,2')"
        )
    ids = [int(p) for p in parts]
    if len(set(ids)) != len(ids):
        raise UsageError(f"invalid --device-id {_shown(text)}: device ids repeat")
    return ids


def parse_port(text: str) -> int:
    if not _ASCII_DIGITS.fullmatch(str(text)) or not 1 <= int(text) <= 65535:
        raise UsageError(f"invalid --service-port {_shown(text)}: must be an integer in 1..65535")
    return int(text)


# ---------------------------------------------------------------------- the typed run options


class ServerMode(Enum):
    """Where the server comes from: started here as a process, in a container, or already running."""

    LOCAL = "local"
    DOCKER = "docker"
    EXTERNAL = "external"


LIST_FORMATS = ("table", "json")


@dataclass(frozen=True)
class RunOptions:
    """Everything the command line decided, validated and typed; built once by ``parse_args``.

    Frozen: steps read it, nothing changes it. ``flags`` keeps the flags as typed by the user
    (what ``cli_args.json`` records, so a report can print the command that produced it).
    """

    workflow: WorkflowType | None          # None only with --list or --history
    model: str | None = None
    device: DeviceType | None = None
    impl: str | None = None
    engine: InferenceEngine | None = None
    server_mode: ServerMode = ServerMode.EXTERNAL
    server_url: str | None = None
    service_port: int = 8000
    bind_host: str = "127.0.0.1"
    interactive: bool = False
    workflow_args: dict[str, str] = field(default_factory=dict)
    disable_trace_capture: bool = False
    dev_mode: bool = False
    override_docker_image: str | None = None
    device_ids: tuple[int, ...] | None = None
    override_tt_config: dict[str, Any] | None = None
    vllm_override_args: dict[str, Any] | None = None
    baseline_url: str | None = None                     # A/B: a running baseline server (base URL, checked)
    baseline_vllm_args: dict[str, Any] | None = None    # A/B: a second local server with these vLLM args
    reset_venvs: bool = False
    model_spec_json: Path | None = None
    print_docker_cmd: bool = False
    no_auth: bool = False
    auth_mode: str = "key"
    output_dir: Path | None = None
    ignore_verdict: bool = False
    fresh_server: bool = False
    list_catalog: bool = False
    host_resources: bool = False  # --host-resources: print this host's `ray start --resources` JSON
    list_format: str = "table"
    history: bool = False
    requirements: Any = None               # records.requirements.Requirements (--requirements)
    custom_weights: tuple[str, str | None] | None = None  # (served name, weights dir or None: a hub id)
    flags: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def rebuilds_reports(self) -> bool:
        """``--workflow reports --output-dir RUN_DIR`` without a model: rebuild from that run's files."""
        return self.workflow is WorkflowType.REPORTS and self.output_dir is not None and self.model is None \
            and self.model_spec_json is None

    def record(self) -> dict[str, Any]:
        """The flags as JSON-safe data (``cli_args.json``): one key per flag, as typed, plus
        ``workflow_args_passthrough`` (each --workflow-args key the workflow does not own -> where it went)."""
        return dict(self.flags)


def check_compare_to(value: str, workflow: WorkflowType) -> str:
    """``last``, a run id, or a run directory (made absolute: the reports step runs elsewhere)."""
    if workflow in (WorkflowType.SERVER, WorkflowType.DEPLOY):
        raise UsageError(f"--compare-to compares results; --workflow {workflow.value} has none")
    if value == "last":
        return value
    if not value.strip() or any(c in value for c in "\n\r\x00"):
        raise UsageError(f"--compare-to {_shown(value)} is not last, a run directory or a run id")
    path = Path(value).expanduser()
    try:
        is_dir = path.is_dir()
    except OSError as exc:  # a name too long for the file system, a loop of links...
        raise UsageError(f"--compare-to {_shown(value)}: {exc.strerror or exc}") from None
    if is_dir:
        if not (path / "manifest.json").is_file():
            raise UsageError(f"--compare-to {_shown(value)} is a directory but not a run directory (no manifest.json)")
        _check_baseline(path, value)
        return str(path.resolve())
    if "/" in value:
        raise UsageError(f"--compare-to {_shown(value)}: no such run directory")
    _check_baseline_id(value)
    return value  # a run id, looked up in the run history again by the reports step


def _check_baseline(run_dir: Path, value: str) -> None:
    """A baseline named on purpose must have finished with whole measurements (history.baseline)."""
    from history.baseline import unusable_reason

    why = unusable_reason(run_dir, explicit=True)
    if why is not None:
        raise UsageError(f"--compare-to {_shown(value)} cannot be a baseline: {why}")


def _check_baseline_id(run_id: str) -> None:
    """A run id must name a run of the history that can be a baseline. When the history cannot be
    reached here the reports step looks it up again and says what it found."""
    from history.store import HistoryError, open_store, shown_url

    try:
        store = open_store()
    except HistoryError:
        return
    with store:
        entry = store.get(run_id)
        url = shown_url(store.url)
    if entry is None:
        raise UsageError(f"--compare-to {_shown(run_id)}: no such run directory, and no run with that id in the "
                         f"run history ({url})")
    _check_baseline(Path(entry.run_dir), run_id)


def check_baseline_host(value: str, environment: dict) -> None:
    """A baseline named on purpose (a run directory or id, as ``check_compare_to`` left it) must have run on
    a host with this run's fingerprint (``environment``: this run's manifest block), unless
    ``compare_hosts=any`` asked otherwise (the caller checks that): ``last`` never takes another host's
    run either. Without a recorded environment on either side, or a run history to look an id up in, the
    reports step decides (it then leaves the run not compared, with the same line)."""
    from contracts.run_dir import Manifest
    from history.fingerprint import differences_before_start, host_facts_of_environment, other_host_line

    path = Path(value)
    if not path.is_dir():
        from history.store import HistoryError, open_store

        try:
            store = open_store()
        except HistoryError:
            return
        with store:
            entry = store.get(value)
        if entry is None:
            return
        path = Path(entry.run_dir)
    try:
        theirs = host_facts_of_environment(Manifest.read(path / "manifest.json").environment)
    except (OSError, ValueError, TypeError, KeyError):
        return
    mine = host_facts_of_environment(environment)
    differences = differences_before_start(mine, theirs) if mine is not None and theirs is not None else []
    if differences:
        raise UsageError(other_host_line(_shown(value), differences))


def parse_args(argv: Sequence[str], catalog: Catalog | None) -> RunOptions:
    """Parse and validate everything that does not need the resolved spec."""
    ns = _parse_argv(argv)
    flags = {k: v for k, v in sorted(vars(ns).items()) if k not in ("list", "format", "history", "host_resources")}
    if ns.format not in LIST_FORMATS:
        raise UsageError(f"unknown --format {_shown(ns.format)}; valid: {', '.join(LIST_FORMATS)}")
    if ns.list:
        return RunOptions(workflow=None, list_catalog=True, list_format=ns.format, flags=flags)
    if ns.host_resources:
        return RunOptions(workflow=None, host_resources=True, flags=flags)
    if ns.history:
        return history_options(ns, catalog, flags)
    requirements, custom_weights = _requirements(ns, catalog, flags)
    workflow = _chosen_workflow(ns)
    device = DeviceType(_choice("--device", ns.device, DEVICES, any_case=True)) if ns.device is not None else None
    engine = InferenceEngine(_choice("--engine", ns.engine, ENGINES)) if ns.engine is not None else None
    model = ns.model
    if catalog is not None and model is not None and ns.model_spec_json is None:
        model = _choice("--model", model, catalog.model_names())
    impl = _choice("--impl", ns.impl, catalog.impl_names()) if ns.impl is not None and catalog is not None \
        else ns.impl
    _check_flag_combinations(ns, workflow)
    workflow_args = _spec_decode_urls(ns, _checked_workflow_args(ns, workflow, flags), workflow)
    service_port = _checked_server_flags(ns)
    ignore_verdict = ns.ignore_verdict or workflow_args.get("ignore_verdict", "").lower() in ("1", "true", "yes")
    if ns.compare_to is not None:
        flags["compare_to"] = check_compare_to(ns.compare_to, workflow)
    mode = ServerMode.LOCAL if ns.local_server else ServerMode.DOCKER if ns.docker_server else ServerMode.EXTERNAL
    if ns.fresh_server and mode is not ServerMode.LOCAL:
        raise UsageError("--fresh-server applies to --local-server only (a standby server is a local one)")
    device_ids = parse_device_ids(ns.device_id)
    baseline_url, baseline_vllm_args = check_baseline_flags(ns, workflow, service_port)
    return RunOptions(
        workflow=workflow, model=model, device=device, impl=impl, engine=engine, server_mode=mode,
        server_url=ns.server_url, service_port=service_port, bind_host=ns.bind_host,
        interactive=ns.interactive, workflow_args=workflow_args, disable_trace_capture=ns.disable_trace_capture,
        dev_mode=ns.dev_mode, override_docker_image=ns.override_docker_image,
        device_ids=tuple(device_ids) if device_ids is not None else None,
        override_tt_config=parse_json_object("--override-tt-config", ns.override_tt_config),
        vllm_override_args=parse_json_object("--vllm-override-args", ns.vllm_override_args),
        baseline_url=baseline_url, baseline_vllm_args=baseline_vllm_args,
        reset_venvs=ns.reset_venvs, model_spec_json=Path(ns.model_spec_json) if ns.model_spec_json else None,
        print_docker_cmd=ns.print_docker_cmd, no_auth=ns.no_auth, auth_mode=ns.auth,
        output_dir=Path(ns.output_dir) if ns.output_dir else None, ignore_verdict=ignore_verdict,
        fresh_server=ns.fresh_server, requirements=requirements, custom_weights=custom_weights, flags=flags,
    )



def _spec_decode_urls(ns: argparse.Namespace, workflow_args: dict[str, str], workflow: WorkflowType) -> dict[str, str]:
    """--spec-decode-metrics-url (the upstream project's flag) is the benchmarks key ``spec_decode_metrics_url``:
    the same endpoints, checked by the same parser before any work (``workflows.arg_values``)."""
    value = getattr(ns, "spec_decode_metrics_url", None)
    if value is None:
        return workflow_args
    if workflow not in (WorkflowType.BENCHMARKS, WorkflowType.RELEASE):
        raise UsageError("--spec-decode-metrics-url is read by the benchmarks: use --workflow benchmarks or release")
    if "spec_decode_metrics_url" in workflow_args:
        raise UsageError("--spec-decode-metrics-url and --workflow-args spec_decode_metrics_url= both name the "
                         "endpoints: give one")
    return {**workflow_args, "spec_decode_metrics_url": value}


def _requirements(ns: argparse.Namespace, catalog: Catalog | None, flags: dict) -> tuple[Any, Any]:
    """--requirements and --custom-weights (``workflows.requirements_cli.requirements_options``), one line each."""
    from workflows.requirements_cli import RequirementsUsage, requirements_options

    try:
        return requirements_options(ns, catalog.model_names() if catalog is not None else [], flags)
    except RequirementsUsage as exc:
        raise UsageError(str(exc)) from None


def _parse_argv(argv: Sequence[str]) -> argparse.Namespace:
    """argparse's namespace, once every argument is checked to be text a flag can hold."""
    try:
        check_argv(argv)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    ns = build_parser().parse_args(list(argv))
    for name, value in vars(ns).items():
        if isinstance(value, list):  # argparse turns `--flag=--` into [] (the "--" is read as the separator)
            raise UsageError(f"--{name.replace('_', '-')} needs a value, not '--'")
    return ns


def _chosen_workflow(ns: argparse.Namespace) -> WorkflowType:
    """--workflow, and the --model and --device it needs (a reports rebuild of --output-dir and a
    --model-spec-json run need neither)."""
    if ns.workflow is None:
        raise UsageError("--workflow is required; one of: " + ", ".join(WORKFLOWS))
    workflow = WorkflowType(_choice("--workflow", ns.workflow, WORKFLOWS))
    rebuild = workflow is WorkflowType.REPORTS and ns.output_dir and not ns.model and not ns.model_spec_json
    if not rebuild and ns.model_spec_json is None:
        for flag in ("model", "device"):
            if getattr(ns, flag) is None:
                raise UsageError(f"--{flag} is required (see --list)")
    return workflow


def _check_flag_combinations(ns: argparse.Namespace, workflow: WorkflowType) -> None:
    """Flags that contradict each other, or need another flag or workflow, each refused with the fix."""
    if ns.local_server and ns.docker_server:
        raise UsageError("--local-server and --docker-server cannot be used together; pick one")
    if ns.server_url and (ns.local_server or ns.docker_server):
        raise UsageError("--server-url points at a running server; it cannot be combined with "
                         "--local-server/--docker-server")
    if workflow is WorkflowType.SERVER and not (ns.local_server or ns.docker_server):
        raise UsageError("--workflow server starts a server: add --local-server or --docker-server")
    if ns.auth == "jwt-gateway" and ns.no_auth:
        raise UsageError("--auth jwt-gateway and --no-auth contradict each other; pick one")
    if ns.auth == "jwt-gateway" and not (ns.local_server or ns.docker_server):
        raise UsageError("--auth jwt-gateway fronts a server run.py launches: add --local-server or --docker-server")
    if ns.interactive and not ns.docker_server:
        raise UsageError("--interactive opens a shell in the server's Docker container: add --docker-server")
    if ns.interactive and workflow is not WorkflowType.SERVER:
        raise UsageError("--interactive leaves starting the server to you in the container's shell: "
                         "use it with --workflow server")
    if ns.interactive and ns.auth == "jwt-gateway":
        raise UsageError("--interactive starts no server for the JWT gateway to front; drop --auth jwt-gateway")
    if ns.print_docker_cmd and not ns.docker_server:
        raise UsageError("--print-docker-cmd needs --docker-server")
    if workflow in NOT_YET_AVAILABLE:
        raise UsageError(f"--workflow {workflow.value} is not available yet: {NOT_YET_AVAILABLE[workflow]} "
                         f"(release runs the available workflows and reports this one as not run)")


def _checked_workflow_args(ns: argparse.Namespace, workflow: WorkflowType, flags: dict) -> dict[str, str]:
    """--workflow-args as a dict, validated for the workflow; where each key the workflow does not own goes is
    added to ``flags`` (cli_args.json)."""
    try:
        workflow_args = parse_workflow_args(ns.workflow_args)
        validate_workflow_args(workflow, workflow_args)
    except WorkflowArgsError as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:  # shlex: an unbalanced quote
        raise UsageError(f"--workflow-args {_shown(ns.workflow_args)} cannot be split into key=value entries: {exc}") \
            from None
    passthrough = passthrough_targets(workflow, workflow_args)
    if passthrough:  # cli_args.json (and the report's metadata) say where each key the workflow does not own went
        flags["workflow_args_passthrough"] = passthrough
    return workflow_args


def _checked_server_flags(ns: argparse.Namespace) -> int:
    """--service-port (returned), and --server-url, --bind-host and --override-docker-image checked."""
    service_port = parse_port(ns.service_port)
    try:
        if ns.server_url is not None:
            parse_server_url(ns.server_url, service_port)
        check_bind_host(ns.bind_host)
        if ns.override_docker_image is not None:
            check_docker_image(ns.override_docker_image)
    except (ServerUrlError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    return service_port


#: vLLM args the baseline server's launch sets itself (its own port, this host's address).
BASELINE_OWN_ARGS = ("port", "host")


def check_baseline_flags(ns: argparse.Namespace, workflow: WorkflowType,
                         service_port: int) -> tuple[str | None, dict[str, Any] | None]:
    """--baseline-url (checked and normalised as --server-url is) and --baseline-vllm-args (a JSON object for a
    second local server): the A/B of two live servers (``workflows.ab_servers``). None, None when neither."""
    url, overlay = ns.baseline_url, ns.baseline_vllm_args
    if url is None and overlay is None:
        return None, None
    flag = "--baseline-url" if url is not None else "--baseline-vllm-args"
    if url is not None and overlay is not None:
        raise UsageError("--baseline-url and --baseline-vllm-args name two baselines; pick one")
    if workflow not in (WorkflowType.BENCHMARKS, WorkflowType.EVALS, WorkflowType.RELEASE):
        raise UsageError(f"{flag} compares the benchmark points and eval items of two servers: use --workflow "
                         f"benchmarks, evals or release")
    if overlay is not None:
        args = parse_json_object("--baseline-vllm-args", overlay)
        if not ns.local_server or ns.auth == "jwt-gateway":
            raise UsageError("--baseline-vllm-args starts a second local server of the same spec: use it with "
                             "--local-server (and without --auth jwt-gateway)")
        own = [key for key in BASELINE_OWN_ARGS if key in (args or {})]
        if own:
            raise UsageError(f"--baseline-vllm-args: {', '.join(own)} is the baseline server's own (it gets a free "
                             f"port on this host); drop it")
        return None, args
    try:
        base = parse_server_url(url, service_port, flag="--baseline-url").base
        own = parse_server_url(ns.server_url, service_port).base if ns.server_url else None
    except ServerUrlError as exc:
        raise UsageError(str(exc)) from None
    if own == base or (own is None and base == f"http://127.0.0.1:{service_port}" and ns.local_server):
        raise UsageError(f"--baseline-url {_shown(url)} is this run's own server: an A/B needs two servers")
    return base, None


def resolve_spec(options: RunOptions, catalog: Catalog) -> ModelSpec:
    """Pick the one ModelSpec for (model, device, impl/engine) and apply runtime overrides."""
    if options.model_spec_json:
        path = options.model_spec_json
        _check_spec_file(path)
        try:
            spec = ModelSpec.read(path)
        except FileNotFoundError:
            raise UsageError(f"--model-spec-json {path} does not exist") from None
        except OSError as exc:
            raise UsageError(f"--model-spec-json {_shown(path)} cannot be read: {exc.strerror or exc}") from None
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            # A spec is data: anything its reader trips over means the file is not a spec.
            reason = f"{type(exc).__name__}: {exc}" if isinstance(exc, (KeyError, AttributeError)) else str(exc)
            raise UsageError(f"--model-spec-json {path} is not a valid model spec: {_one_line(reason)}") from None
    else:
        spec = copy.deepcopy(_choose_spec(options, catalog))
    if options.custom_weights is not None:  # an off-catalog model inheriting this spec
        from workflows.requirements_cli import off_catalog_spec
        spec = off_catalog_spec(spec, options.custom_weights, options.requirements)
    apply_runtime_options(spec, options)
    return spec


MAX_SPEC_BYTES = 16 * 1024 * 1024


def _check_spec_file(path: Path) -> None:
    """A spec is a small regular file: /dev/zero, a FIFO or a 1 GB file would hang or exhaust memory."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise UsageError(f"--model-spec-json {path} does not exist") from None
    except OSError as exc:
        raise UsageError(f"--model-spec-json {_shown(path)} cannot be read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"--model-spec-json {path} is not a regular file")
    if info.st_size > MAX_SPEC_BYTES:
        raise UsageError(f"--model-spec-json {path} is {info.st_size} bytes; a model spec is at most "
                         f"{MAX_SPEC_BYTES} bytes")


def _choose_spec(options: RunOptions, catalog: Catalog) -> ModelSpec:
    model, device = options.model, options.device.value if options.device else None
    candidates = catalog.for_model(model)
    on_device = [s for s in candidates if s.device_type is options.device]
    if not on_device:
        devices = sorted({s.device_type.value for s in candidates})
        raise UsageError(f"model {model!r} does not support device {device!r}; "
                         f"supported devices: {', '.join(devices)}")
    if options.engine:
        on_device = [s for s in on_device if s.engine is options.engine]
        if not on_device:
            raise UsageError(f"model {model!r} has no {options.engine.value!r} engine on {device!r}")
    impls = sorted(s.impl.impl_name for s in on_device)
    if options.impl:
        chosen = [s for s in on_device if s.impl.impl_name == options.impl]
        if not chosen:
            raise UsageError(f"model {model!r} has no impl {options.impl!r} on {device!r}; "
                             f"impls: {', '.join(impls)}")
    else:
        chosen = [s for s in on_device if s.device_model_spec.default_impl]
        if len(chosen) != 1:
            raise UsageError(f"model {model!r} has no default impl on {device!r}; "
                             f"pass --impl with one of: {', '.join(impls)}")
    return chosen[0]


def merge_tt_config(base: dict[str, Any] | None, override: dict[str, Any]) -> dict[str, Any]:
    """The spec's TT config with ``override``'s keys laid over it, key by key (as --vllm-override-args).

    The documented ``--override-tt-config '{"data_parallel": 16}'`` changes one key; replacing the whole
    dict would silently drop keys a device needs (galaxy's ``fabric_config``, ``dispatch_core_axis``,
    ``trace_region_size``). A key set to ``null`` removes that key from the spec's config.
    """
    merged = dict(base or {})
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def apply_runtime_options(spec: ModelSpec, options: RunOptions) -> None:
    """CLI overrides that change what the server runs, recorded in the spec for the run dir."""
    dms = spec.device_model_spec
    if options.override_tt_config is not None:
        dms.override_tt_config = merge_tt_config(dms.override_tt_config, options.override_tt_config)
    render_tt_config(spec)  # after the override, so it reaches vLLM
    for key, value in (options.vllm_override_args or {}).items():
        if value is None:  # null removes the argument (as --baseline-vllm-args does)
            dms.vllm_args.pop(key, None)
        else:
            dms.vllm_args[key] = value
    dms.vllm_args["port"] = str(options.service_port)
    if options.dev_mode:
        spec.docker_image = spec.docker_image.replace("-release-", "-dev-")
    if options.override_docker_image:
        spec.docker_image = options.override_docker_image
    spec.cli_args = options.record()


def history_options(ns: argparse.Namespace, catalog: Any, flags: dict[str, Any]) -> RunOptions:
    """--history's options: where to write, and which releases (a model from the catalog, a device)."""
    if ns.workflow is not None:
        raise UsageError("--history shows the run history and runs no workflow: drop --workflow")
    if not ns.output_dir:
        raise UsageError("--history writes history.html and history.json: add --output-dir DIR")
    device = DeviceType(_choice("--device", ns.device, DEVICES, any_case=True)) if ns.device is not None else None
    model = ns.model
    if model is not None and catalog is not None:
        model = _choice("--model", model, catalog.model_names())
    return RunOptions(workflow=None, history=True, model=model, device=device, output_dir=Path(ns.output_dir),
                      flags=flags)
