"""The pipeline: each step alone with fakes, the whole plan with a fake client runner, and run.py
end to end against the shipped stub and fault servers (named fakes: no engine needed)."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from contracts import REPO_ROOT
from contracts.model_spec import DeviceType
from contracts.run_dir import Manifest, RunDirectory, RunStatus, StepStatus
from contracts.workflow_args import RELEASE_STAGES, TIMES_NOTHING, WorkflowType, overlap_enabled
from tests.helpers import free_port, verdict_exit_code
from workflows import pipeline
from workflows.catalog import load_catalog
from workflows.cli import parse_args
from workflows.clients import ClientResult, ConsoleFilter, Interrupted
from workflows.outcome import summary_lines
from workflows.pipeline import PipelineStep, RunContext, StepFailed, client_sequence, client_stages, needs_server
from workflows.processes import die_with_parent
from workflows.ui import Ui

MODEL = "SmolLM2-135M-Instruct"
SPEC = load_catalog().specs["id_vllm-cpu_SmolLM2-135M-Instruct_cpu"]


def test_release_sequence_and_reports_follow_every_workflow() -> None:
    assert [w.value for w in client_sequence(WorkflowType.RELEASE)] == \
        ["evals", "tests", "benchmarks", "stress_tests", "reports"]
    assert client_sequence(WorkflowType.BENCHMARKS) == [WorkflowType.BENCHMARKS, WorkflowType.REPORTS]
    assert client_sequence(WorkflowType.SERVER) == []
    assert not needs_server(WorkflowType.REPORTS) and needs_server(WorkflowType.EVALS)


def test_release_stages_share_the_server_only_between_workflows_that_time_nothing() -> None:
    stages = [[w.value for w in stage] for stage in client_stages(WorkflowType.RELEASE)]
    assert stages == [["evals", "tests"], ["benchmarks"], ["stress_tests"], ["reports"]]
    assert all(len(stage) == 1 or set(stage) <= TIMES_NOTHING for stage in RELEASE_STAGES)
    assert WorkflowType.BENCHMARKS not in TIMES_NOTHING and WorkflowType.STRESS_TESTS not in TIMES_NOTHING
    # overlap=0: the same order, every workflow alone
    assert client_stages(WorkflowType.RELEASE, overlap=False) == [(w,) for w in client_sequence(WorkflowType.RELEASE)]
    assert client_stages(WorkflowType.EVALS) == [(WorkflowType.EVALS,), (WorkflowType.REPORTS,)]
    assert overlap_enabled({}) and overlap_enabled({"overlap": "1"}) and not overlap_enabled({"overlap": "0"})
    assert not overlap_enabled({}, default=False) and overlap_enabled({"overlap": "true"}, default=False)


# ---------------------------------------------------------------------------------- fakes


def make_ctx(tmp_path: Path, *argv: str, runner=None) -> tuple[RunContext, io.StringIO]:
    options = parse_args(["--model", MODEL, "--device", "cpu", "--no-auth", *argv], load_catalog())
    out = io.StringIO()
    ui = Ui(Console(file=out, width=200, force_terminal=False))
    run_dir = RunDirectory(tmp_path / "run", Manifest(run_id="r", model_id=SPEC.model_id,
                                                      workflow=options.workflow.value))
    return RunContext(spec=SPEC, options=options, run_dir=run_dir, ui=ui, client_runner=runner), out


class FakeClients:
    """Stands in for the client workflow processes: an exit code per workflow, or an exception."""

    def __init__(self, **outcome):
        self.outcome = outcome
        self.calls: list[str] = []
        self.manifest_status_at_reports = None

    def __call__(self, ctx: RunContext, workflow: WorkflowType) -> ClientResult:
        self.calls.append(workflow.value)
        if workflow is WorkflowType.REPORTS:
            self.manifest_status_at_reports = json.loads(ctx.run_dir.manifest_path.read_text())["status"]
        result = self.outcome.get(workflow.value, 0)
        if isinstance(result, BaseException):
            raise result
        return ClientResult(workflow, result, [], 0.0)


def no_server_steps(*names: str) -> tuple[PipelineStep, ...]:
    return tuple(PipelineStep(name, lambda ctx: "fake", name) for name in names)


def statuses(ctx: RunContext) -> dict[str, str]:
    return {s.name: s.status.value for s in ctx.run_dir.manifest.steps}


# ---------------------------------------------------------------------------------- the plan


def test_plan_runs_steps_then_clients_and_records_each(tmp_path) -> None:
    clients = FakeClients()
    ctx, _ = make_ctx(tmp_path, "--workflow", "benchmarks", runner=clients)
    assert pipeline.execute(ctx, no_server_steps("prepare_host", "prepare_venvs")) == 0
    assert clients.calls == ["benchmarks", "reports"]
    assert statuses(ctx) == {"prepare_host": "passed", "prepare_venvs": "passed", "benchmarks": "passed",
                             "reports": "passed", "teardown": "passed"}
    assert ctx.run_dir.manifest.status is RunStatus.PASSED


def test_the_real_plan_skips_what_does_not_apply(tmp_path) -> None:
    ctx, _ = make_ctx(tmp_path, "--workflow", "benchmarks", "--disable-trace-capture")
    assert [s.name for s in pipeline.SERVER_STEPS if s.applies(ctx)] == \
        ["prepare_host", "prepare_venvs", "start_server", "wait_ready"]
    ctx, _ = make_ctx(tmp_path, "--workflow", "server", "--local-server")
    assert "warmup" not in [s.name for s in pipeline.SERVER_STEPS if s.applies(ctx)]


@pytest.mark.parametrize("outcome, code", [({"benchmarks": 1}, 1), ({"reports": 3}, 3),
                                           ({"benchmarks": 1, "reports": 3}, 1)])
def test_exit_codes(tmp_path, outcome, code) -> None:
    ctx, out = make_ctx(tmp_path, "--workflow", "benchmarks", runner=FakeClients(**outcome))
    assert pipeline.execute(ctx, ()) == code
    assert ctx.run_dir.manifest.status is RunStatus.FAILED
    assert out.getvalue().strip().splitlines()[-1].startswith("error: ")  # the cause is the last thing said


def test_an_inconclusive_verdict_exits_4_and_names_the_undecided_checks_last(tmp_path) -> None:
    def reports(ctx, workflow):
        if workflow is WorkflowType.REPORTS:
            (ctx.run_dir.path / "reports").mkdir(parents=True, exist_ok=True)
            (ctx.run_dir.path / "reports" / "report.json").write_text(json.dumps({"verdict": {
                "result": "INCONCLUSIVE", "blockers": [], "checks": [
                    {"name": "accuracy tt_offline_qa", "required": True, "value": 0.59, "ci95": [0.5, 0.68],
                     "n": 108, "target": 0.62, "decision": "inconclusive", "detail": "rerun with mode=full"},
                    {"name": "accuracy tt_offline_mc", "required": True, "decision": "pass"}]}}))
            return ClientResult(workflow, 4, [], 0.0)
        return ClientResult(workflow, 0, [], 0.0)

    ctx, out = make_ctx(tmp_path, "--workflow", "benchmarks", runner=reports)
    assert pipeline.execute(ctx, ()) == 4
    assert ctx.run_dir.manifest.status is RunStatus.INCONCLUSIVE
    assert ctx.run_dir.manifest.step("reports").detail == "verdict INCONCLUSIVE"
    lines = out.getvalue().strip().splitlines()
    assert "error: run inconclusive: the release verdict is INCONCLUSIVE" in lines
    assert lines[-1] == ("error: verdict INCONCLUSIVE: accuracy tt_offline_qa: 0.59 in [0.5, 0.68] vs target 0.62 "
                         "(n=108): rerun with mode=full")


def test_failed_step_stops_the_run_and_says_why_last(tmp_path) -> None:
    def broken(ctx):
        raise StepFailed("wait_ready: http://127.0.0.1:9 not ready after 5 s (stage health: no answer)")

    clients = FakeClients()
    ctx, out = make_ctx(tmp_path, "--workflow", "benchmarks", runner=clients)
    steps = (PipelineStep("wait_ready", broken, "waiting"),)
    assert pipeline.execute(ctx, steps) == 1
    assert clients.calls == []  # no client ran, so there is nothing to report
    assert statuses(ctx) == {"wait_ready": "failed", "benchmarks": "not_run", "reports": "not_run",
                             "teardown": "passed"}
    lines = out.getvalue().strip().splitlines()
    assert lines[-1] == ("error: run failed: wait_ready: http://127.0.0.1:9 not ready after 5 s "
                         "(stage health: no answer)")
    assert sum("not ready after 5 s" in line for line in lines) == 1, lines  # the cause is said once


def test_a_failed_steps_details_print_once_before_the_closing_cause(tmp_path) -> None:
    def broken(ctx):
        raise StepFailed("prepare_host: weights missing\n  looked in /nowhere\n  set MODEL_WEIGHTS_PATH")

    ctx, out = make_ctx(tmp_path, "--workflow", "benchmarks", runner=FakeClients())
    assert pipeline.execute(ctx, (PipelineStep("prepare_host", broken, "preparing"),)) == 1
    lines = out.getvalue().strip().splitlines()
    assert lines[-1] == "error: run failed: prepare_host: weights missing"
    assert sum("weights missing" in line for line in lines) == 1 and "  set MODEL_WEIGHTS_PATH" in lines, lines


def test_interrupt_stops_the_client_then_still_reports_marked_interrupted(tmp_path) -> None:
    clients = FakeClients(benchmarks=Interrupted(signal.SIGINT))
    ctx, out = make_ctx(tmp_path, "--workflow", "release", runner=clients)
    ctx.venv_pythons["reports"] = Path(sys.executable)
    restore = signal.getsignal(signal.SIGINT)
    assert pipeline.execute(ctx, ()) == 130
    assert signal.getsignal(signal.SIGINT) is restore  # handlers restored after the run
    assert sorted(clients.calls[:2]) == ["evals", "tests"] and clients.calls[2:] == ["benchmarks", "reports"]
    assert clients.manifest_status_at_reports == "interrupted"
    steps = statuses(ctx)
    assert steps["benchmarks"] == "failed" and steps["reports"] == "passed" and steps["evals"] == "passed"
    assert ctx.run_dir.manifest.step("benchmarks").detail == "interrupted by SIGINT"
    assert ctx.run_dir.manifest.status is RunStatus.INTERRUPTED
    assert "error: run interrupted: SIGINT; partial results kept" in out.getvalue()


def test_a_real_signal_becomes_exit_143_with_a_report(tmp_path) -> None:
    """SIGTERM delivered to this process while a client 'runs': the handler turns it into an interrupt."""
    def slow_benchmarks(ctx, workflow):
        if workflow is WorkflowType.BENCHMARKS:
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
            time.sleep(5)
            raise AssertionError("the signal did not interrupt the client")
        return ClientResult(workflow, 0, [], 0.0)

    ctx, _ = make_ctx(tmp_path, "--workflow", "benchmarks", runner=slow_benchmarks)
    ctx.venv_pythons["reports"] = Path(sys.executable)
    assert pipeline.execute(ctx, ()) == 143
    assert statuses(ctx)["reports"] == "passed"


# ---------------------------------------------------------------------------------- stages side by side


class TimedClients(FakeClients):
    """FakeClients that take ``seconds`` each and remember when each ran (monotonic start, end)."""

    def __init__(self, seconds: float = 0.3, **outcome):
        super().__init__(**outcome)
        self.seconds = seconds
        self.spans: dict[str, tuple[float, float]] = {}

    def __call__(self, ctx: RunContext, workflow: WorkflowType) -> ClientResult:
        t0 = time.monotonic()
        time.sleep(self.seconds if self.outcome.get(workflow.value, 0) == 0 else self.seconds / 3)
        try:
            return super().__call__(ctx, workflow)
        finally:
            self.spans[workflow.value] = (t0, time.monotonic())


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _overlapping(spans: dict[str, tuple[float, float]]) -> set[frozenset[str]]:
    names = sorted(spans)
    return {frozenset((x, y)) for i, x in enumerate(names) for y in names[i + 1:] if _overlap(spans[x], spans[y])}


def test_a_release_runs_evals_and_tests_side_by_side_and_the_timed_workflows_alone(tmp_path) -> None:
    clients = TimedClients()
    ctx, out = make_ctx(tmp_path, "--workflow", "release", "--workflow-args", "overlap=1", runner=clients)
    assert pipeline.execute(ctx, ()) == 0
    assert _overlapping(clients.spans) == {frozenset({"evals", "tests"})}  # benchmarks overlaps nothing
    assert clients.calls[2:] == ["benchmarks", "stress_tests", "reports"]
    # each its own manifest step, with its own times; both were open at once
    steps = {s.name: s for s in ctx.run_dir.manifest.steps}
    assert all(steps[w].status is StepStatus.PASSED for w in ("evals", "tests", "benchmarks", "reports"))
    evals, tests, bench = steps["evals"], steps["tests"], steps["benchmarks"]
    assert evals.started < tests.ended and tests.started < evals.ended
    assert max(evals.ended, tests.ended) <= bench.started
    text = out.getvalue()
    assert text.count("Running evals and tests side by side") == 1 and "Running evals\n" not in text
    assert "✔ evals" in text and "✔ tests" in text


def test_a_cpu_engine_runs_every_client_alone_by_default_an_accelerator_side_by_side(tmp_path) -> None:
    clients = TimedClients(seconds=0.1)
    ctx, _ = make_ctx(tmp_path, "--workflow", "release", runner=clients)
    assert ctx.spec.device_type is DeviceType.CPU and not pipeline.overlap_by_default(ctx)
    assert pipeline.execute(ctx, ()) == 0
    assert _overlapping(clients.spans) == set()
    gpu = replace(ctx, spec=replace(ctx.spec, device_type=DeviceType.GPU))
    assert pipeline.overlap_by_default(gpu)


def test_overlap_0_runs_every_client_workflow_alone_in_the_same_order(tmp_path) -> None:
    clients = TimedClients(seconds=0.1)
    ctx, _ = make_ctx(tmp_path, "--workflow", "release", "--workflow-args", "overlap=0", runner=clients)
    assert pipeline.execute(ctx, ()) == 0
    assert _overlapping(clients.spans) == set()
    assert clients.calls == ["evals", "tests", "benchmarks", "stress_tests", "reports"]
    from workflows.clients import args_for

    assert not any("overlap" in args_for(w, ctx.options.workflow_args) for w in client_sequence(WorkflowType.RELEASE)
                   if w is not WorkflowType.REPORTS)  # the orchestrator's key: no client is handed it


def test_a_second_status_while_one_is_live_draws_nothing_instead_of_failing() -> None:
    """rich draws one live display per console; a second would raise LiveError mid-run."""
    out = io.StringIO()
    ui = Ui(Console(file=out, width=100, force_terminal=True))
    with ui.status("Running evals and tests side by side"), ui.status("Running tests"):
        ui.step_done("tests", "", 0.1)
    text = out.getvalue()
    assert "Running evals and tests side by side" in text and "Running tests" not in text and "tests" in text


def test_a_failed_client_does_not_stop_the_one_beside_it(tmp_path) -> None:
    clients = TimedClients(evals=1)
    ctx, _ = make_ctx(tmp_path, "--workflow", "release", "--workflow-args", "overlap=1", runner=clients)
    assert pipeline.execute(ctx, ()) == 1  # a failed workflow, as when they ran one after another
    assert statuses(ctx)["evals"] == "failed" and statuses(ctx)["tests"] == "passed"
    assert clients.spans["evals"][1] < clients.spans["tests"][1]  # evals ended first; tests went on
    assert clients.calls[2:] == ["benchmarks", "stress_tests", "reports"]
    assert ctx.run_dir.manifest.step("evals").detail == "exit code 1"


# Real children: each leads its process group with a grandchild in it, says when its signal handler is
# in place, and on SIGTERM/SIGINT writes a partial result (listed in outputs.json) before it exits 128+N.
FAKE_CLIENT = r"""
import json, os, signal, subprocess, sys, time
from pathlib import Path
out = Path(sys.argv[1]) / sys.argv[2]
out.mkdir(parents=True, exist_ok=True)
def flush(signum, frame):
    (out / "partial.json").write_text(json.dumps({"stopped_by": signal.Signals(signum).name}))
    (out / "outputs.json").write_text(json.dumps({"outputs": [sys.argv[2] + "/partial.json"]}))
    sys.exit(128 + signum)
