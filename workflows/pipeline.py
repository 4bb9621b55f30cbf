"""The run pipeline: a list of small steps with typed results, like nox's workflow.execute.

resolve spec (workflows.main) -> prepare host -> prepare venvs -> start or attach server -> wait ready
-> warm up -> client workflows (in stages: evals and tests side by side, then benchmarks, stress_tests, reports
alone) -> teardown.

Each step is a function of the ``RunContext`` that returns a one-line detail or raises
``StepFailed``; ``execute`` runs the plan and records every step in ``manifest.json`` as it starts
and ends, so an interrupted run leaves a truthful record. Teardown always runs (success, error,
SIGINT, SIGTERM): the client workflow gets the signal first (it flushes what it measured), the
report is still rendered from what exists, then the server stops. ``--workflow server`` is the
exception: it leaves the server up and says how to reach and stop it. A run that did not pass
ends with lines that say why (``workflows.outcome``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contracts import REPO_ROOT
from contracts.model_spec import DeviceType, InferenceEngine
from contracts.run_dir import RunStatus, StepStatus, collect_outputs
from contracts.workflow_args import NOT_YET_AVAILABLE, RELEASE_STAGES, WorkflowType, overlap_enabled
from records.media import kind_of as media_kind
from workflows.cli import ServerMode
from workflows.clients import (
    CHILD_STOP_TIMEOUT_S,
    ClientResult,
    Interrupted,
    ServerDiedDuringClient,
    child_command,
    child_env,
    client_scripts,
    no_variant_reason,
    run_client,
    stop_children,
)
from workflows.context import RunContext

if TYPE_CHECKING:
    from workflows.servers.base import ServerLaunch

__all__ = ["SERVER_STEPS", "PipelineStep", "RunContext", "StepFailed", "execute"]

SERVER_STOP_TIMEOUT_S = 20.0
FINAL_REPORT_TIMEOUT_S = 60.0
EXIT_VERDICT_FAIL = 3
EXIT_VERDICT_INCONCLUSIVE = 4
#: The reports step's exit codes that carry a verdict rather than a failure of the step itself.
VERDICT_EXITS = {EXIT_VERDICT_FAIL: "FAIL", EXIT_VERDICT_INCONCLUSIVE: "INCONCLUSIVE"}
DEFAULT_WARMUP_PAIR = (32, 4)


class StepFailed(Exception):
    """A step failed; the message is what the user needs (one line, or a log tail)."""


def client_stages(workflow: WorkflowType, overlap: bool = True) -> list[tuple[WorkflowType, ...]]:
    """Client workflows a run executes, as stages in order: a stage starts when the one before it has
    ended, and the workflows of one stage run side by side (only a release has such a stage: evals and
    tests, which time nothing, ``contracts.workflow_args.RELEASE_STAGES``). ``overlap=False``
    (``--workflow-args overlap=0``): every workflow alone, in the same order."""
    if workflow is WorkflowType.SERVER:
        stages: list[tuple[WorkflowType, ...]] = []
    elif workflow is WorkflowType.RELEASE:
        stages = list(RELEASE_STAGES)
    elif workflow in (WorkflowType.REPORTS, WorkflowType.DEPLOY):
        stages = [(workflow,)]  # deploy renders files for another host: nothing to report on here
    else:
        stages = [(workflow,), (WorkflowType.REPORTS,)]
    return stages if overlap else [(w,) for stage in stages for w in stage]


def client_sequence(workflow: WorkflowType) -> list[WorkflowType]:
    """Client workflows a run executes, in the order their stages run; every run but ``server`` ends with reports."""
    return [w for stage in client_stages(workflow) for w in stage]


def needs_server(workflow: WorkflowType) -> bool:
    """Every workflow but a reports rebuild and deploy talks to a server (started here or external)."""
    return workflow not in (WorkflowType.REPORTS, WorkflowType.DEPLOY)


def runnable_clients(ctx: RunContext) -> list[WorkflowType]:
    """The run's clients; a release given a requirements document runs only what the document measures
    (benchmarks, evals) and the report: its verdict is the document's, not the catalog's."""
    needed = None
    if ctx.options.requirements is not None and ctx.workflow is WorkflowType.RELEASE:
        from workflows.requirements_cli import needed_clients
        needed = needed_clients(ctx.options.requirements)
    return [w for w in client_sequence(ctx.workflow)
            if w not in NOT_YET_AVAILABLE and no_variant_reason(ctx.spec, w) is None
            and (needed is None or w.value in needed)]


# ---------------------------------------------------------------------- steps


def prepare_host(ctx: RunContext) -> str:
    """Weights, disk and RAM for a server we start; for an external server only a local tokenizer."""
    from workflows.host_setup import HostSetupError, find_weights
    from workflows.host_setup import prepare_host as _prepare

    try:
        if ctx.server_mode is ServerMode.EXTERNAL:
            # The server has the weights: never convert or download here, just reuse what is on disk.
            ctx.host = find_weights(ctx.spec)
            if ctx.host is None or ctx.host.tokenizer_dir is None:
                ctx.host = None
                return "no local tokenizer; clients use the server's"
            return f"tokenizer from {ctx.host.tokenizer_dir}"
        ctx.host = _prepare(ctx.spec, allow_download=True)
    except HostSetupError as exc:
        raise StepFailed(str(exc)) from None
    return f"weights from {ctx.host.source}: {ctx.host.weights_dir}"


def load_tool_venvs(ctx: RunContext, workflows: list[WorkflowType] | None) -> list[str]:
    """The venvs of the load generators ``--workflow-args tool=`` and ``agreement=`` name (aiperf, guidellm,
    vllm), when the run's benchmarks step uses them (tool=, agreement=) or its LLM stress_tests step does
    (tool=; a media kind's stress client refuses it): built here with the others, so a client never builds
    venvs itself (``workflows.clients.child_env`` hands it their executables)."""
    from benchmarking.tools import module
    from workflows.clients import load_tools

    chosen = runnable_clients(ctx) if workflows is None else workflows
    wanted: list[str] = []
    if WorkflowType.BENCHMARKS in chosen:
        wanted += load_tools(ctx)
    if WorkflowType.STRESS_TESTS in chosen and not media_kind(ctx.spec.model_type):
        wanted += load_tools(ctx, ("tool",))
    return list(dict.fromkeys(str(module(tool).VENV) for tool in wanted))


def prepare_venvs(ctx: RunContext, workflows: list[WorkflowType] | None = None) -> str:
    from workflows.venvs import VenvError, ensure_venv

    scripts = client_scripts(ctx.spec)
    names = list(dict.fromkeys(scripts[w][0] for w in (runnable_clients(ctx) if workflows is None else workflows)
                               if w in scripts))
    if ctx.server_mode is ServerMode.LOCAL and ctx.spec.device_type is DeviceType.CPU:
        names.insert(0, "media-server" if ctx.spec.engine is InferenceEngine.MEDIA else "engine-vllm-cpu")
    names += [venv for venv in load_tool_venvs(ctx, workflows) if venv not in names]
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
    from workflows.engine_env import record_engine_packages
    from workflows.servers import ServerStartError, attach_external
    from workflows.servers import start_server as _start

    read = record_engine_packages(ctx.run_dir.manifest.environment, ctx.spec)  # the host fingerprint's engine
    if read:
        ctx.run_dir.log(read)
    try:
        if ctx.server_mode is ServerMode.EXTERNAL:
            url = ctx.options.server_url or f"http://127.0.0.1:{ctx.options.service_port}"
            ctx.server = attach_external(url, ctx.spec.served_model_name, ctx.bearer, port=ctx.options.service_port)
            return f"attached to {ctx.server.base_url}"
        if ctx.options.auth_mode == "jwt-gateway":
            from workflows.servers.jwt_gateway import start_behind_gateway

            ctx.server = start_behind_gateway(lambda launch: _start(ctx.server_mode.value, launch),
                                              server_launch(ctx), ctx.auth, ctx.options.service_port)
            return (f"{ctx.server_mode.value} server behind the JWT gateway at {ctx.server.base_url} "
                    "(logs: server.log, gateway.log)")
        launch = server_launch(ctx)
        standby = _reusable_standby(ctx, launch)
        if standby is not None:
            return standby
        ctx.server = _start(ctx.server_mode.value, launch)
    except ServerStartError as exc:
        raise StepFailed(str(exc)) from None
    return f"{ctx.server_mode.value} server at {ctx.server.base_url} (log: server.log)"


def _standby_terms(ctx: RunContext, launch) -> tuple[Path | None, str]:
    """(the engine's python, the auth identity): with the launch, what a standby's fingerprint covers."""
    from workflows.servers.local import resolve_engine_python
    from workflows.servers.standby import key_identity

    engine_python = resolve_engine_python(launch) if ctx.spec.device_type is DeviceType.CPU else None
    return engine_python, key_identity(ctx.auth.source if ctx.auth else "none", launch.api_key)


def _reusable_standby(ctx: RunContext, launch) -> str | None:
    """Attach to a standby server of this spec (``workflows.servers.standby``): the step's detail, or None."""
    if (ctx.server_mode is not ServerMode.LOCAL or ctx.workflow is WorkflowType.SERVER or ctx.options.fresh_server
            or ctx.auth is None):
        return None
    from dataclasses import replace

    from workflows.servers.standby import attach_standby

    standby = attach_standby(launch, *_standby_terms(ctx, launch), log=lambda m: ctx.run_dir.log(m, "standby"))
    if standby is None:
        return None
    key = standby.record.bearer
    ctx.auth = replace(ctx.auth, bearer=key, server_api_key=key, source=f"{ctx.auth.source} (standby server's key)",
                       secrets=ctx.auth.secrets + ((key,) if key else ()))
    ctx.run_dir.also_redact(key)
    ctx.server = standby
    standby.write_pidfile(ctx.run_dir.path)
    ctx.run_dir.log(standby.reuse_line(), "standby")
    return standby.reuse_line()


def _keep_as_standby(ctx: RunContext) -> None:
    """``--workflow server --local-server``: record the server it leaves running for later runs to reuse."""
    if ctx.server_mode is not ServerMode.LOCAL or ctx.server is None or ctx.options.auth_mode == "jwt-gateway":
        return
    from workflows.servers.standby import keep_as_standby

    launch = server_launch(ctx)
    record = keep_as_standby(ctx.server, launch, *_standby_terms(ctx, launch), bearer=ctx.bearer,
                             run_id=ctx.run_dir.path.name)
    if record is not None:
        ctx.ui.plain(f"Standby: later --local-server runs of this spec reuse this server instead of starting "
                     f"their own (fingerprint {record.fingerprint}; --fresh-server starts their own)")


def wait_ready(ctx: RunContext) -> str:
    from workflows.readiness import wait_until_ready
    from workflows.servers import ServerStartError

    assert ctx.server is not None
    kind = media_kind(ctx.spec.model_type)
    try:
        if kind:  # a media server: /tt-liveness, then one request of the model's kind
            from workflows.media_readiness import wait_media_ready

            info = wait_media_ready(ctx.server, kind, bearer=ctx.bearer, timeout_s=ctx.spec.readiness_timeout_s,
                                    progress=lambda m: (ctx.run_dir.log(m, "readiness"), ctx.ui.status_update(m)))
            return f"ready after {info.elapsed_s:.1f}s (liveness, models, one {kind} request)"
        info = wait_until_ready(
            ctx.server, bearer=ctx.bearer, timeout_s=ctx.spec.readiness_timeout_s,
            progress=lambda m: (ctx.run_dir.log(m, "readiness"), ctx.ui.status_update(m)),
        )
    except ServerStartError as exc:
        raise StepFailed(str(exc)) from None
    return f"ready after {info.elapsed_s:.1f}s"


def warm_up(ctx: RunContext) -> str:
    """Trace capture: once per run, before the first client workflow (not again in a release).

    Uses the benchmarks' own client and stall timeout, so a server that accepts the request and
    then never sends a token ends this step within the stall timeout, with one line naming the
    URL and the silence. On a standby server, the (isl, osl) pairs an earlier run warmed are not
    warmed again (the standby's record keeps them).
    """
    from benchmarking.client import ClientConfig
    from benchmarking.prompts import LocalTokenizer
    from benchmarking.trace_capture import plan_warmup
    from benchmarking.trace_capture import warm_up as send_warmup
    from workflows.servers.standby import StandbyServerHandle

    assert ctx.server is not None
    plan = plan_warmup(ctx.spec, ctx.options.workflow_args)
    pairs = plan.pairs if WorkflowType.BENCHMARKS in runnable_clients(ctx) and plan.pairs else [DEFAULT_WARMUP_PAIR]
    standby = ctx.server if isinstance(ctx.server, StandbyServerHandle) else None
    if standby is not None:
        todo = standby.not_yet_warmed(pairs)
        done_before, pairs = [p for p in pairs if p not in todo], todo
        if not pairs:
            ctx.trace_captured = True
            return (f"skipped: the standby server is warm at {', '.join(f'isl={i} osl={o}' for i, o in done_before)} "
                    f"(an earlier run warmed it)")
    base, model = ctx.server.base_url, ctx.server.served_model_name
    tokenizer = None  # only a local one: asking the server to tokenize would be a wait without the stall deadline
    if ctx.host and ctx.host.tokenizer_dir:
        try:
            tokenizer = LocalTokenizer(str(ctx.host.tokenizer_dir))
        except Exception as exc:  # noqa: BLE001 - a broken tokenizer only makes prompt lengths approximate
            ctx.run_dir.log(f"warm-up without a tokenizer: {type(exc).__name__}: {exc}", "warmup")
    config = ClientConfig(base_url=base, model=model, api_key=ctx.bearer, stall_timeout_s=plan.stall_timeout_s,
                          request_timeout_s=plan.request_timeout_s, tokenizer=tokenizer)
    outcomes = send_warmup(config, pairs, tokenizer, log=lambda m: ctx.run_dir.log(m, "warmup"))
    silent = [o for o in outcomes if o.silent]
    if silent:
        raise StepFailed(f"warmup: {silent[0].line} (stall_timeout_s={plan.stall_timeout_s:g})")
    ctx.trace_captured = True
    if standby is not None:
        standby.mark_warmed([(o.isl, o.osl) for o in outcomes if o.success])
    failed = sum(1 for o in outcomes if not o.success)
    return f"{len(outcomes)} (isl, osl) pair(s)" + (f", {failed} failed (see run.log)" if failed else "")


def print_docker_command(ctx: RunContext) -> str:
    """``--print-docker-cmd``: the command another host will run. Nothing on this host is judged."""
    from workflows.host_setup import HostSetupError, find_weights, host_requirements
    from workflows.servers.docker_server import print_docker_cmd

    try:
        ctx.host = find_weights(ctx.spec)
    except HostSetupError as exc:
        ctx.host = None
        ctx.ui.plain(f"# note: {exc}")
    ctx.ui.plain(print_docker_cmd(server_launch(ctx)))
    ctx.ui.plain(f"# note: {host_requirements(ctx.spec)}")
    if ctx.host is None:
        ctx.ui.plain("# note: no weights for this model on this host, so the command mounts none; "
                     "set MODEL_WEIGHTS_DIR (or fill the HF cache) where it runs")
    return "printed"


def interactive_shell(ctx: RunContext) -> int:
    """``--docker-server --interactive``: a shell in the server's container, on this terminal.

    The host is prepared (weights found, disk checked) as for any server; then the container runs a
    shell instead of the server and the user starts the server by hand. Returns the shell's exit code.
    """
    from workflows.servers import ServerStartError
    from workflows.servers.docker_server import run_interactive, start_hint

    run_step(ctx, SERVER_STEPS[0])
    launch = server_launch(ctx)
    ctx.ui.plain(f"Opening a shell in {launch.docker_image}; start the server in it with: {start_hint(launch)}")
    try:
        return run_interactive(launch)
    except ServerStartError as exc:
        raise StepFailed(str(exc)) from None


# ---------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class PipelineStep:
    """One step of the plan: its manifest name, what it does, and when it applies."""

    name: str
    run: Callable[[RunContext], str | None]
    spinner: str
    applies: Callable[[RunContext], bool] = lambda ctx: True


def _talks_to_server(ctx: RunContext) -> bool:
    return needs_server(ctx.workflow)


def _warms_up(ctx: RunContext) -> bool:
    """Trace capture is for LLMs; media servers warm their workers up before they report ready."""
    return (_talks_to_server(ctx) and ctx.workflow is not WorkflowType.SERVER and not ctx.options.disable_trace_capture
            and media_kind(ctx.spec.model_type) is None)


def _ab_asked(ctx: RunContext) -> bool:
    from workflows.ab_servers import asked

    return asked(ctx)


def _start_baseline(ctx: RunContext) -> str:
    from workflows.ab_servers import BaselineFailed, start_baseline

    try:
        return start_baseline(ctx, server_launch(ctx), DEFAULT_WARMUP_PAIR)
    except BaselineFailed as exc:
        raise StepFailed(str(exc)) from None


SERVER_STEPS: tuple[PipelineStep, ...] = (
    PipelineStep("prepare_host", prepare_host, "Preparing host (weights, disk, RAM)", _talks_to_server),
    PipelineStep("prepare_venvs", prepare_venvs, "Preparing virtualenvs"),
    PipelineStep("start_server", start_server, "Starting the server", _talks_to_server),
    PipelineStep("wait_ready", wait_ready, "Waiting for the server to be ready", _talks_to_server),
    PipelineStep("warmup", warm_up, "Warm-up (trace capture)", _warms_up),
    PipelineStep("start_baseline", _start_baseline, "Starting the A/B baseline server", _ab_asked),
)


def run_step(ctx: RunContext, step: PipelineStep) -> None:
    """Run one step: manifest entry, spinner, and a clean failure record."""
    record = ctx.run_dir.start_step(step.name)
    ctx.run_dir.log(f"step {step.name}: started")
    try:
        with ctx.ui.status(step.spinner):
            detail = step.run(ctx) or ""
    except Interrupted as exc:
        ctx.run_dir.end_step(record, StepStatus.FAILED, f"interrupted by {exc}")
        raise
    except StepFailed as exc:
        ctx.run_dir.end_step(record, StepStatus.FAILED, str(exc).splitlines()[0])
        ctx.run_dir.log(f"step {step.name}: failed: {exc}")
        raise
    except Exception as exc:  # a backend error we did not classify: still one record, then re-raise
        ctx.run_dir.end_step(record, StepStatus.FAILED, f"{type(exc).__name__}: {exc}")
        ctx.run_dir.log(f"step {step.name}: failed: {type(exc).__name__}: {exc}")
        raise StepFailed(f"{step.name}: {type(exc).__name__}: {exc}") from exc
    ctx.run_dir.end_step(record, StepStatus.PASSED, detail)
    ctx.run_dir.log(f"step {step.name}: passed {detail}")
    ctx.ui.step_done(step.name, detail, record.duration_s)


def run_client_step(ctx: RunContext, client: WorkflowType, spinner: bool = True) -> int:
    """A client workflow as a manifest step; a failed client does not stop the next one.

    ``spinner=False`` inside a stage that runs side by side: the stage shows one status line naming all.
    """
    record = ctx.run_dir.start_step(client.value)
    try:
        with ctx.ui.status(f"Running {client.value}") if spinner else contextlib.nullcontext():
            result: ClientResult = (ctx.client_runner or run_client)(ctx, client)
    except Interrupted as exc:
        ctx.run_dir.end_step(record, StepStatus.FAILED, f"interrupted by {exc}",
                             collect_outputs(ctx.run_dir.path, client.value))
        raise
    except ServerDiedDuringClient as exc:
        ctx.run_dir.end_step(record, StepStatus.FAILED, str(exc).splitlines()[0],
                             collect_outputs(ctx.run_dir.path, client.value))
        raise StepFailed(str(exc)) from None
    ok = result.exit_code == 0
    detail = "" if ok else f"exit code {result.exit_code}"
    if client is WorkflowType.REPORTS and result.exit_code in VERDICT_EXITS:
        detail = f"verdict {VERDICT_EXITS[result.exit_code]}"
    ctx.run_dir.end_step(record, StepStatus.PASSED if ok else StepStatus.FAILED, detail, result.outputs)
    (ctx.ui.step_done if ok else ctx.ui.step_failed)(client.value, detail, record.duration_s)
    return result.exit_code


def _wait_all(done: list[threading.Event]) -> None:
    """Wait until every event is set, in short sleeps: the main thread stays where a signal reaches it, and
    a signal raised here leaves nothing half done (an interrupted ``Thread.join`` can mark a thread that
    still runs as ended, so the stage threads are never joined)."""
    while not all(event.is_set() for event in done):
        time.sleep(0.05)


def run_client_steps_together(ctx: RunContext, clients: list[WorkflowType]) -> list[int]:
    """The client workflows of one stage side by side: each its own manifest step (start and end, status,
    outputs, exit code), run in a thread of its own; returns their exit codes in ``clients``' order.

    The main thread waits for them and is the one signals reach: on SIGINT/SIGTERM it passes the signal
    to every child's process group (``ctx.children.interrupt``), waits until each step has recorded what
    its child left, and raises ``Interrupted``. A failed client does not stop the other; a server that
    dies ends both (each thread watches it as a lone client does), and the first error, in stage order,
    is raised once both have ended.
    """
    names = " and ".join(c.value for c in clients)
    ctx.run_dir.log(f"{names} side by side (they time nothing; --workflow-args overlap=0 runs them one at a time)")
    outcomes: dict[WorkflowType, int | BaseException] = {}
    ended = {client: threading.Event() for client in clients}

    def work(client: WorkflowType) -> None:
        try:
            outcomes[client] = run_client_step(ctx, client, spinner=False)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, raised there once all ended
            outcomes[client] = exc
        finally:
            ended[client].set()

    threads = {c: threading.Thread(target=work, args=(c,), name=f"{c.value}-step", daemon=True) for c in clients}
    try:
        with ctx.ui.status(f"Running {names} side by side"):
            try:
                for thread in threads.values():
                    thread.start()
                _wait_all(list(ended.values()))
            except Interrupted as exc:
                ctx.children.interrupt(exc.signum, CHILD_STOP_TIMEOUT_S)
                _wait_all([ended[c] for c, thread in threads.items() if thread.ident is not None])  # the started
                raise
    finally:
        ctx.children.clear_interrupt()
    errors = [o for c in clients if isinstance(o := outcomes.get(c), BaseException)]
    if errors:
        raise next((e for e in errors if isinstance(e, Interrupted)), errors[0])
    return [int(outcomes[c]) for c in clients]  # type: ignore[arg-type]


def overlap_by_default(ctx: RunContext) -> bool:
    """Side by side unless the engine computes on the host's CPU. Measured on 2 cores (CPU default, smoke):
    evals 33 s + tests 36 s one after the other, evals 49 s beside tests 69 s side by side: the engine's
    requests already use every core, so two clients only share them (and the tests' "alone" requests are
    then not alone). On an accelerator the host is free and the engine batches both clients' requests."""
    return ctx.spec.device_type is not DeviceType.CPU


def run_clients(ctx: RunContext) -> int:
    """Every client workflow, stage by stage; returns 0, 1 (a workflow failed), 3 (only the verdict failed)
    or 4 (nothing failed, but the verdict is INCONCLUSIVE)."""
    exit_code = 0
    for stage in client_stages(ctx.workflow, overlap_enabled(ctx.options.workflow_args, overlap_by_default(ctx))):
        runnable = []
        for client in stage:
            skip_reason = NOT_YET_AVAILABLE.get(client) or no_variant_reason(ctx.spec, client) or (
                "the requirements document asks nothing of it" if client not in runnable_clients(ctx) else None)
            if skip_reason:
                ctx.run_dir.record_step(client.value, StepStatus.SKIPPED, skip_reason)
                ctx.ui.step_skipped(client.value, skip_reason)
            else:
                runnable.append(client)
        if len(runnable) > 1:
            codes = run_client_steps_together(ctx, runnable)
        else:
            codes = [run_client_step(ctx, client) for client in runnable]
        for client, code in zip(runnable, codes):
            if code == 0:
                continue
            if client is WorkflowType.REPORTS and code in VERDICT_EXITS:
                exit_code = exit_code or code  # a failed workflow (1) outranks the verdict
            else:
                exit_code = 1
    return exit_code


def teardown(ctx: RunContext, keep_server: bool) -> str:
    from workflows.ab_servers import stop_baseline

    stop_children(ctx)
    baseline = stop_baseline(ctx, SERVER_STOP_TIMEOUT_S)
    if ctx.server is None or ctx.server_mode is ServerMode.EXTERNAL:
        return baseline or "nothing to stop"
    if keep_server:
        ctx.server.detach()
        return "server left running (--workflow server)"
    ctx.server.stop(timeout=SERVER_STOP_TIMEOUT_S)
    return f"{ctx.server_mode.value} server stopped" + (f"; {baseline}" if baseline else "")


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


def execute(ctx: RunContext, steps: tuple[PipelineStep, ...] = SERVER_STEPS) -> int:
    """Run every step of ``ctx.options.workflow``; returns the process exit code."""
    exit_code, status, cause, keep_server = 0, RunStatus.PASSED, None, False
    restore = install_signal_handlers()
    try:
        if ctx.options.print_docker_cmd:
            print_docker_command(ctx)
            return 0
        if ctx.options.interactive:
            exit_code = interactive_shell(ctx)
            status = RunStatus.PASSED if exit_code == 0 else RunStatus.FAILED
            return exit_code
        for step in steps:
            if step.applies(ctx):
                run_step(ctx, step)
        if ctx.workflow is WorkflowType.SERVER:
            keep_server = True
            assert ctx.server is not None
            ctx.ui.server_instructions(ctx.server.describe_how_to_reach(ctx.bearer))
            _keep_as_standby(ctx)
            return 0
        exit_code = run_clients(ctx)
        if exit_code == EXIT_VERDICT_INCONCLUSIVE:
            status, cause = RunStatus.INCONCLUSIVE, "the release verdict is INCONCLUSIVE"
        elif exit_code:
            status = RunStatus.FAILED
            cause = "the release verdict is FAIL" if exit_code == EXIT_VERDICT_FAIL else "a client workflow failed"
    except Interrupted as exc:
        status, exit_code = RunStatus.INTERRUPTED, 128 + exc.signum
        cause = f"{signal.Signals(exc.signum).name}; partial results kept"
        ctx.ui.error(f"interrupted by {signal.Signals(exc.signum).name}; stopping the run, keeping what was done")
        stop_children(ctx)
        _report_what_exists(ctx, status)
    except StepFailed as exc:
        status, exit_code = RunStatus.FAILED, 1
        cause, _, details = str(exc).partition("\n")
        if details.strip():  # the cause is said once, in the closing "run failed: ..." line; its details here
            ctx.ui.plain(details.rstrip())
        _report_what_exists(ctx, status)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # teardown must finish: a signal now would orphan the server
            signal.signal(sig, signal.SIG_IGN)
        exit_code = _teardown_step(ctx, keep_server, exit_code)
        ctx.run_dir.finish(status)
        _render_final_report(ctx)
        restore()
    _print_outcome(ctx, cause)
    return exit_code


def _teardown_step(ctx: RunContext, keep_server: bool, exit_code: int) -> int:
    record = ctx.run_dir.start_step("teardown")
    try:
        ctx.run_dir.end_step(record, StepStatus.PASSED, teardown(ctx, keep_server))
    except Exception as exc:  # noqa: BLE001 - teardown problems must be visible but never hide the run's result
        ctx.run_dir.end_step(record, StepStatus.FAILED, f"{type(exc).__name__}: {exc}")
        ctx.ui.error(f"teardown: {exc}")
        return exit_code or 1
    return exit_code


def _report_what_exists(ctx: RunContext, status: RunStatus) -> None:
    """After a hard failure or an interrupt, still render the report from what was measured.

    The manifest says ``failed``/``interrupted`` before the report runs, so the report is marked
    that way; clients that never started are recorded as not run.
    """
    clients = client_sequence(ctx.workflow) if ctx.options.workflow else []
    for client in clients:
        if ctx.run_dir.manifest.step(client.value) is None:
            why = "the run was interrupted" if status is RunStatus.INTERRUPTED else "an earlier step failed"
            ctx.run_dir.record_step(client.value, StepStatus.NOT_RUN, why)
    started = [c for c in clients if (s := ctx.run_dir.manifest.step(c.value)) and s.started]
    reports = ctx.run_dir.manifest.step(WorkflowType.REPORTS.value)
    if (WorkflowType.REPORTS not in clients or not started or "reports" not in ctx.venv_pythons
            or (reports is not None and reports.started)):
        return
    ctx.run_dir.manifest.status = status
    ctx.run_dir.save()
    try:
        run_client_step(ctx, WorkflowType.REPORTS)
    except (StepFailed, Interrupted) as exc:
        ctx.ui.error(f"reports: {exc}")


def _render_final_report(ctx: RunContext) -> None:
    """Render the report once more after the run ended, so it shows the final status, the end time
    and every step's outcome (the reports step itself runs while the run is still going).

    Quiet (its output goes to run.log) and bounded; the verdict and exit code are already decided,
    so a failure here is said in one line and changes neither. Skipped when the clients are not
    real processes (an injected ``client_runner``).
    """
    step = ctx.run_dir.manifest.step(WorkflowType.REPORTS.value)
    if ctx.client_runner is not None or step is None or not step.started or "reports" not in ctx.venv_pythons:
        return
    cmd = child_command(ctx, WorkflowType.REPORTS) + ["--final"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=FINAL_REPORT_TIMEOUT_S,
                              env=child_env(ctx), cwd=REPO_ROOT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        ctx.ui.error(f"reports: the final report was not rendered ({exc}); reports/ shows the run as the "
                     f"reports step saw it")
        return
    ctx.run_dir.log(done.stdout + done.stderr, "reports")
    if done.returncode != 0:
        ctx.ui.error(f"reports: the final report was not rendered (exit {done.returncode}, see run.log); "
                     f"reports/ shows the run as the reports step saw it")


def _print_outcome(ctx: RunContext, cause: str | None) -> None:
    from workflows.outcome import summary_lines

    for line in summary_lines(ctx.run_dir.path, ctx.run_dir.manifest, cause):
        ctx.ui.error(line)


def server_secrets() -> dict[str, str]:
    """Secrets the server itself needs (gated weights/tokenizers); docker passes them as an env file."""
    from workflows.auth import SERVER_SECRET_NAMES, load_dotenv

    dotenv = load_dotenv(REPO_ROOT / ".env")
    found = {name: os.environ.get(name) or dotenv.get(name) for name in SERVER_SECRET_NAMES}
    return {name: value for name, value in found.items() if value}


def server_launch(ctx: RunContext) -> ServerLaunch:
    """The one ServerLaunch for this run: used to start the server and by --print-docker-cmd."""
    from workflows.servers import ServerLaunch

    options = ctx.options
    return ServerLaunch(
        spec=ctx.spec,
        spec_json_path=ctx.run_dir.spec_path,
        run_dir=ctx.run_dir.path,
        service_port=options.service_port,
        bind_host=options.bind_host,
        api_key=ctx.auth.server_api_key if ctx.auth else None,
        weights_dir=ctx.host.weights_dir if ctx.host else None,
        device_ids=list(options.device_ids) if options.device_ids else None,
        dev_mode=options.dev_mode,
        interactive=options.interactive,
        server_log_path=ctx.run_dir.server_log_path,
        docker_image=ctx.spec.docker_image,
        secret_env=server_secrets(),
        outlive_orchestrator=ctx.workflow is WorkflowType.SERVER,
    )
