"""Child processes that cannot outlive run.py, and how they are stopped.

Why: a client workflow left running after run.py died keeps sending requests and writes results
into a run directory that a re-run is already using. Every process run.py starts (the local server,
each client workflow) therefore asks the kernel to signal it when run.py dies, even by SIGKILL
(Linux ``PR_SET_PDEATHSIG``), and leads its own process group so that stopping it stops
everything it started: the group gets a signal first (the child flushes what it has), and
SIGKILL after a timeout. ``RunningChildren`` holds every client running at one moment (a release
runs the workflows that time nothing side by side), so an interrupt or teardown stops them all.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

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


def stop_process_groups(procs: list[subprocess.Popen], timeout: float, sig: int = signal.SIGTERM) -> None:
    """``stop_process_group`` for several children at once: every group gets ``sig`` first, so all of
    them flush at the same time, then SIGKILL whatever still runs when the one ``timeout`` has passed."""
    running = [p for p in procs if p.poll() is None]
    for proc in running:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    for proc in running:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


class RunningChildren:
    """Every client process running now: one, or all of a stage whose workflows share the server.

    Thread-safe: the clients of one stage start and end in threads of their own, while the main thread
    (the only one Python delivers signals to) stops them all on SIGINT/SIGTERM and at teardown.
    ``interrupted`` is the signal that stopped them; a child that would start after it is refused, so
    none is left unstopped.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: list[subprocess.Popen] = []
        self.interrupted: int | None = None

    def add(self, proc: subprocess.Popen) -> bool:
        """Hold ``proc``; False (not held) when an interrupt has already stopped the others."""
        with self._lock:
            if self.interrupted is not None:
                return False
            self._procs.append(proc)
            return True

    def remove(self, proc: subprocess.Popen) -> None:
        with self._lock:
            if proc in self._procs:
                self._procs.remove(proc)

    def running(self) -> list[subprocess.Popen]:
        with self._lock:
            return [p for p in self._procs if p.poll() is None]

    def __len__(self) -> int:
        return len(self.running())

    def interrupt(self, signum: int, timeout: float) -> None:
        """Pass ``signum`` to every child's group (each flushes what it has), SIGKILL after ``timeout``."""
        with self._lock:
            self.interrupted = signum
            procs = list(self._procs)
        stop_process_groups(procs, timeout, signum)

    def clear_interrupt(self) -> None:
        """The interrupted stage has ended: what runs next (the report of what exists) may start children."""
        with self._lock:
            self.interrupted = None

    def stop_all(self, timeout: float) -> None:
        """SIGTERM to every child's group, SIGKILL after ``timeout`` (teardown: nothing may outlive run.py)."""
        with self._lock:
            procs, self._procs = list(self._procs), []
        stop_process_groups(procs, timeout)


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