signal.signal(signal.SIGTERM, flush)
signal.signal(signal.SIGINT, flush)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
# the line first, then the pid file the test waits for: a signal sent the moment the pid appears must not land
# inside print() (the handler's exit would flush half a line: "tests│ tests")
print(sys.argv[2], "started", flush=True)
(out / "pid.tmp").write_text(str(os.getpid()))
os.replace(out / "pid.tmp", out / "pid")  # whole or absent: the test reads it the moment it appears
time.sleep(float(sys.argv[3]))
"""


@pytest.fixture
def fake_client_commands(monkeypatch):
    """Every client workflow is FAKE_CLIENT sleeping ``seconds`` (default 30); returns the dict to set them."""
    from workflows import clients

    seconds: dict[str, float] = {}
    monkeypatch.setattr(clients, "child_command", lambda ctx, workflow: [
        sys.executable, "-c", FAKE_CLIENT, str(ctx.run_dir.path), workflow.value, str(seconds.get(workflow.value, 30))])
    monkeypatch.setattr(clients, "SERVER_WATCH_INTERVAL_S", 0.05)
    return seconds


def _wait_until_started(run_dir: Path, *workflows: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not all((run_dir / w / "pid").exists() for w in workflows):
        assert time.monotonic() < deadline, "the fake clients did not start"
        time.sleep(0.02)


def _group_gone(run_dir: Path, workflow: str) -> bool:
    from tests.helpers import live_group_members

    return live_group_members(int((run_dir / workflow / "pid").read_text())) == []


def test_a_signal_stops_both_children_and_keeps_their_partial_results(tmp_path, fake_client_commands) -> None:
    from workflows.resume import CLIENT_FILE

    ctx, out = make_ctx(tmp_path, "--workflow", "release", "--workflow-args", "overlap=1")
    run = ctx.run_dir.path
    recorded: list[str] = []

    def interrupt() -> None:
        _wait_until_started(run, "evals", "tests")
        recorded.extend(c["workflow"] for c in json.loads((run / CLIENT_FILE).read_text())["clients"])
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=interrupt, daemon=True).start()
    t0 = time.monotonic()
    assert pipeline.execute(ctx, ()) == 143
    assert time.monotonic() - t0 < 5
    assert sorted(recorded) == ["evals", "tests"]  # a rerun after kill -9 would stop both
    for workflow in ("evals", "tests"):
        step = ctx.run_dir.manifest.step(workflow)
        assert (step.status, step.detail) == (StepStatus.FAILED, "interrupted by SIGTERM")
        assert step.outputs == [f"{workflow}/partial.json"]  # what the child flushed on the signal is kept
        assert json.loads((run / workflow / "partial.json").read_text()) == {"stopped_by": "SIGTERM"}
        assert _group_gone(run, workflow)  # the child and the grandchild in its group
    assert statuses(ctx)["benchmarks"] == "not_run" and ctx.run_dir.manifest.status is RunStatus.INTERRUPTED
    assert not (run / CLIENT_FILE).exists() and len(ctx.children) == 0
    assert "evals│ evals started" in out.getvalue() and "tests│ tests started" in out.getvalue()


class DyingServer:
    """A server handle that run.py watches (kind local) and that exits with code 7 after ``after_s``."""

    kind, base_url, served_model_name = "local", "http://127.0.0.1:9", MODEL

    def __init__(self, after_s: float) -> None:
        self.death = time.monotonic() + after_s

    def is_alive(self) -> bool:
        return time.monotonic() < self.death

    def exit_code(self) -> int | None:
        return None if self.is_alive() else 7

    def log_tail(self, n: int = 40) -> str:
        return "fake engine: simulated crash"


def test_a_dying_server_stops_both_children_with_the_same_error(tmp_path, fake_client_commands) -> None:
    ctx, out = make_ctx(tmp_path, "--workflow", "release", "--workflow-args", "overlap=1")
    ctx.server = DyingServer(after_s=1.0)  # type: ignore[assignment]
    t0 = time.monotonic()
    assert pipeline.execute(ctx, ()) == 1
    assert time.monotonic() - t0 < 5
    run = ctx.run_dir.path
    for workflow in ("evals", "tests"):
        step = ctx.run_dir.manifest.step(workflow)
        assert (step.status, step.detail) == (StepStatus.FAILED, f"the server exited (code 7) during {workflow}")
        assert step.outputs == [f"{workflow}/partial.json"] and _group_gone(run, workflow)
    assert {statuses(ctx)[w] for w in ("benchmarks", "stress_tests", "reports")} == {"not_run"}
    closing = out.getvalue().strip().splitlines()[-2:]  # the cause (the first of the stage), then the other
    assert closing == ["error: run failed: the server exited (code 7) during evals",
                       "error: step tests failed: the server exited (code 7) during tests"]
    assert "fake engine: simulated crash" in out.getvalue()


# ---------------------------------------------------------------------------------- single steps


class SilentServer:
    """A named fake: answers /health and /v1/models, then sends the headers of a stream and no token."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()


