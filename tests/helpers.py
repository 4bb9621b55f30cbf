"""Helpers shared by every test package (import as ``from tests.helpers import ...``).

Plain functions and classes live here; fixtures live in ``tests/conftest.py``. One copy of each,
so a fix to how tests pick ports or start fake servers reaches every test at once.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
import subprocess
import sys
import urllib.request

from contracts import REPO_ROOT


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FakeServerProcess:
    """One of the shipped fake servers in its own process, on a port the OS picks.

    ``module`` is ``benchmarking.stub_server`` (delay-programmed) or ``benchmarking.fault_server``
    (named faults); both print ``<NAME>_LISTENING <port>`` first, which is waited for here.
    """

    def __init__(self, module: str = "benchmarking.stub_server", *args: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
        self.proc = subprocess.Popen([sys.executable, "-m", module, "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO_ROOT)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if "_LISTENING " not in line:
            self.stop()
            raise RuntimeError(f"{module} did not start: {line!r}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=10) as resp:
            return resp.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def port_free(port: int) -> bool:
    """Whether 127.0.0.1:port can be bound now (a stopped server must have released its port)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def proc_stats() -> dict[int, list[str]]:
    """pid -> the fields of /proc/<pid>/stat after the command name (state, ppid, pgrp, ...), for every
    process that still exists; tests use it to prove no process outlived run.py."""
    stats = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        stats[int(entry.name)] = stat[stat.rindex(")") + 2:].split()
    return stats
