"""run.py against a FAKE server that misbehaves on purpose: one test per kind of server fault.

Each test starts ``benchmarking/fault_server.py`` (a fake OpenAI-compatible server with named
faults) and drives ``run.py --server-url <fake> --workflow benchmarks|evals`` the way a user
would, then checks what a release decision needs: a broken server never passes, every wait ends
within its deadline and says what it waited for, the last lines name the cause and the run
directory, Ctrl-C keeps what was measured, and no child of run.py outlives it.

The fake answers instantly unless a test slows it down, and with ``--answer-key evals/tasks`` it
answers the offline eval questions right, so a healthy fake passes and every failure below comes
from the injected fault. Timeouts are shortened through ``--workflow-args`` (stall_timeout_s).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from contracts.retry import GaveUp, NotYet, retry

REPO = Path(__file__).resolve().parent.parent
MODEL = "SmolLM2-135M-Instruct"
STALL_S = 3  # stall_timeout_s the stall tests configure
POINT1 = "point_isl-128_osl-32_con-1_n-4"  # the first smoke point of the CPU spec
FLAKY_EVAL_SUMMARIES = ("Session is closed", "Can not write request body")

pytestmark = pytest.mark.integration


class FakeServer:
    """benchmarking/fault_server.py in its own process, with a request log to inspect."""

    def __init__(self, tmp: Path, *faults: str, itl_ms: float = 0, answer_key: bool = False):
        self.log_path = tmp / f"fake-{time.monotonic_ns()}.requests.jsonl"
        cmd = [sys.executable, "-m", "benchmarking.fault_server", "--port", "0", "--model", MODEL,
               "--itl-ms", str(itl_ms), "--request-log", str(self.log_path)]
        for fault in faults:
            cmd += ["--fault", fault]
        if answer_key:
            cmd += ["--answer-key", str(REPO / "evals" / "tasks")]
        env = dict(os.environ, PYTHONPATH=str(REPO))
        env.pop("TT_FAULT_SERVER_FAULTS", None)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=env, cwd=REPO)
        line = self.proc.stdout.readline()
        if not line.startswith("FAULT_SERVER_LISTENING"):
            self.proc.kill()
            raise RuntimeError(f"fault server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def requests(self) -> list[dict]:
        try:
            return [json.loads(line) for line in self.log_path.read_text().splitlines() if line.strip()]
        except FileNotFoundError:
            return []

    def streams(self) -> int:
        return sum(1 for r in self.requests() if r["stream"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def fake(tmp_path):
    started: list[FakeServer] = []

    def make(*faults: str, **kw) -> FakeServer:
        server = FakeServer(tmp_path, *faults, **kw)
        started.append(server)
        return server
    yield make
    for server in started:
        server.stop()


@dataclass
class Result:
    rc: int | None  # None: still running when the test's deadline came (then killed)
    out: str
    elapsed_s: float
    run_dir: Path

    @property
    def tail(self) -> str:
        return "\n".join(self.out.strip().splitlines()[-15:])


def _argv(run_dir: Path, url: str, workflow: str, wargs: str) -> list[str]:
    return [sys.executable, str(REPO / "run.py"), "--model", MODEL, "--device", "cpu", "--workflow", workflow,
            "--server-url", url, "--workflow-args", wargs, "--output-dir", str(run_dir)]


def start_run_py(run_dir: Path, url: str, workflow: str, wargs: str) -> subprocess.Popen:
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200")
    for name in ("API_KEY", "VLLM_API_KEY", "JWT_SECRET", "OPENAI_API_KEY"):
        env.pop(name, None)
    return subprocess.Popen(_argv(run_dir, url, workflow, wargs), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=REPO, env=env, start_new_session=True)


def finish(proc: subprocess.Popen, run_dir: Path, started: float, timeout: float) -> Result:
    try:
        out, _ = proc.communicate(timeout=max(1.0, timeout - (time.monotonic() - started)))
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        rc = None
    reap_children(run_dir)
    return Result(rc, out, time.monotonic() - started, run_dir)


def run_py(run_dir: Path, url: str, workflow: str = "benchmarks", wargs: str = "mode=smoke",
           timeout: float = 120) -> Result:
    started = time.monotonic()
    return finish(start_run_py(run_dir, url, workflow, wargs), run_dir, started, timeout)


def children_of_run(run_dir: Path) -> list[tuple[int, str]]:
    """Processes whose command line names this test's run directory (run.py's client workflows)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(run_dir) in cmd and "pytest" not in cmd:
            found.append((int(entry.name), cmd.strip()))
    return found