def test_a_standby_warmed_by_an_earlier_run_is_not_warmed_again_and_new_pairs_are(tmp_path, monkeypatch) -> None:
    from workflows.processes import process_start_time
    from workflows.servers.standby import StandbyRecord, StandbyServerHandle

    monkeypatch.setenv("TT_STANDBY_DIR", str(tmp_path / "standby"))
    server = SilentServer()  # any request it gets is a silent stream: a warm-up that sends one fails
    try:
        ctx, _ = make_ctx(tmp_path, "--workflow", "benchmarks", "--local-server",
                          "--workflow-args", "mode=smoke stall_timeout_s=1 points=16x8x1,32x8x1")
        record = StandbyRecord(fingerprint="a" * 16, pid=os.getpid(), pgid=os.getpid(),
                               start_time=process_start_time(os.getpid()), base_url=server.url,
                               served_model_name=MODEL, log_path="/nowhere", run_id="run-0", bearer=None,
                               warmed=((16, 8), (32, 8)))
        ctx.server = StandbyServerHandle(record)
        detail = pipeline.warm_up(ctx)
        assert detail.startswith("skipped: the standby server is warm at isl=16 osl=8, isl=32 osl=8"), detail
        assert ctx.trace_captured and server.conns == []
        ctx.trace_captured = False
        ctx.server = StandbyServerHandle(replace(record, warmed=((16, 8),)))
        with pytest.raises(StepFailed, match="warm-up isl=32 osl=8"):  # only the pair not warmed is sent
            pipeline.warm_up(ctx)
        assert len(server.conns) == 1
    finally:
        server.close()


