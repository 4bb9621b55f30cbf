"""The caller's side of ``evals/lm_eval_worker.py``: start it once, run tasks through it, with deadlines.

Why a long-lived child rather than lm-eval in this process: the worker's stdout and stderr are
pointed at each task's log file, so lm-eval's tracebacks and progress bars never reach the
console, and a crash inside lm-eval (or a task that will not end) costs one task: the worker is
killed and the next task starts a new one. Every wait here has a deadline and says what it
waited for.

Stdlib only.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

WORKER = Path(__file__).resolve().parent / "lm_eval_worker.py"
#: How long the worker may take to import lm-eval (seconds): minutes on a loaded 2-core machine.
READY_DEADLINE_S = 300.0
_PR_SET_PDEATHSIG = 1


class WorkerError(RuntimeError):
    """The worker could not start, died, or missed a deadline; the message is one line."""


@dataclass(frozen=True)
class TaskOutcome:
    rc: int  # lm-eval's exit code; negative: the worker died by that signal
    seconds: float
    timed_out: bool = False
    worker_died: bool = False


def _die_with_parent() -> None:
    """In the child: SIGTERM it when the evals process dies, even by SIGKILL (Linux prctl)."""
    import ctypes  # noqa: PLC0415

    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class LmEvalWorker:
    """One running worker process with its environment; ``run`` sends it one task at a time."""

    def __init__(self, python: str, env: dict[str, str], log_path: Path, ready_deadline_s: float = READY_DEADLINE_S):
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        read_fd, write_fd = os.pipe()
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [python, str(WORKER), "--control-fd", str(write_fd), "--log", str(log_path)],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env, pass_fds=(write_fd,),
                text=True, preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        os.close(write_fd)
        self._answers: queue.Queue[dict | None] = queue.Queue()
        threading.Thread(target=self._read, args=(os.fdopen(read_fd, "r"),), daemon=True).start()
        started = time.monotonic()
        first = self._next(ready_deadline_s, "to import lm-eval")
        if first is None or not first.get("ready"):
            self.stop()
            raise WorkerError(f"the lm-eval worker exited ({self.proc.poll()}) before it was ready; see {log_path}")
        self.import_s = float(first.get("import_s") or time.monotonic() - started)

    def _read(self, stream) -> None:
        for line in stream:
            try:
                self._answers.put(json.loads(line))
            except ValueError:
                continue
        self._answers.put(None)  # EOF: the worker is gone

    def _next(self, deadline_s: float, what: str) -> dict | None:
        try:
            return self._answers.get(timeout=deadline_s)
        except queue.Empty:
            self.stop()
            raise WorkerError(f"the lm-eval worker did not answer within {deadline_s:.0f} s {what}") from None

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, task: str, args: list[str], cwd: Path, log_path: Path, deadline_s: float,
            builtin_tasks: bool = True) -> TaskOutcome:
        """Run one task; a missed deadline kills the worker and is reported, not raised.

        ``builtin_tasks=False``: the task's YAML is under ``--include_path`` and needs none of
        lm-eval's own task directory (which then is not indexed)."""
        t0 = time.monotonic()
        request = {"task": task, "args": args, "cwd": str(cwd), "log": str(log_path), "builtin_tasks": builtin_tasks}
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return TaskOutcome(self._exit_code(), time.monotonic() - t0, worker_died=True)
        try:
            answer = self._next(deadline_s, f"for task {task}")
        except WorkerError:
            return TaskOutcome(-int(signal.SIGKILL), time.monotonic() - t0, timed_out=True)
        if answer is None:
            return TaskOutcome(self._exit_code(), time.monotonic() - t0, worker_died=True)
        return TaskOutcome(int(answer.get("rc", 1)), float(answer.get("seconds", time.monotonic() - t0)))

    def _exit_code(self) -> int:
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.stop()
            return self.proc.returncode if self.proc.returncode is not None else -int(signal.SIGKILL)

    def stop(self, timeout: float = 10.0) -> None:
        """Close its stdin (it exits when idle), then SIGTERM, then SIGKILL; waits for it."""
        if self.proc.poll() is not None:
            return
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        for sig, wait_s in ((None, 2.0), (signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            if sig is not None:
                try:
                    self.proc.send_signal(sig)
                except ProcessLookupError:
                    return
            try:
                self.proc.wait(timeout=wait_s)
                return
            except subprocess.TimeoutExpired:
                continue


class LmEvalSessions:
    """Workers keyed by environment (datasets read their offline flags at import, so tasks that
    need another environment get their own worker); started on first use, restarted after a death."""

    def __init__(self, python: str, log_dir: Path, ready_deadline_s: float = READY_DEADLINE_S):
        self.python, self.log_dir, self.ready_deadline_s = python, log_dir, ready_deadline_s
        self._workers: dict[tuple, LmEvalWorker] = {}
        self.import_s: list[float] = []

    def worker(self, env: dict[str, str]) -> LmEvalWorker:
        key = tuple(sorted(env.items()))
        current = self._workers.get(key)
        if current is None or not current.alive:
            n = len(self.import_s)
            current = LmEvalWorker(self.python, env, self.log_dir / f"lm_eval_worker{'' if n == 0 else f'.{n}'}.log",
                                   self.ready_deadline_s)
            self.import_s.append(current.import_s)
            self._workers[key] = current
        return current

    def run(self, task: str, args: list[str], cwd: Path, env: dict[str, str], log_path: Path,
            deadline_s: float, builtin_tasks: bool = True) -> TaskOutcome:
        return self.worker(env).run(task, args, cwd, log_path, deadline_s, builtin_tasks)

    def close(self) -> None:
        for worker in self._workers.values():
            worker.stop()
        self._workers.clear()
