"""The release matrix on a fleet: which Ray resources a host offers, which a spec asks for, and what a fleet
of a given size buys (``release_matrix.py --plan``).

Why custom resources: Ray schedules a task only on a node that offers every resource it asks for, so a spec
that asks for ``device_n150`` runs only on a host that declared an n150 card (``ray start --resources`` with
what ``run.py --host-resources`` prints), and a spec no live node offers its device to is NOT RUN with the
resource named instead of waiting forever. Every host also offers one ``matrix_slot`` and every spec asks for
it: one spec at a time per host, since a spec uses the host's cards (a t3k host offers t3k, n300 and n150, and
two specs on its cards at once would fight over them) and a CPU release uses all of its cores.

Standard library only: ``run.py --host-resources`` imports it before any venv exists, and nothing of Ray is
imported here.
"""
from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

SLOT = "matrix_slot"
TT_SYSFS = Path("/sys/class/tenstorrent")
TT_DEV = Path("/dev/tenstorrent")
#: Catalog devices a host runs, by the number of Tenstorrent cards of one type it has (the catalog's
#: multi-card devices are four cards of one type; a Galaxy reports its own card type).
_TT_DEVICES = {"n150": {1: ("n150",), 4: ("n150x4", "n150")}, "n300": {1: ("n300", "n150"), 4: ("t3k", "n300", "n150")},
               "p100": {1: ("p100",)}, "p150": {1: ("p150",), 4: ("p150x4", "p150")}, "galaxy": {1: ("galaxy",)}}
#: Seconds one spec is assumed to take when the history has no run of it, by mode: the CPU default's
#: release goals on 2 cores (scripts/measure_release_time.py: smoke 60 s, ci 240 s), an hour in full mode.
ASSUMED_S = {"smoke": 60.0, "ci": 240.0, "full": 3600.0}


def device_resource(device: str) -> str:
    """The Ray resource a spec of ``device`` asks for (one unit)."""
    return f"device_{device}"


def spec_resources(device: str) -> dict[str, float]:
    return {device_resource(device): 1.0, SLOT: 1.0}


def missing_resource(device: str, offered: list[dict[str, float]]) -> str | None:
    """What no node (``offered``: each node's resources) has of a ``device`` spec's resources: the device, or
    the slot on a node that has the device; None when one node has them all."""
    wanted = spec_resources(device)
    if any(all(node.get(k, 0) >= v for k, v in wanted.items()) for node in offered):
        return None
    if any(node.get(device_resource(device), 0) >= 1 for node in offered):
        return f"{SLOT} on a node offering {device_resource(device)}"
    return device_resource(device)


def _card_type(name: str) -> str | None:
    """'n150', 'n300', 'p100', 'p150' or 'galaxy' from a driver's card type string (p150a, P150C, tt-galaxy-wh)."""
    text = name.strip().lower()
    for kind in ("galaxy", "n150", "n300", "p100", "p150"):
        if kind in text:
            return kind
    return None


def tenstorrent_cards(sysfs: Path = TT_SYSFS, dev: Path = TT_DEV) -> tuple[dict[str, int], list[str]]:
    """Cards by type from the kernel driver's sysfs (``tt_card_type`` of each device), and what could not be
    told (a device node without a readable card type)."""
    cards: dict[str, int] = {}
    unknown: list[str] = []
    nodes = sorted(p.name for p in dev.iterdir()) if dev.is_dir() else []
    for name in nodes:
        attr = next(iter(sorted(sysfs.glob(f"*{name}/tt_card_type"))), None) if sysfs.is_dir() else None
        try:
            kind = _card_type(attr.read_text()) if attr else None
        except OSError:
            kind = None
        if kind is None:
            unknown.append(f"/dev/tenstorrent/{name}: card type unknown (no readable tt_card_type in {sysfs})")
            continue
        cards[kind] = cards.get(kind, 0) + 1
    return cards, unknown