def test_warm_up_ends_within_the_stall_timeout_naming_url_and_silence(tmp_path) -> None:
    server = SilentServer()
    try:
        # 30 (isl, osl) pairs: the first silent one ends the warm-up after one 1 s stall timeout;
        # a warm-up that let every pair wait for its own would take 30 s.
        points = ",".join(f"{16 * k}x8x1" for k in range(1, 31))
        ctx, _ = make_ctx(tmp_path, "--workflow", "benchmarks", "--server-url", server.url,
                          "--workflow-args", f"mode=smoke stall_timeout_s=1 points={points}")

        class Handle:
            base_url, served_model_name, kind = server.url, MODEL, "external"

        ctx.server = Handle()  # type: ignore[assignment]
        t0 = time.monotonic()
        with pytest.raises(StepFailed) as exc:
            pipeline.warm_up(ctx)
        assert time.monotonic() - t0 < 10  # one request's stall timeout, not one per pair (30 s)
        message = str(exc.value)
        assert "\n" not in message and message.startswith("warmup: warm-up isl=16 osl=8")
        assert server.url in message and "stall_timeout_s=1" in message
        assert not ctx.trace_captured
    finally:
        server.close()


def test_print_docker_command_never_judges_this_host(tmp_path, monkeypatch) -> None:
    from workflows import host_setup

    monkeypatch.setattr(host_setup, "available_ram_gb", lambda *a: pytest.fail("judged this host's RAM"))
    monkeypatch.setattr(host_setup, "check_disk", lambda *a, **k: pytest.fail("judged this host's disk"))
    options = parse_args(["--model", "Llama-3.1-8B-Instruct", "--device", "n150", "--workflow", "server",
                          "--docker-server", "--print-docker-cmd", "--no-auth"], load_catalog())
    spec = load_catalog().specs["id_tt-transformers_Llama-3.1-8B-Instruct_n150"]
    big = replace(spec, min_ram_gb=4096.0)
    out = io.StringIO()
    run_dir = RunDirectory(tmp_path / "run", Manifest(run_id="r", model_id=big.model_id, workflow="server"))
    ctx = RunContext(spec=big, options=options, run_dir=run_dir, ui=Ui(Console(file=out, width=100)))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf"))
    monkeypatch.delenv("MODEL_WEIGHTS_DIR", raising=False)
    assert pipeline.execute(ctx) == 0
    text = out.getvalue()
    assert "docker run " in text and spec.docker_image in text
    assert "needs >= 4096 GB of RAM" in text and "no weights for this model on this host" in text


