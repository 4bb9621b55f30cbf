"""The orchestrator entry point (run.py re-executes itself into the ``run`` venv, then calls main).

Exit codes: 0 the work and its checks passed; 1 a step or workflow failed; 2 bad input;
3 the release verdict is FAIL (reports still written); 128+N interrupted by signal N.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any, Sequence

from contracts import REPO_ROOT
from contracts.model_spec import ModelSpec
from contracts.run_dir import Manifest, RunDirectory, StepStatus, default_runs_root, host_facts, make_run_id
from contracts.workflow_args import WorkflowType
from workflows.cli import RunOptions, ServerMode, UsageError, check_baseline_host, parse_args, resolve_spec
from workflows.output_dir import claim_output_dir

DOTENV_PATH = REPO_ROOT / ".env"
CATALOG_COLUMNS = ("model", "device", "impl", "engine", "status", "default")


def catalog_rows(catalog) -> list[dict[str, str]]:
    """One row per (model, device, impl), sorted: what ``--list`` shows in every format."""
    specs = sorted(catalog.specs.values(), key=lambda s: (s.model_name, s.device_type.value, s.impl.impl_name))
    return [{"model": s.model_name, "device": s.device_type.value, "impl": s.impl.impl_name,
             "engine": s.engine.value, "status": s.status.name,
             "default": "yes" if s.device_model_spec.default_impl else ""} for s in specs]


def render_catalog(rows: list[dict[str, str]], fmt: str) -> str:
    """``json``: a list of objects; ``table``: aligned plain rows, names never cut (safe to grep)."""
    if fmt == "json":
        return json.dumps(rows, indent=2)
    widths = {c: max([len(c)] + [len(r[c]) for r in rows]) for c in CATALOG_COLUMNS}
    lines = ["  ".join(c.ljust(widths[c]) for c in CATALOG_COLUMNS).rstrip()]
    lines += ["  ".join(r[c].ljust(widths[c]) for c in CATALOG_COLUMNS).rstrip() for r in rows]
    return "\n".join(lines)


def print_catalog(catalog, fmt: str) -> None:
    """A rich table on a terminal; whole plain rows when piped (rich would cut names to the width)."""
    rows = catalog_rows(catalog)
    if fmt == "table" and sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(title="Model catalog", title_justify="left")
        for column in CATALOG_COLUMNS:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*(row[c] for c in CATALOG_COLUMNS))
        Console().print(table)
        return
    try:
        print(render_catalog(rows, fmt), flush=True)
    except BrokenPipeError:  # `run.py --list | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def host_environment(spec: ModelSpec, server_mode: str = "external") -> dict:
    """Host and package facts for the report's metadata (cheap: files only, no subprocesses).

    ``engine`` names the engine that will serve the run (``workflows.engine_env``; a local engine's packages
    are read when its server starts); ``packages`` holds the client venvs' versions found now, for the
    report (they are not part of the host fingerprint)."""
    from workflows.engine_env import engine_block
    from workflows.venvs import venvs_root

    packages = {}
    for venv, names in {"evals": ("lm_eval",), "benchmarks": ("tokenizers", "uvloop"),
                        "run": ("rich", "docker")}.items():
        for site in (venvs_root() / venv / "lib").glob("python3.*/site-packages"):
            for name in names:
                for dist in site.glob(f"{name}-*.dist-info"):
                    packages[name.replace("_", "-")] = dist.name[len(name) + 1:-len(".dist-info")]
    return {
        "python": platform.python_version(),
        "packages": packages,
        "host": host_facts(),
        "engine": engine_block(spec, server_mode),
        "tool_version": spec.version,
    }


def _rebuild_reports(options: RunOptions, ui) -> int:
    """``--workflow reports --output-dir RUN_DIR``: rebuild every report from that run's files."""
    from workflows import pipeline
    from workflows.auth import Redactor

    assert options.output_dir is not None
    path = options.output_dir.resolve()
    if not (path / "manifest.json").exists() or not (path / "model_spec.json").exists():
        raise UsageError(f"--output-dir {path} is not a run directory (no manifest.json / model_spec.json)")
    try:
        spec = ModelSpec.read(path / "model_spec.json")
        manifest = Manifest.read(path / "manifest.json")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise UsageError(f"--output-dir {path} holds a run whose manifest.json or model_spec.json cannot be read "
                         f"({type(exc).__name__})") from None
    run_dir = RunDirectory(path, manifest, Redactor.from_env(os.environ).redact)
    ctx = pipeline.RunContext(spec=spec, options=options, run_dir=run_dir, ui=ui)
    try:
        pipeline.prepare_venvs(ctx, [WorkflowType.REPORTS])
        code = pipeline.run_client_step(ctx, WorkflowType.REPORTS)
    except pipeline.StepFailed as exc:
        ui.error(str(exc))
        code = 1
    finally:
        run_dir.save()
        run_dir.close()
    ui.run_directory(str(run_dir.path))
    return code


