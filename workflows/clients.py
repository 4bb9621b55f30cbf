"""Client workflows as child processes: the command, the environment, output, and stopping them.

Each client workflow (benchmarks, evals, reports, ...) runs in its own venv as a child of run.py:
- it cannot outlive run.py (parent-death signal) and leads its own process group, so stopping it
  stops whatever it started;
- its output goes to ``run.log`` in full; the console gets the same lines except tracebacks,
  which are replaced by their final line and a pointer to ``run.log``;
- a signal that interrupts run.py is passed on to it, so it can flush what it measured before it
  exits (SIGKILL only after ``CHILD_STOP_TIMEOUT_S``); with two clients running side by side, to both.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass

from contracts import REPO_ROOT
from contracts.run_dir import collect_outputs
from contracts.workflow_args import WorkflowType, accepted_keys, passthrough_problem
from contracts.workflow_keys import VERDICT_ARGS
from workflows.context import RunContext
from workflows.processes import die_with_parent, stop_process_group
from workflows.resume import mark_client, release_client

# Which venv and entry script run each client workflow. Each runs as a module (``python -m
# benchmarking.run_benchmarks``) with the repository root on PYTHONPATH: nothing patches the import path, and a
# package's module names (reports/markdown.py) never shadow an installed package as they would run by path.
CLIENT_SCRIPTS = {
    WorkflowType.BENCHMARKS: ("benchmarks", "benchmarking/run_benchmarks.py"),
    WorkflowType.EVALS: ("evals", "evals/run_evals.py"),
    WorkflowType.TESTS: ("server-tests", "server_tests/run_tests.py"),
    WorkflowType.STRESS_TESTS: ("benchmarks", "stress_tests/run_stress_tests.py"),
    WorkflowType.REPORTS: ("reports", "reports/run_reports.py"),
    WorkflowType.DEPLOY: ("deploy", "deploy/run_deploy.py"),
}
# Media models (model_type image, speech, cnn, embedding) get these entry points instead; a
# workflow missing here has no media variant (the step is skipped with the reason below).
MEDIA_CLIENT_SCRIPTS = {
    WorkflowType.BENCHMARKS: ("media-clients", "media_clients/run_media_benchmarks.py"),
    WorkflowType.EVALS: ("media-clients", "media_clients/run_media_evals.py"),
    WorkflowType.TESTS: ("media-clients", "media_clients/run_media_tests.py"),
    WorkflowType.STRESS_TESTS: ("media-clients", "stress_tests/run_media_stress.py"),
    WorkflowType.REPORTS: CLIENT_SCRIPTS[WorkflowType.REPORTS],
    WorkflowType.DEPLOY: CLIENT_SCRIPTS[WorkflowType.DEPLOY],
}
CHILD_STOP_TIMEOUT_S = 10.0
SERVER_WATCH_INTERVAL_S = 1.0
OFFLINE_ENV = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


class Interrupted(Exception):
    """SIGINT / SIGTERM arrived; carries the signal number for the exit code."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class ServerDiedDuringClient(Exception):
    """The server we started exited while a client workflow was talking to it."""


@dataclass
class ClientResult:
    workflow: WorkflowType
    exit_code: int
    outputs: list[str]
    duration_s: float


class ConsoleFilter:
    """Keeps child tracebacks off the console: one line instead, the full text stays in run.log."""

    def __init__(self) -> None:
        self._in_traceback = False

    def __call__(self, line: str) -> str | None:
        """The line to show, or None to hide it."""
        if line.startswith("Traceback (most recent call last):"):
            self._in_traceback = True
            return None
        if not self._in_traceback:
            return line
        if not line.strip() or line[0].isspace() or line.startswith(
                ("During handling of", "The above exception", "Traceback (most recent")):
            return None
        self._in_traceback = False
        return f"{line} (traceback in run.log)"