def test_interactive_prepares_the_host_then_hands_this_terminal_to_a_shell(tmp_path, monkeypatch) -> None:
    """``--workflow server --docker-server --interactive``: no server is started or waited for by run.py."""
    from workflows.servers import docker_server

    launches = []
    monkeypatch.setattr(docker_server, "run_interactive", lambda launch: launches.append(launch) or 5)
    monkeypatch.setattr(pipeline, "SERVER_STEPS", no_server_steps("prepare_host"))
    ctx, out = make_ctx(tmp_path, "--workflow", "server", "--docker-server", "--interactive")
    assert pipeline.execute(ctx) == 5                           # the shell's exit code
    (launch,) = launches
    assert launch.interactive and ctx.server is None
    assert "start the server in it with: exec ${PYTHON_ENV_DIR:-/opt/venv}/bin/python -u" in out.getvalue()
    manifest = json.loads(ctx.run_dir.manifest_path.read_text())
    assert [s["name"] for s in manifest["steps"]] == ["prepare_host", "teardown"]
    assert manifest["status"] == "failed"


def test_console_filter_keeps_tracebacks_in_the_log_only() -> None:
    show = ConsoleFilter()
    lines = ["progress 1", "Traceback (most recent call last):", '  File "x.py", line 1, in <module>',
             "    boom()", "", "During handling of the above exception, another exception occurred:", "",
             "Traceback (most recent call last):", '  File "y.py", line 2', "RuntimeError: Session is closed",
             "progress 2"]
    assert [x for x in map(show, lines) if x is not None] == \
        ["progress 1", "RuntimeError: Session is closed (traceback in run.log)", "progress 2"]