#: The longest error line run.py prints: a message quoting a hostile value (a 5000-character URL) is cut in the
#: middle, keeping its start (which flag) and its end (why it was refused).
MAX_ERROR_LINE = 600


def error_line(message: str, limit: int = MAX_ERROR_LINE) -> str:
    """``message`` as is when it is at most ``limit`` characters, else cut in the middle to about that."""
    text = message
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[-(limit // 4):]
    return f"{head} [... {len(text) - len(head) - len(tail)} characters cut ...] {tail}"


def main(argv: Sequence[str] | None = None) -> int:
    """run.py's whole life: no input, however bad, shows a Python traceback on the console.

    Input errors are one line and exit 2 (``UsageError``); after the run directory exists, a
    failure is recorded in run.log (``_execute_run``). An exception that escapes before that is a bug:
    one line names it and the file that holds its traceback, exit 1.
    """
    try:
        return _run(list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:
        print("run.py: interrupted before the run started", file=sys.stderr)
        return 128 + signal.SIGINT
    except Exception as exc:  # noqa: BLE001 - the last guard: a bug, never a traceback on the console
        import tempfile
        import traceback

        with tempfile.NamedTemporaryFile("w", prefix="run.py-internal-error-", suffix=".log", delete=False,
                                         encoding="utf-8", errors="backslashreplace") as crash:
            crash.write(traceback.format_exc())
        print(f"run.py: internal error: {type(exc).__name__}: {ascii(str(exc))[1:-1][:300]} "
              f"(traceback in {crash.name})", file=sys.stderr)
        return 1


@dataclass
class _PreparedRun:
    """What the checks before the run starts hand on: every input valid, the run directory claimed."""

    options: RunOptions
    spec: ModelSpec
    environment: dict
    auth: Any  # workflows.auth.Auth
    run_id: str
    killed: Any  # workflows.resume's killed run to resume, or None
    manifest: Manifest
    run_dir: RunDirectory


def _run(argv: list[str]) -> int:
    from workflows.ui import Ui

    ui = Ui()
    t_start = time.monotonic()
    try:
        prepared = _prepare_run(argv, ui)
    except UsageError as exc:
        print(f"run.py: error: {error_line(str(exc))}", file=sys.stderr)
        return 2
    if isinstance(prepared, int):  # --list, a reports rebuild or --history: done, with this exit code
        return prepared
    return _execute_run(prepared, argv, ui, t_start)


def _prepare_run(argv: list[str], ui) -> _PreparedRun | int:
    """Everything that can fail on bad input, before the run directory exists (UsageError: exit 2).

    The commands that need no run directory (--list, a reports rebuild, --history) run here and give their
    exit code instead."""
    from workflows.catalog import load_catalog

    catalog = load_catalog()
    options = parse_args(argv, catalog)
    if options.list_catalog:
        print_catalog(catalog, options.list_format)
        return 0
    if options.host_resources:
        from workflows.matrix_fleet import host_resources_line

        line, notes = host_resources_line()
        for note in notes:
            print(f"run.py: note: {note}", file=sys.stderr)
        print(line)
        return 0
    if options.rebuilds_reports:
        return _rebuild_reports(options, ui)
    if options.history:
        from workflows.history_command import run_history

        return run_history(options, ui)
    spec = resolve_spec(options, catalog)
    _validate_for_workflow(spec, options)
    environment = host_environment(spec, options.server_mode.value)
    if options.flags.get("compare_to") not in (None, "last") and options.workflow_args.get(
            "compare_hosts", "same") != "any":
        check_baseline_host(options.flags["compare_to"], environment)
    auth = _resolve_auth(options)
    return _claim_run_dir(options, spec, environment, auth)


def _resolve_auth(options: RunOptions):
    """The run's auth, from the environment and .env (read once, up front), checked to fit an HTTP header."""
    from workflows.auth import DotenvError, load_dotenv, resolve_auth

    try:
        load_dotenv(DOTENV_PATH)  # read up front: every later reader (auth, redaction) gets the same file
    except DotenvError as exc:
        raise UsageError(str(exc)) from None
    auth = resolve_auth(options.no_auth, os.environ, DOTENV_PATH,
                        external=options.server_mode is ServerMode.EXTERNAL)
    if options.auth_mode == "jwt-gateway":
        from workflows.servers.jwt_gateway import gateway_auth

        auth = gateway_auth(os.environ, load_dotenv(DOTENV_PATH))
    _check_bearer(auth)
    return auth


def _claim_run_dir(options: RunOptions, spec: ModelSpec, environment: dict, auth) -> _PreparedRun:
    """The run's id and directory: a killed run of the same command is resumed in its own directory."""
    from workflows.auth import Redactor

    assert options.workflow is not None
    run_id = make_run_id(spec.model_id, options.workflow.value)
    # The same command after a hard kill picks up where that run stopped, in its own directory or the one
    # --output-dir names.
    from workflows.resume import RunInProgress, find_killed_run, killed_run_at

    try:
        killed = find_killed_run(default_runs_root(), spec.model_id, options.workflow.value, options.record()) \
            if options.output_dir is None else \
            killed_run_at(options.output_dir.absolute(), spec.model_id, options.workflow.value,
                          options.record())
    except RunInProgress as exc:
        raise UsageError(str(exc)) from None
    run_id = killed.run_id if killed else run_id
    try:
        path = claim_output_dir(killed.path if killed else options.output_dir or default_runs_root() / run_id,
                                spec.model_id, options.workflow.value)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    redactor = Redactor.from_env(os.environ, auth, DOTENV_PATH)
    manifest = Manifest(run_id=run_id, model_id=spec.model_id, workflow=options.workflow.value)
    try:
        run_dir = RunDirectory(path, manifest, redactor.redact)
    except OSError as exc:
        raise UsageError(f"--output-dir {path} cannot hold the run's files: {exc.strerror or exc}") from None
    return _PreparedRun(options=options, spec=spec, environment=environment, auth=auth, run_id=run_id,
                        killed=killed, manifest=manifest, run_dir=run_dir)


def _execute_run(run: _PreparedRun, argv: list[str], ui, t_start: float) -> int:
    """The run itself, in its directory: a failure from here on is recorded in run.log, never a traceback."""
    from workflows import pipeline
    from workflows.resume import mark_owner, release_owner, stop_orphans

    run_dir, spec = run.run_dir, run.spec
    if run.killed is not None:
        for line in stop_orphans(run_dir.path):
            ui.plain(line)
            run_dir.log(line)
        ui.plain(f"Resuming {run.run_id}: its run.py was killed; what it finished is kept and only what is missing "
                 "runs")
    mark_owner(run_dir.path)
    _record_resolved_spec(run, argv, t_start)
    ui.plain(f"Run {run.run_id}")
    ui.plain(f"  model {spec.model_name} on {spec.device_type.value} (impl {spec.impl.impl_name}, "
             f"engine {spec.engine.value}, status {spec.status.name}); auth: {run.auth.source}")
    ctx = pipeline.RunContext(spec=spec, options=run.options, run_dir=run_dir, ui=ui, auth=run.auth)
    try:
        code = pipeline.execute(ctx)
    except Exception as exc:  # a bug, not a user error: the traceback goes to run.log, one line to the console
        import traceback

        run_dir.log(traceback.format_exc())
        ui.error(f"internal error: {type(exc).__name__}: {exc} (traceback in run.log)")
        code = 1
    finally:
        release_owner(run_dir.path)
        run_dir.close()
        ui.run_directory(str(run_dir.path))
    return code


def _record_resolved_spec(run: _PreparedRun, argv: list[str], t_start: float) -> None:
    """The run's first step: the spec and the command line, written to the run directory."""
    run_dir = run.run_dir
    record = run_dir.start_step("resolve_spec")
    run.spec.write(run_dir.spec_path)
    run_dir.write_json("cli_args.json", run.options.record())
    outputs = ["model_spec.json", "cli_args.json"]
    if run.options.requirements is not None:  # the report's "Requirements" table is judged from this copy
        (run_dir.path / "requirements.json").write_text(run.options.requirements.to_json() + "\n")
        outputs.append("requirements.json")
    run.manifest.environment = run.environment
    run_dir.end_step(record, StepStatus.PASSED, run.spec.model_id, outputs)
    run_dir.log(f"run {run.run_id}: {' '.join(argv)}")
    run_dir.log(f"spec resolved in {time.monotonic() - t_start:.3f}s since start")


def _check_bearer(auth) -> None:
    """A key from API_KEY/JWT_SECRET must fit in an HTTP header, or every request fails far from the cause."""
    bearer = auth.bearer or ""
    if any(not (33 <= ord(c) <= 126) for c in bearer):
        raise UsageError(f"the bearer from {auth.source} (environment or .env) holds spaces, control or "
                         f"non-ASCII characters, which an HTTP Authorization header cannot carry")


def _validate_for_workflow(spec: ModelSpec, options: RunOptions) -> None:
    """Fail before anything starts when the workflow cannot run for this spec."""
    from records.media import kind_of

    if options.workflow in (WorkflowType.EVALS, WorkflowType.RELEASE) and kind_of(spec.model_type) is None:
        # Media kinds carry their own eval (media_clients/run_media_evals.py).
        from evals.eval_config import EVAL_CONFIGS

        if spec.model_name not in EVAL_CONFIGS:
            raise UsageError(f"model {spec.model_name!r} has no eval config; models with evals: "
                             f"{', '.join(sorted(EVAL_CONFIGS))}")
    if options.server_mode is ServerMode.LOCAL and spec.device_type.value == "gpu":
        raise UsageError("--local-server is not supported on gpu; use --docker-server (upstream vLLM image)")
    trace = options.workflow_args.get("trace_file")
    if trace and options.workflow in (WorkflowType.BENCHMARKS, WorkflowType.STRESS_TESTS, WorkflowType.RELEASE):
        _check_trace(trace, spec, options)
    from workflows.arg_values import check_values  # the clients' own parsers, run before any server

    problem = check_values(options.workflow, options.workflow_args, spec)
    if problem:
        raise UsageError(problem)


def _check_trace(trace: str, spec: ModelSpec, options: RunOptions) -> None:
    """A trace to replay is read and checked before any server starts (a bad line is exit 2 here, not
    after minutes of start-up), for the benchmarks and stress_tests workflows alike (both replay it with the
    same code); its path is made absolute, the clients run from the repository root."""
    from benchmarking.workloads.trace_file import TraceError, read_trace

    path = os.path.abspath(os.path.expanduser(trace))
    try:
        read_trace(path, max_context=spec.device_model_spec.max_context)
    except TraceError as exc:
        raise UsageError(f"--workflow-args trace_file: {exc}") from None
    options.workflow_args["trace_file"] = path