def client_scripts(spec) -> dict[WorkflowType, tuple[str, str]]:
    """(venv, entry script) per client workflow for this spec: media kinds have their own variants."""
    from records.media import kind_of

    return MEDIA_CLIENT_SCRIPTS if kind_of(spec.model_type) else CLIENT_SCRIPTS


def no_variant_reason(spec, workflow: WorkflowType) -> str | None:
    """Why ``workflow`` does not run for this spec (a media kind without that variant), or None."""
    from records.media import kind_of

    kind = kind_of(spec.model_type)
    if kind and workflow in CLIENT_SCRIPTS and workflow not in MEDIA_CLIENT_SCRIPTS:
        return f"no {workflow.value} variant for {kind} models"
    return None


def args_for(workflow: WorkflowType, workflow_args: dict[str, str]) -> dict[str, str]:
    """The --workflow-args keys this child accepts: a release's keys are checked against the union
    of its children's keys up front, and each child gets its own (benchmarks' ``goodput`` is not
    stress_tests' SLO, and a child's parser rejects keys it does not know)."""
    if workflow is WorkflowType.REPORTS:
        return dict(workflow_args)
    keys = accepted_keys(workflow)
    if workflow is WorkflowType.BENCHMARKS:  # perf_tiers: its adaptive points sample for the tiers the verdict requires
        keys |= frozenset(VERDICT_ARGS)
    # Keys no workflow owns reach a child that passes them through (evals: lm-eval; benchmarks: request
    # body fields); in a release, max_tokens reaches evals but not benchmarks (its OSL is its own), and
    # stress_tests' slo never becomes a benchmark request field.
    owned_by_any = accepted_keys(WorkflowType.RELEASE)
    return {k: v for k, v in workflow_args.items()
            if k in keys or (k not in owned_by_any and passthrough_problem(workflow, k, str(v)) is None)}


def entry_module(script: str) -> str:
    """``benchmarking/run_benchmarks.py`` -> ``benchmarking.run_benchmarks``, the module ``python -m`` runs."""
    return script.removesuffix(".py").replace("/", ".")


def child_command(ctx: RunContext, workflow: WorkflowType) -> list[str]:
    venv_name, script = client_scripts(ctx.spec)[workflow]
    options = ctx.options
    cmd = [str(ctx.venv_pythons[venv_name]), "-m", entry_module(script), "--run-dir", str(ctx.run_dir.path),
           "--model-spec-json", str(ctx.run_dir.spec_path),
           "--server-url", ctx.server.base_url if ctx.server else "",
           "--workflow-args-json", json.dumps(args_for(workflow, options.workflow_args))]
    if options.disable_trace_capture or ctx.trace_captured:
        cmd.append("--disable-trace-capture")
    if workflow is WorkflowType.REPORTS and options.ignore_verdict:
        cmd.append("--ignore-verdict")
    if workflow in (WorkflowType.BENCHMARKS, WorkflowType.EVALS):
        from workflows.ab_servers import child_args
        cmd += child_args(ctx)
    return cmd


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
    if ctx.server is not None and ctx.server.kind == "docker":
        env["TT_SERVER_CONTAINER"] = ctx.server.name  # stress_tests samples its memory with docker stats
    for name in OFFLINE_ENV:
        env.setdefault(name, "1")
    env.update(tool_executables(ctx))
    return env


def tool_executables(ctx: RunContext) -> dict[str, str]:
    """``TT_<TOOL>_BIN`` for the load generators ``tool=`` and ``agreement=`` name, from the venvs
    ``prepare_venvs`` built for them (a value the user set is kept: a tool installed elsewhere)."""
    from benchmarking.tools import bin_variable, module

    out = {}
    for tool in load_tools(ctx):
        python = ctx.venv_pythons.get(str(module(tool).VENV))
        if bin_variable(tool) not in os.environ and python:
            out[bin_variable(tool)] = str(python.parent / module(tool).EXECUTABLE)
    return out