def gpu_count() -> int:
    """NVIDIA GPUs ``nvidia-smi -L`` lists (0 without the tool)."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return 0
    try:
        done = subprocess.run([tool, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in done.stdout.splitlines() if line.startswith("GPU "))


def host_resources(cards: dict[str, int] | None = None, gpus: int | None = None) -> tuple[dict[str, float], list[str]]:
    """The ``ray start --resources`` object of this host (every host runs CPU specs), and notes on what it
    could not use (an unknown card, a card count the catalog has no device for)."""
    if cards is None:
        cards, notes = tenstorrent_cards()
    else:
        notes = []
    gpus = gpu_count() if gpus is None else gpus
    devices = {"cpu"}
    if gpus:
        devices.add("gpu")
    for kind, count in sorted(cards.items()):
        table = _TT_DEVICES[kind]
        usable = max((n for n in table if n <= count), default=None)
        if usable is None:
            notes.append(f"{count} {kind} card(s): no catalog device")
            continue
        devices.update(table[usable])
        if usable != count:
            notes.append(f"{count} {kind} cards: offered as {table[usable][0]} (the catalog's largest that fits)")
    resources = {device_resource(d): 1.0 for d in sorted(devices)}
    resources[SLOT] = 1.0
    return resources, notes


def host_resources_line() -> tuple[str, list[str]]:
    """What ``run.py --host-resources`` prints: the JSON for ``ray start --resources``, and its notes."""
    resources, notes = host_resources()
    return json.dumps(resources, sort_keys=True), notes


# ---------------------------------------------------------------------------------- --plan


@dataclass(frozen=True)
class SpecTime:
    key: str        # model device impl
    device: str
    seconds: float
    measured: int   # runs the figure is the median of (0: assumed)


def spec_key(model: str, device: str, impl: str) -> str:
    return f"{model} {device} {impl}"


def history_durations(entries, workflow: str) -> dict[str, list[float]]:
    """Seconds from start to end of every finished run of ``workflow`` in the run history, by ``spec_key``."""
    from datetime import datetime

    out: dict[str, list[float]] = {}
    for e in entries:
        if e.workflow != workflow or not e.started or not e.ended or e.run_status == "interrupted":
            continue
        try:
            seconds = (datetime.fromisoformat(e.ended) - datetime.fromisoformat(e.started)).total_seconds()
        except ValueError:
            continue
        out.setdefault(spec_key(e.model, e.device, e.impl), []).append(seconds)
    return out


def spec_times(specs, durations: dict[str, list[float]], mode: str) -> list[SpecTime]:
    """Per spec the median of its measured release durations (``durations`` by ``spec_key``), else the mode's
    assumed time; the plan says how many of each it used."""
    out = []
    for spec in specs:
        key = spec_key(spec.model_name, spec.device_type.value, spec.impl.impl_name)
        runs = [d for d in durations.get(key, []) if d > 0]
        seconds = statistics.median(runs) if runs else ASSUMED_S.get(mode, ASSUMED_S["ci"])
        out.append(SpecTime(key, spec.device_type.value, float(seconds), len(runs)))
    return out


def makespan(seconds: Iterable[float], hosts: int) -> float:
    """Longest-processing-time-first list scheduling on ``hosts`` identical hosts: the wall time of a queue
    run greedily longest first (what the Ray executor approaches: a free host takes the next spec). LPT is
    within 4/3 of the optimum, and no schedule beats max(longest spec, total / hosts)."""
    loads = [0.0] * max(1, hosts)
    for s in sorted(seconds, reverse=True):
        loads[loads.index(min(loads))] += s
    return max(loads)


def parse_fleet(text: str, devices: Iterable[str]) -> dict[str, int]:
    """``--plan N`` (N hosts of every device the tier needs) or ``--plan n150=4,t3k=2`` (unnamed: 1)."""
    devices = sorted(set(devices))
    if re.fullmatch(r"[1-9][0-9]{0,3}", text.strip()):
        return {d: int(text) for d in devices}
    fleet = {d: 1 for d in devices}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, count = part.partition("=")
        if name not in devices or not re.fullmatch(r"[1-9][0-9]{0,3}", count):
            raise ValueError(f"--plan {text!r}: N, or DEVICE=N,... with devices of the tier ({', '.join(devices)})")
        fleet[name] = int(count)
    return fleet


def _clock(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def render_plan(tier_name: str, mode: str, times: list[SpecTime], fleet: dict[str, int]) -> str:
    """The plan: per device the specs, their total, and the makespan on 1 host and on the fleet's hosts;
    the tier's makespan is the slowest device's (devices run on hosts of their own, side by side)."""
    measured = sum(1 for t in times if t.measured)
    lines = [f"plan: tier {tier_name}, mode {mode}: {len(times)} spec(s); {measured} with measured times (median "
             f"of their releases in the run history), {len(times) - measured} assumed at "
             f"{_clock(ASSUMED_S.get(mode, ASSUMED_S['ci']))} each",
             f"{'device':8} {'specs':>5} {'one host':>12} {'hosts':>5} {'makespan':>12}"]
    total_one = worst = 0.0
    for device in sorted({t.device for t in times}):
        own = [t.seconds for t in times if t.device == device]
        one, span = sum(own), makespan(own, fleet.get(device, 1))
        total_one, worst = total_one + one, max(worst, span)
        lines.append(f"{device:8} {len(own):5d} {_clock(one):>12} {fleet.get(device, 1):5d} {_clock(span):>12}")
    hosts = sum(fleet.get(d, 1) for d in {t.device for t in times})
    lines.append(f"tier on {hosts} host(s): {_clock(worst)} (all of it one after another on one host: "
                 f"{_clock(total_one)}); estimate by longest-first list scheduling, within 4/3 of the best")
    return "\n".join(lines)
