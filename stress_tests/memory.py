"""Server memory over a run: RSS of a local server's process tree, ``docker stats`` of a container,
or the server's own ``process_resident_memory_bytes`` on /metrics (stdlib only).

The source is picked once, from what the orchestrator left behind: a local server's
``RUN_DIR/server.pid.json`` (its process group), a container name (``server_container=`` or
``TT_SERVER_CONTAINER``), else /metrics. The /metrics figure covers only the API process (not
engine workers), so it is named as such and never mixed with the others.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from contracts.prometheus import fetch_metrics

_UNITS = {"b": 1, "kb": 1e3, "kib": 1024, "mb": 1e6, "mib": 1024 ** 2, "gb": 1e9, "gib": 1024 ** 3}


@dataclass
class MemorySource:
    kind: str          # process_tree | docker | metrics | none
    what: str          # pgid / container / URL, for the record
    read: Callable[[], float | None]  # bytes now, None when unreadable


def _children(pid: int) -> list[int]:
    try:
        out = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text().split()
            out += [int(x) for x in text]
        return out
    except OSError:
        return []


def _rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def process_tree_rss(root_pid: int) -> float | None:
    """Sum of VmRSS of ``root_pid`` and every descendant; None when the root is gone."""
    if not Path(f"/proc/{root_pid}").exists():
        return None
    seen, todo, total = set(), [root_pid], 0
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += _rss_bytes(pid)
        todo += _children(pid)
    return float(total)


def parse_docker_mem(text: str) -> float | None:
    """``'1.5GiB / 31GiB'`` -> bytes used."""
    m = re.match(r"\s*([\d.]+)\s*([A-Za-z]+)", text or "")
    if not m or m.group(2).lower() not in _UNITS:
        return None
    return float(m.group(1)) * _UNITS[m.group(2).lower()]


def _docker_reader(container: str) -> Callable[[], float | None]:
    def read() -> float | None:
        try:
            out = subprocess.run(["docker", "stats", "--no-stream", "--format", "{{.MemUsage}}", container],
                                 capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return parse_docker_mem(out.stdout) if out.returncode == 0 else None
    return read


def _metrics_reader(base_url: str, api_key: str | None) -> Callable[[], float | None]:
    def read() -> float | None:
        snap = fetch_metrics(base_url, api_key, timeout=5)
        return (snap or {}).get("process_resident_memory_bytes")
    return read


def pick_source(run_dir: str, base_url: str, api_key: str | None, container: str | None = None) -> MemorySource:
    pidfile = Path(run_dir) / "server.pid.json"
    if pidfile.is_file():
        try:
            info = json.loads(pidfile.read_text())
            pid = int(info["pid"])
            if info.get("kind") == "local" and process_tree_rss(pid) is not None:
                return MemorySource("process_tree", f"local server pid {pid} and its descendants",
                                    lambda: process_tree_rss(pid))
        except (OSError, ValueError, KeyError, TypeError):
            pass
    container = container or os.environ.get("TT_SERVER_CONTAINER")
    if container:
        return MemorySource("docker", f"docker stats of container {container}", _docker_reader(container))
    reader = _metrics_reader(base_url, api_key)
    if reader() is not None:
        return MemorySource("metrics", f"process_resident_memory_bytes of {base_url}/metrics (API process only)",
                            reader)
    return MemorySource("none", "no pid file, container or /metrics memory figure", lambda: None)