def reap_children(run_dir: Path) -> list[tuple[int, str]]:
    """Kill (by pid) what a test's run left behind; returns what was found."""
    left = children_of_run(run_dir)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


def wait_for(predicate, timeout: float, what: str) -> None:
    def holds(_remaining_s: float) -> None:
        if not predicate():
            raise NotYet("not yet")

    try:
        retry(what, holds, deadline_s=timeout, delay_s=0.2)
    except GaveUp:
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}") from None


def assert_failed_naming(res: Result, *causes: str) -> None:
    """Exit != 0; the last lines name every cause and end with the run directory."""
    assert res.rc is not None, f"run.py still running after {res.elapsed_s:.0f} s:\n{res.out[-3000:]}"
    assert res.rc != 0, f"run.py exited 0 against a broken server:\n{res.out[-3000:]}"
    assert "Traceback" not in res.out, res.out[-4000:]
    lines = res.out.strip().splitlines()
    assert lines[-1] == f"Run directory: {res.run_dir.resolve()}", res.tail
    for cause in causes:
        assert cause in res.tail, f"the last lines do not name {cause!r}:\n{res.tail}"


def assert_verdict_fail_naming(res: Result, *classes: str) -> None:
    """The release verdict is FAIL and a blocker names each failure class."""
    assert "VERDICT: FAIL" in res.out, res.out[-3000:]
    report = json.loads((res.run_dir / "reports" / "report.json").read_text())
    assert report["verdict"]["result"] == "FAIL"
    blockers = json.dumps(report["verdict"]["blockers"])
    for cls in classes:
        assert cls in blockers, f"no blocker names {cls}: {blockers}"
        assert cls in (res.run_dir / "reports" / "report.md").read_text(), f"report.md does not name {cls}"


def point(run_dir: Path, stem: str) -> dict:
    return json.loads((run_dir / "benchmarks" / f"{stem}.json").read_text())