def test_outcome_names_failure_classes_and_counts(tmp_path) -> None:
    run = tmp_path / "run"
    (run / "benchmarks").mkdir(parents=True)
    point = {"schema": "tt-bench-point/1", "metrics": {"completed": 5, "failed": 3,
                                                      "failures_by_class": {"http_5xx": 2, "connection_reset": 1}}}
    (run / "benchmarks" / "point_isl-1_osl-2_con-1_n-8.json").write_text(json.dumps(point))
    (run / "reports").mkdir()
    (run / "reports" / "report.json").write_text(json.dumps({"verdict": {"result": "FAIL", "blockers": [
        {"category": "benchmarks", "item": "isl-1_osl-2_con-1", "detail": "3 of 8 requests failed"}]}}))
    manifest = Manifest(run_id="r", model_id="m", workflow="benchmarks", status=RunStatus.FAILED)
    lines = summary_lines(run, manifest, "a client workflow failed")
    assert lines[0] == "run failed: a client workflow failed"
    assert "point_isl-1_osl-2_con-1_n-8: 3 of 8 requests failed (http_5xx 2, connection_reset 1)" in lines
    assert "verdict FAIL: benchmarks isl-1_osl-2_con-1: 3 of 8 requests failed" in lines
    assert summary_lines(run, replace(manifest, status=RunStatus.PASSED)) == []


