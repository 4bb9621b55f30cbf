"""What a server spent on a piece of work: CPU core-seconds of its process tree, and energy where
the host can say.

Why here (stdlib, bottom layer): every client that records a point (LLM benchmarks, media
benchmarks, the media server's own benchmark scripts) reads the same two counters the same way,
so "core-seconds per 1k output tokens" means one thing in every record.

CPU: the sum of user + system time of a process and all its live descendants, from /proc
(utime/stime of each, plus the cutime/cstime of children already reaped). For a server in a
container, the cgroup's ``cpu.stat`` (``usage_usec``) counts everything the container ran; pass its
path. A sample is taken before and after the work; the difference is what the work cost (the
server's idle threads count too: that is what serving costs).

Energy: Intel RAPL package counters under /sys/class/powercap (``energy_uj``), summed over
packages, wrap-around handled. Where they are missing or unreadable (most VMs and containers,
non-root since 2020 kernels) the probe says so in one line and no number is made up.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
POWERCAP = Path("/sys/class/powercap")


@dataclasses.dataclass(frozen=True)
class CostSample:
    """One reading: cpu_seconds (None when unreadable, reason in cpu_note), energy_joules (None
    when the host has no readable RAPL counter, reason in energy_note)."""

    cpu_seconds: float | None
    energy_joules: float | None
    cpu_note: str = ""
    energy_note: str = ""


@dataclasses.dataclass(frozen=True)
class Cost:
    """What happened between two samples: core-seconds and joules (None + note when unknown)."""

    core_seconds: float | None
    energy_joules: float | None
    cpu_note: str = ""
    energy_note: str = ""

    def per(self, units: float, scale: float = 1.0) -> float | None:
        """Core-seconds per ``scale`` units of work (None when either is unknown or no work)."""
        if self.core_seconds is None or not units:
            return None
        return self.core_seconds * scale / units

    def energy_per(self, units: float, scale: float = 1.0) -> float | None:
        if self.energy_joules is None or not units:
            return None
        return self.energy_joules * scale / units


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    return text[text.rindex(")") + 2:].split()


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` alone (its threads, not its child processes)."""
    fields = _stat_fields(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def process_tree_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` and every live descendant (and their reaped children);
    None when ``pid`` is gone or /proc is missing."""
    if _stat_fields(pid) is None:
        return None
    children = _children_map()
    total_ticks = 0
    stack = [pid]
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        fields = _stat_fields(current)
        if fields is None:
            continue
        # After the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
        total_ticks += sum(int(fields[i]) for i in (11, 12, 13, 14))
        stack.extend(children.get(current, []))
    return total_ticks / _CLOCK_TICKS


def cgroup_cpu_seconds(cpu_stat: Path) -> float | None:
    """``usage_usec`` of a cgroup v2 ``cpu.stat`` file, in seconds (None when unreadable)."""
    try:
        for line in Path(cpu_stat).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
    except (OSError, ValueError):
        return None
    return None


def _rapl_domains() -> list[Path]:
    """Top-level package domains only (intel-rapl:N), not their subzones (which they include)."""
    if not POWERCAP.is_dir():
        return []
    return sorted(p for p in POWERCAP.iterdir() if p.name.startswith("intel-rapl:") and p.name.count(":") == 1)


def read_energy() -> tuple[dict[str, tuple[int, int]] | None, str]:
    """{domain: (energy_uj, max_energy_range_uj)}, or None and why there is no reading."""
    domains = _rapl_domains()
    if not domains:
        return None, f"no RAPL package counters under {POWERCAP} on this host"
    readings: dict[str, tuple[int, int]] = {}
    for domain in domains:
        try:
            energy = int((domain / "energy_uj").read_text())
            limit = int((domain / "max_energy_range_uj").read_text())
        except PermissionError:
            return None, f"{domain}/energy_uj is not readable by this user (root only on this kernel)"
        except (OSError, ValueError) as error:
            return None, f"{domain}/energy_uj unreadable ({error})"
        readings[domain.name] = (energy, limit)
    return readings, ""


class CostProbe:
    """Samples a server's CPU and the host's energy before and after a piece of work.

    pid: the server's top process (its tree is summed), or cpu_stat: a container's cgroup
    cpu.stat. Neither: the CPU side is unknown and says so.
    """

    def __init__(self, pid: int | None = None, cpu_stat: Path | None = None):
        self.pid = pid
        self.cpu_stat = cpu_stat
        self._start_cpu: float | None = None
        self._start_energy: dict[str, tuple[int, int]] | None = None
        self._cpu_note = ""
        self._energy_note = ""

    def _cpu(self) -> float | None:
        if self.cpu_stat is not None:
            value = cgroup_cpu_seconds(self.cpu_stat)
            self._cpu_note = "" if value is not None else f"{self.cpu_stat} unreadable"
            return value
        if self.pid is not None:
            value = process_tree_cpu_seconds(self.pid)
            self._cpu_note = "" if value is not None else f"process {self.pid} not found in /proc"
            return value
        self._cpu_note = "the server's process is not known to this client (remote server, no pid or cgroup)"
        return None

    def start(self) -> "CostProbe":
        self._start_cpu = self._cpu()
        self._start_energy, self._energy_note = read_energy()
        return self

    def stop(self) -> Cost:
        end_cpu = self._cpu()
        core_seconds = None
        if self._start_cpu is not None and end_cpu is not None:
            core_seconds = max(0.0, end_cpu - self._start_cpu)
        elif not self._cpu_note:
            self._cpu_note = "the server's process ended during the work"
        energy = None
        end_energy, note = read_energy()
        if self._start_energy is not None and end_energy is not None:
            energy = 0.0
            for name, (before, limit) in self._start_energy.items():
                after = end_energy.get(name, (before, limit))[0]
                energy += ((after - before) % limit if limit else after - before) / 1e6
        else:
            self._energy_note = self._energy_note or note
        return Cost(core_seconds, energy, self._cpu_note if core_seconds is None else "",
                    self._energy_note if energy is None else "")


def _container_cpu_stat(container: str) -> Path | None:
    """The cgroup v2 cpu.stat of a running Docker container (systemd or cgroupfs driver)."""
    import subprocess

    try:
        result = subprocess.run(["docker", "inspect", "-f", "{{.Id}}", container], capture_output=True,
                                text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    full_id = result.stdout.strip()
    if result.returncode != 0 or not full_id:
        return None
    for candidate in (Path(f"/sys/fs/cgroup/system.slice/docker-{full_id}.scope/cpu.stat"),
                      Path(f"/sys/fs/cgroup/docker/{full_id}/cpu.stat")):
        if candidate.is_file():
            return candidate
    return None


def probe_for_run(run_dir: str | Path, container: str | None = None) -> tuple[CostProbe, str]:
    """A probe of the server a client workflow measures, and what it watches (for the record).

    A local server: ``RUN_DIR/server.pid.json`` (its process tree). A container: ``container`` or
    ``TT_SERVER_CONTAINER`` (its cgroup's cpu.stat). Else a probe whose CPU side says it cannot know.
    """
    import json

    pid_file = Path(run_dir) / "server.pid.json"
    if pid_file.is_file():
        try:
            info = json.loads(pid_file.read_text())
            pid = int(info["pid"])
            if info.get("kind") == "local" and process_tree_cpu_seconds(pid) is not None:
                return CostProbe(pid=pid), f"process tree of local server pid {pid} (/proc)"
        except (OSError, ValueError, KeyError, TypeError):
            pass
    container = container or os.environ.get("TT_SERVER_CONTAINER")
    if container:
        cpu_stat = _container_cpu_stat(container)
        if cpu_stat is not None:
            return CostProbe(cpu_stat=cpu_stat), f"cgroup {cpu_stat} of container {container}"
    return CostProbe(), "none"
