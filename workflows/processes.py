"""Child processes that cannot outlive run.py, and how they are stopped.

Why: a client workflow left running after run.py died keeps sending requests and writes results
into a run directory that a re-run is already using. Every process run.py starts (the local server,
each client workflow) therefore asks the kernel to signal it when run.py dies, even by SIGKILL
(Linux ``PR_SET_PDEATHSIG``), and leads its own process group so that stopping it stops
everything it started: the group gets a signal first (the child flushes what it has), and
SIGKILL after a timeout.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Callable

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn``: in the child before exec, ask for ``sig`` when the parent dies (Linux prctl).

    If the parent already died between fork and prctl, the child signals itself at once.
    """
    parent = os.getpid()

    def preexec() -> None:
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        except (OSError, AttributeError):
            return  # not Linux: teardown still stops the group on every catchable exit
        if os.getppid() != parent:
            os.kill(os.getpid(), sig)

    return preexec


def stop_process_group(proc: subprocess.Popen, timeout: float, sig: int = signal.SIGTERM) -> int | None:
    """Send ``sig`` to the child's whole process group, SIGKILL it after ``timeout``; returns its exit code."""
    if proc.poll() is not None:
        return proc.returncode
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return proc.wait()
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return proc.wait()


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot, /proc field 22); None when gone.

    A pid alone is not an identity: after a kill it can be reused by an unrelated process.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if not fields or fields[0] == "Z":
        return None  # a zombie has finished; only its parent's wait is missing
    return fields[19] if len(fields) > 19 else None