def test_a_child_dies_with_a_sigkilled_parent() -> None:
    """The parent-death signal every client workflow gets: SIGKILL of the parent cannot orphan it."""
    code = ("import subprocess, sys, time\n"
            "from workflows.processes import die_with_parent\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
            "start_new_session=True, preexec_fn=die_with_parent())\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                              env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child), "the child outlived its SIGKILLed parent"
    assert callable(die_with_parent())


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


# ---------------------------------------------------------------------------------- run.py end to end


@pytest.fixture
def stub_server(fake_server_process) -> str:
    """The delay-programmed stub from benchmarking/ serving the CPU default's model name."""
    return fake_server_process("benchmarking.stub_server", "--ttft-ms", "5", "--itl-ms", "1", "--model", MODEL).url


def run_py(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO_ROOT / "run.py"), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO_ROOT, check=False)


@pytest.mark.slow
def test_benchmarks_against_external_stub(stub_server, tmp_path) -> None:
    out = tmp_path / "run"
    result = run_py("--model", MODEL, "--device", "cpu", "--workflow", "benchmarks",
                    "--server-url", stub_server, "--no-auth", "--workflow-args", "mode=smoke", "--output-dir", str(out))
    text = result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1] == f"Run directory: {out.resolve()}", text[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    names = [s["name"] for s in manifest["steps"]]
    assert names[:2] == ["resolve_spec", "prepare_host"]
    assert {"prepare_venvs", "start_server", "wait_ready", "warmup", "benchmarks", "reports", "teardown"} <= set(names)
    bench = next(s for s in manifest["steps"] if s["name"] == "benchmarks")
    assert bench["status"] == "passed", text[-3000:]
    assert any(o.endswith(".json") for o in bench["outputs"])
    assert (out / "model_spec.json").exists() and (out / "cli_args.json").exists()
    assert "[benchmarks]" in (out / "run.log").read_text()
    report = json.loads((out / "reports" / "report.json").read_text())
    assert result.returncode == verdict_exit_code(report["verdict"]["result"]), text[-3000:]


@pytest.mark.slow
def test_silent_server_ends_the_warm_up_within_the_stall_timeout(tmp_path, fake_server_process) -> None:
    """Headers, then never a token, from the first request: one line names the URL and the silence."""
    url = fake_server_process("benchmarking.fault_server", "--fault", "silence", "--model", MODEL).url
    t0 = time.monotonic()
    result = run_py("--model", MODEL, "--device", "cpu", "--workflow", "benchmarks", "--server-url", url,
                    "--no-auth", "--workflow-args", "mode=smoke stall_timeout_s=3",
                    "--output-dir", str(tmp_path / "r"), timeout=120)
    elapsed = time.monotonic() - t0
    lines = result.stdout.strip().splitlines()
    assert result.returncode == 1 and elapsed < 60, result.stdout[-3000:]
    assert lines[-1] == f"Run directory: {(tmp_path / 'r').resolve()}"
    assert lines[-2].startswith("error: run failed: warmup: ") and url in lines[-2] and "stall" in lines[-2]


def test_external_server_with_wrong_model_is_one_clear_error(tmp_path, fake_server_process) -> None:
    url = fake_server_process("benchmarking.stub_server", "--model", "other-model").url
    result = run_py("--model", MODEL, "--device", "cpu", "--workflow", "benchmarks",
                    "--server-url", url, "--no-auth", "--output-dir", str(tmp_path / "r"))
    assert result.returncode == 1
    assert MODEL in result.stdout and "other-model" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert {s["name"]: s["status"] for s in manifest["steps"]}["benchmarks"] == StepStatus.NOT_RUN.value


def test_unreachable_external_server(tmp_path) -> None:
    result = run_py("--model", MODEL, "--device", "cpu", "--workflow", "benchmarks",
                    "--server-url", "http://127.0.0.1:9", "--no-auth", "--output-dir", str(tmp_path / "r"))
    assert result.returncode == 1
    assert "127.0.0.1:9" in result.stdout and "Traceback" not in result.stdout + result.stderr
    assert "127.0.0.1:9" in result.stdout.strip().splitlines()[-2]  # the cause, right above the run directory


@pytest.mark.slow
def test_server_dying_mid_run_stops_with_log_tail_and_keeps_results(tmp_path) -> None:
    """A fake engine (the stub server, then a simulated crash) behind --local-server."""
    engine = tmp_path / "fake_engine.sh"
    engine.write_text(
        "#!/bin/sh\n"
        f"cd {REPO_ROOT}\n"
        f"{sys.executable} -m benchmarking.stub_server --port $SERVICE_PORT --ttft-ms 400 --itl-ms 20 "
        f"--model {MODEL} &\n"
        "sleep 6\nkill $!\necho 'fake engine: simulated crash'\nexit 7\n")
    engine.chmod(0o755)
    out = tmp_path / "run"
    env = dict(os.environ, TT_ENGINE_PYTHON=str(engine))
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "run.py"), "--model", MODEL, "--device", "cpu",
         "--workflow", "benchmarks", "--local-server", "--service-port", str(free_port()), "--no-auth",
         "--disable-trace-capture", "--workflow-args", "mode=full", "--output-dir", str(out)],
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT, env=env, check=False)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "the server exited (code 7) during benchmarks" in result.stdout
    assert "fake engine: simulated crash" in result.stdout
    steps = {s["name"]: s for s in json.loads((out / "manifest.json").read_text())["steps"]}
    assert steps["benchmarks"]["status"] == "failed"
    assert steps["reports"]["status"] in ("passed", "failed") and steps["reports"]["outputs"]
    assert steps["teardown"]["status"] == "passed"
    closing = "\n".join(result.stdout.strip().splitlines()[-10:])
    assert "error: run failed: the server exited (code 7) during benchmarks" in closing, closing