def load_tools(ctx: RunContext, keys: tuple[str, ...] = ("tool", "agreement")) -> list[str]:
    """The other load generators the run's workflow args name under ``keys`` (benchmarks: tool=, agreement=;
    stress_tests: tool= alone), in that order."""
    from benchmarking.tools import TOOLS

    args = ctx.options.workflow_args
    return list(dict.fromkeys(t for t in (args.get(key) for key in keys) if t in TOOLS))


def _server_we_watch(ctx: RunContext, workflow: WorkflowType):
    """The server whose death ends this client early (None: reports read files; external: not ours)."""
    if workflow is WorkflowType.REPORTS or ctx.server is None or ctx.server.kind == "external":
        return None
    return ctx.server


def run_client(ctx: RunContext, workflow: WorkflowType) -> ClientResult:
    """Run one client workflow in its venv; stream its output; stop it if the server dies or on a signal.

    Called from the main thread, or from a thread of its own when its stage runs workflows side by side
    (``workflows.pipeline.run_client_steps_together``). The thread that starts the child waits for it
    here until it has exited: the parent-death signal is tied to the thread that forks, so that thread
    must not end before its child does. Signals reach the main thread only: there, ``Interrupted`` is
    raised inside this loop; in a stage's thread, the main thread stops every child
    (``ctx.children.interrupt``) and this loop raises ``Interrupted`` once its child has exited.
    """
    if ctx.children.interrupted is not None:
        raise Interrupted(ctx.children.interrupted)
    cmd = child_command(ctx, workflow)
    ctx.run_dir.log("$ " + " ".join(cmd), workflow.value)
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            env=child_env(ctx), cwd=REPO_ROOT, start_new_session=True,
                            preexec_fn=die_with_parent(signal.SIGTERM))  # noqa: PLW1509 - the only way to prctl
    held = ctx.children.add(proc)
    mark_client(ctx.run_dir.path, proc.pid, workflow.value)  # a rerun after a kill stops it by this record
    show = ConsoleFilter()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            ctx.run_dir.log(line, workflow.value)
            shown = show(ctx.run_dir.redact(line.rstrip("\n")))
            if shown is not None:
                ctx.ui.child_line(workflow.value, shown)

    reader = threading.Thread(target=pump, name=f"{workflow.value}-output", daemon=True)
    reader.start()
    server = _server_we_watch(ctx, workflow)
    died = False

    def done() -> None:
        reader.join(timeout=5)
        ctx.children.remove(proc)
        release_client(ctx.run_dir.path, proc.pid)

    try:
        if not held:  # an interrupt stopped the other children while this one was starting
            raise Interrupted(ctx.children.interrupted or signal.SIGTERM)
        while proc.poll() is None:
            if server is not None and not server.is_alive():
                died = True
                stop_process_group(proc, CHILD_STOP_TIMEOUT_S)
                break
            try:
                proc.wait(timeout=SERVER_WATCH_INTERVAL_S)
            except subprocess.TimeoutExpired:
                pass
        if ctx.children.interrupted is not None and not died:
            raise Interrupted(ctx.children.interrupted)  # the main thread stopped this child
    except Interrupted as exc:
        # Pass the signal on: the child flushes its partial results, then exits (or is killed).
        stop_process_group(proc, CHILD_STOP_TIMEOUT_S, exc.signum)
        done()
        raise
    code = proc.wait()
    done()
    if server is not None and (died or not server.is_alive()):
        raise ServerDiedDuringClient(f"the server exited (code {server.exit_code()}) during {workflow.value}\n"
                                     f"last lines of server.log:\n{server.log_tail(40)}")
    outputs = collect_outputs(ctx.run_dir.path, workflow.value)
    return ClientResult(workflow, code, outputs, time.monotonic() - started)


def stop_children(ctx: RunContext) -> None:
    """Stop every client workflow still running (teardown; an interrupt outside a client's own wait)."""
    ctx.children.stop_all(CHILD_STOP_TIMEOUT_S)
