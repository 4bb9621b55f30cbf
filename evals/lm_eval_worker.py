"""One lm-eval process for every task of a run: imports lm-eval once, then runs tasks on request.

Why: importing lm-eval (datasets, transformers, torch-free but still ~25 s on a small CPU) cost
more than the smoke tasks themselves when each task was its own ``python -m lm_eval`` process.
This worker keeps what made one process per task worth having:
- each task runs exactly the ``lm_eval run`` command recorded in its eval record (the same CLI code,
  called in-process), with its own output directory, request cache and log file;
- everything lm-eval prints for a task (logging, tqdm, tracebacks) goes to that task's log file
  (file descriptors 1 and 2 are pointed at it), never to the console;
- an exception in one task is written to its log and answered as a non-zero ``rc``; the next
  task runs in the same process. If the process itself dies, the caller starts a new one.
One thing is shared on purpose: lm-eval's index of task YAMLs (``share_task_index``).

Protocol (JSON lines). The worker answers on the file descriptor given as ``--control-fd``
(the caller's pipe); its own stdout/stderr go to ``--log`` between tasks.
  -> {"ready": true, "import_s": float}                  once lm-eval is imported
  <- {"task": str, "args": [...], "cwd": str, "log": str, "builtin_tasks": bool}  one per task, on stdin
  -> {"task": str, "rc": int, "seconds": float}          when that task is done
Stdin closed: the worker exits 0.

Runs in the evals venv (needs lm-eval); started by ``evals/run_evals.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path


def _point_stdio_at(path: Path | str) -> None:
    """Send fds 1 and 2 (and Python's buffered streams on them) to ``path``, appending."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    finally:
        os.close(fd)


#: Whether the running task may use lm-eval's own task YAMLs (set per request).
_builtin_tasks = True


def share_task_index() -> None:
    """Build lm-eval's task index once per set of task directories, not once per task, and not at
    all for lm-eval's own directory when the task is one of ours.

    Every ``lm_eval run`` constructs a TaskManager, which reads every task YAML lm-eval ships
    (thousands of files: 10-30 s on a small CPU). In one process running several tasks the index
    of the same directories is the same, so it is built once and copied for each task. A task whose
    YAML is self-contained under ``--include_path`` (``"builtin_tasks": false``) needs none of them.
    """
    import lm_eval.tasks  # noqa: PLC0415
    from lm_eval.tasks._index import TaskIndex  # noqa: PLC0415

    original = TaskIndex.build
    builtin_root = str(Path(lm_eval.tasks.__file__).resolve().parent)
    built: dict[tuple, dict] = {}

    def build(paths, *, resolve_includes=True):  # type: ignore[no-untyped-def]
        paths = [p for p in paths if _builtin_tasks or str(Path(p).resolve()) != builtin_root]
        key = (tuple(str(p) for p in paths), resolve_includes)
        if key not in built:
            built[key] = original(paths, resolve_includes=resolve_includes)
        return dict(built[key])

    TaskIndex.build = staticmethod(build)


def run_task(cli, args: list[str]) -> int:
    """Run one ``lm_eval run ...`` argv in-process; the exit code the CLI would have had."""
    sys.argv = ["lm-eval", *args]
    try:
        parser = cli()
        parser.execute(parser.parse_args())
        return 0
    except SystemExit as exc:  # argparse errors and explicit exits
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except Exception:  # noqa: BLE001 - any task failure is reported through its log and rc
        traceback.print_exc()
        return 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run lm-eval tasks in one process (see module docstring).")
    ap.add_argument("--control-fd", type=int, required=True)
    ap.add_argument("--log", required=True, help="where the worker's own output goes between tasks")
    opts = ap.parse_args(argv)
    control = os.fdopen(opts.control_fd, "w", buffering=1)
    worker_log = opts.log
    _point_stdio_at(worker_log)
    # The evals venv is ours: keep its bytecode even under PYTHONDONTWRITEBYTECODE (the lm-eval
    # import is most of a smoke run's time when it compiles every module from source).
    sys.dont_write_bytecode = False
    started = time.monotonic()
    from lm_eval._cli import HarnessCLI  # noqa: PLC0415 (the import this process exists to do once)
    from lm_eval.utils import setup_logging  # noqa: PLC0415

    setup_logging()
    share_task_index()
    import lm_eval.config.evaluate_config  # noqa: F401, PLC0415 - what `run` imports on first use
    import lm_eval.evaluator  # noqa: F401, PLC0415

    control.write(json.dumps({"ready": True, "import_s": round(time.monotonic() - started, 2)}) + "\n")
    home = os.getcwd()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        global _builtin_tasks
        _builtin_tasks = bool(request.get("builtin_tasks", True))
        t0 = time.monotonic()
        _point_stdio_at(request["log"])
        try:
            os.chdir(request["cwd"])
            rc = run_task(HarnessCLI, list(request["args"]))
        finally:
            os.chdir(home)
            _point_stdio_at(worker_log)
        control.write(json.dumps({"task": request["task"], "rc": rc,
                                  "seconds": round(time.monotonic() - t0, 2)}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