def failure_classes(run_dir: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for path in (run_dir / "benchmarks").glob("point_*.json"):
        for cls, n in (json.loads(path.read_text())["metrics"].get("failures_by_class") or {}).items():
            out[cls] = out.get(cls, 0) + n
    return out


# ------------------------------------------------------------------ the fake itself is healthy


def test_healthy_fake_passes(fake, tmp_path):
    """Baseline: with no fault the same command passes, so every failure below is the fault's."""
    res = run_py(tmp_path / "run", fake().url)
    assert res.rc == 0, res.out[-3000:]
    assert "VERDICT: PASS" in res.out and failure_classes(res.run_dir) == {}


# ------------------------------------------------------------------ failed requests count


@pytest.mark.parametrize("fault, cls", [
    ("http_500=0.3", "http_5xx"),            # 30% of completions return HTTP 500
    ("malformed_sse=0.34", "malformed_sse"),  # some SSE chunks are invalid JSON / lack `data:`
    ("reset=0.34", "connection_reset"),       # some connections reset mid-stream
])
def test_failed_requests_fail_the_verdict(fake, tmp_path, fault, cls):
    res = run_py(tmp_path / "run", fake(fault).url)
    assert failure_classes(res.run_dir).get(cls), (fault, failure_classes(res.run_dir))
    assert_failed_naming(res, cls)
    assert_verdict_fail_naming(res, cls)


# ------------------------------------------------------------------ every wait has a deadline


def _assert_one_stall_line(res: Result, url: str) -> None:
    """One line names the URL, the phase and the silence."""
    hits = [ln for ln in res.out.splitlines()
            if url in ln and re.search(rf"\b{STALL_S}(\.0)? ?s\b", ln) and re.search(r"stall|silen|no data", ln, re.I)
            and re.search(r"warm-?up|point|readiness|phase", ln, re.I)]
    assert hits, f"no line names {url}, the phase and the {STALL_S} s silence:\n{res.out[-3000:]}"


def test_silent_server_from_first_request_ends_within_stall_timeout(fake, tmp_path):
    """Headers, then no token ever: the warm-up must end within the stall timeout and say so."""
    server = fake("silence")
    res = run_py(tmp_path / "run", server.url, wargs=f"mode=smoke stall_timeout_s={STALL_S}", timeout=90)
    assert res.rc is not None, (f"still running after {res.elapsed_s:.0f} s (stall timeout {STALL_S} s):\n"
                                f"{res.out[-2000:]}")
    assert res.elapsed_s < 60, f"took {res.elapsed_s:.0f} s for a {STALL_S} s stall timeout"
    _assert_one_stall_line(res, server.url)
    assert_failed_naming(res, "stall")


def test_stall_after_warmup_is_a_stall_within_the_stall_timeout(fake, tmp_path):
    """Warm-up served, then silence: classed `stall` (not budget_exceeded), ended quickly, named last."""
    server = fake("stall_after=1")
    res = run_py(tmp_path / "run", server.url, wargs=f"mode=smoke stall_timeout_s={STALL_S}", timeout=90)
    assert res.rc is not None and res.elapsed_s < 60, f"{res.elapsed_s:.0f} s:\n{res.out[-2000:]}"
    classes = failure_classes(res.run_dir)
    assert classes.get("stall") and "budget_exceeded" not in classes, classes
    _assert_one_stall_line(res, server.url)
    assert_failed_naming(res, "stall")
    assert "stall" in (res.run_dir / "reports" / "report.md").read_text()


def test_point_budget_does_not_preempt_the_stall_timeout(fake, tmp_path):
    """A point budget only a little above the stall timeout: the stalled request is still a `stall`."""
    server = fake("stall_after=1")
    res = run_py(tmp_path / "run", server.url,
                 wargs=f"mode=smoke stall_timeout_s={STALL_S} point_budget_s={STALL_S + 2}", timeout=90)
    classes = failure_classes(res.run_dir)
    assert classes.get("stall") and "budget_exceeded" not in classes, classes
    assert_failed_naming(res, "stall")


@pytest.mark.parametrize("fault, causes", [
    ("die_after=4", ("connect_error",)),     # dies mid-stream (requests 1-4 answered: readiness, warm-up, two)
    ("unavailable_s=20", ("http_5xx",)),      # 503 for 20 s
    ("zero_tokens", ("no_content",)),         # streams zero tokens
])
def test_broken_server_failure_names_the_cause_last(fake, tmp_path, fault, causes):
    res = run_py(tmp_path / "run", fake(fault).url, timeout=90)
    assert_failed_naming(res, *causes)
    report = (res.run_dir / "reports" / "report.md").read_text()
    for cause in causes:
        assert cause in report, f"report.md has no failure class {cause}"


# ------------------------------------------------------------------ interrupts keep what was done


def _start_slow(fake, tmp_path) -> tuple[FakeServer, Path, subprocess.Popen, float]:
    # 32 tokens x 30 ms: ~1 s a request, so the first point (4 requests, one at a time) takes ~4 s: time
    # enough for a signal to land mid-point, and the resumed runs of the kill tests take half what 60 ms took
    server = fake(itl_ms=30)
    run_dir = tmp_path / "run"
    started = time.monotonic()
    return server, run_dir, start_run_py(run_dir, server.url, "benchmarks", "mode=smoke"), started


@pytest.mark.slow
def test_sigint_during_a_point_keeps_the_partial_point_and_reports(fake, tmp_path):
    server, run_dir, proc, started = _start_slow(fake, tmp_path)
    # warm-up + the point's first request done, its second in flight
    wait_for(lambda: server.streams() >= 3, 90, "the second request of the first point")
    proc.send_signal(signal.SIGINT)
    res = finish(proc, run_dir, started, 120)
    assert res.rc == 130, res.out[-3000:]
    rec = point(run_dir, POINT1)
    assert rec.get("interrupted") and rec.get("complete") is False, {k: rec.get(k) for k in ("interrupted", "complete")}
    rows = [json.loads(line) for line in (run_dir / "benchmarks" / f"{POINT1}.requests.jsonl").read_text().splitlines()]
    assert sum(1 for r in rows if r.get("success")) >= 1, rows
    report = run_dir / "reports" / "report.md"
    assert report.exists(), f"no report after SIGINT:\n{res.tail}"
    assert re.search("interrupted", report.read_text(), re.I), "report.md does not say the run was interrupted"
    assert res.out.strip().splitlines()[-1] == f"Run directory: {run_dir.resolve()}"


@pytest.mark.slow
def test_sigint_after_a_point_completed_reports_it(fake, tmp_path):
    server, run_dir, proc, started = _start_slow(fake, tmp_path)
    wait_for(lambda: (run_dir / "benchmarks" / f"{POINT1}.json").exists(), 120, "the first point to finish")
    proc.send_signal(signal.SIGINT)
    res = finish(proc, run_dir, started, 150)
    assert res.rc == 130, res.out[-3000:]
    assert point(run_dir, POINT1).get("complete") is not False
    report = run_dir / "reports" / "report.md"
    assert report.exists(), f"no report after SIGINT:\n{res.tail}"
    assert "128" in report.read_text() and re.search("interrupted", report.read_text(), re.I)


@pytest.mark.slow
def test_sigkill_of_run_py_leaves_no_child_sending_and_resume_reruns_the_point(fake, tmp_path):
    server, run_dir, proc, started = _start_slow(fake, tmp_path)
    wait_for(lambda: server.streams() >= 3, 90, "the first point to be under way")
    proc.kill()  # SIGKILL run.py only: its children must not outlive it
    proc.communicate()
    time.sleep(2.0)
    count = len(server.requests())
    time.sleep(4.0)
    survivors = reap_children(run_dir)
    assert not survivors, f"children of run.py survived its SIGKILL: {survivors}"
    assert len(server.requests()) == count, "requests kept arriving after run.py was killed"
    first = run_dir / "benchmarks" / f"{POINT1}.json"
    assert not first.exists() or json.loads(first.read_text()).get("complete") is False
    # The same command with the same --output-dir resumes the killed run (as without --output-dir) and measures
    # the cut point again instead of accepting it.
    again = run_py(run_dir, server.url, timeout=240)
    assert again.rc == 0 and re.search(r"^Resuming \S+: its run.py was killed", again.out, re.M), again.out[-2000:]
    assert f"{POINT1} (tt): already finished" not in again.out, again.out[-2000:]
    rec = point(run_dir, POINT1)
    # measured whole again: its minimum of 4, then more while a target check was undecided (adaptive sampling)
    assert rec.get("complete") is not False and rec["metrics"]["completed"] >= 4, rec["metrics"]
    assert rec["metrics"]["failed"] == 0 and rec["sampling"]["stop_reason"], rec.get("sampling")


@pytest.mark.slow
def test_the_same_command_after_a_kill_resumes_the_killed_run_keeping_finished_points(fake, tmp_path):
    """kill -9 once the first point is written, then the same command at once (no --output-dir): the
    rerun finds the killed run, stops its client if it still flushes, keeps the finished point
    byte for byte and measures only the rest."""
    server = fake(itl_ms=30)
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200", CACHE_ROOT=str(tmp_path / "cache"))
    for name in ("API_KEY", "VLLM_API_KEY", "JWT_SECRET", "OPENAI_API_KEY"):
        env.pop(name, None)
    argv = _argv(tmp_path, server.url, "benchmarks", "mode=smoke")[:-2]  # the same command, no --output-dir
    runs = tmp_path / "cache" / "workflow_logs" / "runs"
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env,
                            start_new_session=True)
    try:
        wait_for(lambda: any(runs.glob(f"*/benchmarks/{POINT1}.json")), 120, "the first point to finish")
        proc.kill()
        proc.communicate()
        run_dir = next(runs.iterdir())
        kept = {p.name: p.read_bytes() for p in (run_dir / "benchmarks").glob(f"{POINT1}*")}
        again = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env, timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
        reap_children(runs)
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-3000:]
    assert [p.name for p in runs.iterdir()] == [run_dir.name], "the rerun started a new run instead of resuming"
    assert f"Resuming {run_dir.name}: its run.py was killed" in out, out[-3000:]
    assert f"{POINT1} (tt): already finished" in (run_dir / "run.log").read_text()
    assert {p.name: p.read_bytes() for p in (run_dir / "benchmarks").glob(f"{POINT1}*")} == kept
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "passed"
    assert not (run_dir / "run.pid.json").exists() and not (run_dir / "client.pid.json").exists()