def test_release_children_get_only_the_workflow_args_they_accept():
    from workflows.clients import args_for

    given = {"mode": "smoke", "slo": "ttft_p99:2000", "markers": "sampling", "goodput": "ttft:500",
             "run_mode": "capacity"}
    assert args_for(WorkflowType.BENCHMARKS, given) == {"mode": "smoke", "goodput": "ttft:500"}
    assert args_for(WorkflowType.TESTS, given) == {"mode": "smoke", "markers": "sampling"}
    stress = args_for(WorkflowType.STRESS_TESTS, given)
    assert stress["slo"] == "ttft_p99:2000" and "markers" not in stress and "goodput" not in stress
    assert args_for(WorkflowType.REPORTS, given) == given
    # perf_tiers reaches the benchmarks too: their adaptive points sample for the tiers the verdict requires
    capped = {**given, "perf_tiers": "functional"}
    assert args_for(WorkflowType.BENCHMARKS, capped) == {"mode": "smoke", "goodput": "ttft:500",
                                                         "perf_tiers": "functional"}
    assert "perf_tiers" not in args_for(WorkflowType.TESTS, capped)


def test_keys_no_workflow_owns_reach_the_children_that_pass_them_through():
    from workflows.clients import args_for

    given = {"mode": "smoke", "batch_size": "4", "max_tokens": "512", "temperature": "0.5", "slo": "ttft_p99:2000"}
    assert args_for(WorkflowType.EVALS, given) == {"mode": "smoke", "batch_size": "4", "max_tokens": "512",
                                                   "temperature": "0.5"}
    assert args_for(WorkflowType.BENCHMARKS, given) == {"mode": "smoke", "temperature": "0.5"}
    assert args_for(WorkflowType.TESTS, given) == {"mode": "smoke"}
