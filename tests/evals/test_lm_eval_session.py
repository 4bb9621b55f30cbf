"""The one-process lm-eval worker and its caller, with a FAKE ``lm_eval`` package (named as such).

The fake's CLI does what the test asks through its argv (print, raise, exit the process, hang),
so the protocol, the per-task log redirection, the deadline and the restart after a death are
exercised in a second; real lm-eval runs in test_lm_eval_worker_real.py and test_integration.py.
"""

from __future__ import annotations

import os
import sys
import time

import pytest

from evals.lm_eval_session import LmEvalSessions, LmEvalWorker, WorkerError

FAKE_CLI = '''
import os, sys, time

class HarnessCLI:
    """FAKE lm-eval CLI: argv[1] says what to do."""

    def parse_args(self):
        return sys.argv[1:]

    def execute(self, args):
        what = args[0]
        print(f"fake lm-eval running {what} in {os.getcwd()}")
        print("progress on stderr", file=sys.stderr)
        if what == "raise":
            raise RuntimeError("Session is closed")
        if what == "exit2":
            sys.exit(2)
        if what == "die":
            os._exit(3)
        if what == "hang":
            time.sleep(3600)
'''


@pytest.fixture
def fake_env(tmp_path):
    pkg = tmp_path / "fake_lm_eval" / "lm_eval"
    for sub in ("", "_cli", "config", "tasks"):
        (pkg / sub).mkdir(parents=True, exist_ok=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "_cli" / "__init__.py").write_text(FAKE_CLI)
    (pkg / "utils.py").write_text("def setup_logging():\n    pass\n")
    (pkg / "evaluator.py").write_text("")
    (pkg / "config" / "evaluate_config.py").write_text("")
    (pkg / "tasks" / "_index.py").write_text("class TaskIndex:\n    @staticmethod\n"
                                             "    def build(paths, *, resolve_includes=True):\n        return {}\n")
    return dict(os.environ, PYTHONPATH=str(tmp_path / "fake_lm_eval"))


def test_tasks_run_in_one_process_with_output_in_their_own_logs(tmp_path, fake_env, capfd):
    worker = LmEvalWorker(sys.executable, fake_env, tmp_path / "worker.log")
    try:
        first = worker.run("a", ["ok"], tmp_path, tmp_path / "a.log", deadline_s=30)
        second = worker.run("b", ["raise"], tmp_path, tmp_path / "b.log", deadline_s=30)
        third = worker.run("c", ["exit2"], tmp_path, tmp_path / "c.log", deadline_s=30)
        assert (first.rc, second.rc, third.rc) == (0, 1, 2)
        assert worker.alive  # an exception or a SystemExit costs the task, not the process
    finally:
        worker.stop()
    a_log = (tmp_path / "a.log").read_text()
    assert f"fake lm-eval running ok in {tmp_path}" in a_log and "progress on stderr" in a_log
    assert "Traceback" in (tmp_path / "b.log").read_text() and "Session is closed" in (tmp_path / "b.log").read_text()
    out = capfd.readouterr()
    assert "fake lm-eval" not in out.out + out.err and "Traceback" not in out.out + out.err


def test_a_task_past_its_deadline_is_stopped(tmp_path, fake_env):
    worker = LmEvalWorker(sys.executable, fake_env, tmp_path / "worker.log")
    started = time.monotonic()
    outcome = worker.run("slow", ["hang"], tmp_path, tmp_path / "slow.log", deadline_s=1.5)
    assert outcome.timed_out and outcome.rc != 0 and not worker.alive
    assert time.monotonic() - started < 20


def test_a_dead_worker_is_reported_and_replaced(tmp_path, fake_env):
    sessions = LmEvalSessions(sys.executable, tmp_path)
    try:
        died = sessions.run("x", ["die"], tmp_path, fake_env, tmp_path / "x.log", deadline_s=30)
        assert died.worker_died and died.rc == 3
        again = sessions.run("y", ["ok"], tmp_path, fake_env, tmp_path / "y.log", deadline_s=30)
        assert again.rc == 0 and len(sessions.import_s) == 2  # a new process for the next task
        assert (tmp_path / "lm_eval_worker.1.log").exists()
    finally:
        sessions.close()


def test_a_worker_that_cannot_start_says_so(tmp_path):
    pkg = tmp_path / "broken" / "lm_eval"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('broken on purpose')\n")
    with pytest.raises(WorkerError, match="lm-eval worker exited .* before it was ready"):
        LmEvalWorker(sys.executable, dict(os.environ, PYTHONPATH=str(tmp_path / "broken")), tmp_path / "w.log")
    assert "broken on purpose" in (tmp_path / "w.log").read_text()