# ------------------------------------------------------------------ evals against a broken server

EVAL_ARGS = "mode=smoke limit=5"


def _eval_records(run_dir: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in (run_dir / "evals").glob("*/eval_record.json")}


@pytest.mark.slow
def test_evals_server_dies(fake, tmp_path):
    """The server dies during the first task: no tracebacks, the next task is not started, 'cannot connect'."""
    server = fake("die_after=10", answer_key=True)
    res = run_py(tmp_path / "run", server.url, "evals", f"{EVAL_ARGS} tasks=tt_offline_mc,tt_offline_qa", timeout=400)
    assert_failed_naming(res)
    records = _eval_records(res.run_dir)
    errors = " | ".join(str(r.get("error")) for r in records.values())
    assert not any(s in errors for s in FLAKY_EVAL_SUMMARIES), errors
    gone = r"cannot connect|connection refused|not reachable|unreachable|server is gone|not answering"
    assert re.search(gone, errors, re.I), errors
    assert all(r["status"] == "error" for r in records.values()), {t: r["status"] for t, r in records.items()}
    assert re.search(gone, res.tail, re.I), f"the last lines do not say the server is gone:\n{res.tail}"


@pytest.mark.slow
def test_evals_30_percent_http_500_has_a_stable_summary(fake, tmp_path):
    """30% of prompts always get HTTP 500: the task errors with one summary naming HTTP 500, every run."""
    # the readiness check, the warm-up and the evals preflight are spared: the fault hits lm-eval's requests
    res = run_py(tmp_path / "run", fake("http_500_sticky=0.3", "spare_first=3", answer_key=True).url, "evals",
                 "mode=smoke limit=10 tasks=tt_offline_qa", timeout=400)
    assert_failed_naming(res)
    rec = _eval_records(res.run_dir)["tt_offline_qa"]
    assert rec["status"] == "error", rec
    assert "500" in rec["error"] and not any(s in rec["error"] for s in FLAKY_EVAL_SUMMARIES), rec["error"]
    assert "tt_offline_qa" in res.tail and "500" in res.tail


@pytest.mark.slow
def test_evals_one_http_500_on_the_preflight_is_retried(fake, tmp_path):
    """The second non-streaming request (readiness sends the first) is the evals preflight: one 500, retried."""
    server = fake("http_500_nth=2", answer_key=True)
    res = run_py(tmp_path / "run", server.url, "evals", f"{EVAL_ARGS} tasks=tt_offline_qa", timeout=400)
    faulted = [r for r in server.requests() if r["fault"] == "http_500_nth"]
    assert len(faulted) == 1, server.requests()[:5]
    rec = _eval_records(res.run_dir)["tt_offline_qa"]
    assert rec["status"] == "passed", (rec.get("status"), rec.get("error"))
    assert res.rc == 0, res.out[-3000:]
