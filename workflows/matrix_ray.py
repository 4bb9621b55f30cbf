"""``release_matrix.py --executor ray``: the tier on a Ray cluster, one task per spec.

Each spec's release is one Ray task asking for its device as a custom resource plus the host's one
``matrix_slot`` (``workflows.matrix_fleet``), so it runs only on a host with that hardware, one spec per host
at a time. The driver's checkout travels with the tasks (Ray's runtime environment ``working_dir``, without
the venvs, run directories and git data), so every node runs the driver's code; each node keeps its venvs
outside it (``TT_WORKFLOW_VENVS_DIR``, default ``~/.cache/tt-inference-server/workflow_venvs``).

Results come home while they are written (``workflows.matrix_ray_task``) into ``--out/runs/<run_id>``, and
every run is indexed into the one history store of the driver; the support table is then written from those
run directories exactly as with ``--executor local``. Faults: a task whose node (or worker) died is retried
on another node with the resource (``--retries``, default 1), the dead attempt's partial run kept and marked
interrupted; a spec no live node offers its resource to is NOT RUN naming the resource; every wait has a
deadline; Ctrl-C cancels every task (each stops its run.py, which stops its server) and waits for them.

Needs Ray: imported only in the ``ray`` venv (``requirements/ray.txt``), never by run.py.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from contracts import REPO_ROOT
from contracts.run_dir import make_run_id
from workflows.matrix_fleet import device_resource, missing_resource, spec_resources
from workflows import matrix_collector
from workflows.matrix_collector import Collector, mark_interrupted
from workflows.matrix_ray_task import run_spec
from workflows.release_matrix import ENTRY_TIMEOUT_S, STOP_GRACE_S, EntryResult

#: Left out of the shipped checkout: built or written per host, and large.
EXCLUDES = [".git", ".workflow_venvs", "workflow_logs", "persistent_volume", "__pycache__", "*.pyc",
            ".pytest_cache", ".venv", "*.egg-info"]
#: Driver environment variables the tasks see too (the catalog the driver selected the specs from).
PASS_ENV = ("TT_CATALOG_ROOT",)
POLL_S = 1.0
#: How long the head's port may take to answer.
CONNECT_TIMEOUT_S = 10.0
#: How long the driver waits for a finished task's result, the collector's states, or cancelled tasks.
GET_TIMEOUT_S = 60.0


class RayMatrixError(RuntimeError):
    """The cluster cannot be used (not reachable); one line, exit 2."""


@dataclass
class Attempt:
    spec_index: int
    number: int
    run_id: str
    ref: Any
    submitted: float
    node: str = ""
    started: float | None = None


@dataclass
class Entry:
    spec: Any
    result: EntryResult
    resource: str
    attempts: list[Attempt] = field(default_factory=list)
    state: str = "queued"
    seconds: float | None = None


class Progress:
    """The live table: one row per spec (state, node, time). On a terminal it is redrawn in place; otherwise
    each change is one line, so a log shows the whole story."""

    def __init__(self, entries: list[Entry], say: Callable[[str], None], tty: bool) -> None:
        self.entries, self.say, self.tty, self.drawn, self.shown = entries, say, tty, 0, {}

    def label(self, i: int) -> str:
        s = self.entries[i].spec
        return f"[{i + 1}/{len(self.entries)}] {s.model_name} {s.device_type.value} {s.impl.impl_name}"

    def update(self) -> None:
        for i, e in enumerate(self.entries):
            line = e.state + (f" ({e.seconds:.0f} s)" if e.seconds is not None else "")
            if self.shown.get(i) != e.state and not self.tty:
                self.say(f"{self.label(i)}: {line}")
            self.shown[i] = e.state
        if self.tty:
            rows = [f"{self.label(i):60} {e.state}" + (f"  {e.seconds:.0f} s" if e.seconds is not None else "")
                    for i, e in enumerate(self.entries)]
            sys.stdout.write((f"\x1b[{self.drawn}F" if self.drawn else "") + "".join(r[:150] + "\x1b[K\n"
                                                                                      for r in rows))
            sys.stdout.flush()
            self.drawn = len(rows)


def connect(address: str) -> tuple[Any, str]:
    """Join the cluster with this checkout as every task's working directory; the dashboard URL if it is up."""
    import os

    _reachable(address)
    env = {k: os.environ[k] for k in PASS_ENV if os.environ.get(k)}
    try:
        context = ray.init(address=address, runtime_env={"working_dir": str(REPO_ROOT), "excludes": EXCLUDES,
                                                         "env_vars": env},
                           logging_level="ERROR", log_to_driver=False)
    except Exception as exc:  # noqa: BLE001 - ConnectionError, RuntimeError, ValueError from Ray
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise RayMatrixError(f"--address {address}: no Ray cluster to join ({first})") from None
    return context, getattr(context, "dashboard_url", "") or ""


def _reachable(address: str) -> None:
    """HOST:PORT answers TCP within CONNECT_TIMEOUT_S (Ray itself would retry a dead head for minutes)."""
    import socket

    if address == "auto" or address.startswith("ray://"):
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise RayMatrixError(f"--address {address!r}: auto, or HOST:PORT of the cluster's head")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise RayMatrixError(f"--address {address}: the head does not answer ({exc.strerror or exc})") from None


def live_nodes() -> dict[str, dict]:
    """Node id -> {'name', 'resources'} of every live node."""
    return {n["NodeID"]: {"name": n.get("NodeName") or n.get("NodeManagerAddress", "?"),
                          "resources": n.get("Resources", {})} for n in ray.nodes() if n.get("Alive")}


def missing(resource: str, nodes: dict[str, dict]) -> str | None:
    return missing_resource(resource.removeprefix("device_"), [n["resources"] for n in nodes.values()])


class Driver:
    """One tier on the cluster: submit, watch, retry, cancel; the results in the order of ``specs``."""

    def __init__(self, tier, specs, workflow_args, *, out: Path, retries: int, compare_to: str | None,
                 say: Callable[[str], None], tty: bool = False) -> None:
        self.tier, self.workflow_args, self.compare_to, self.retries, self.say = (
            tier, workflow_args, compare_to, retries, say)
        self.runs = out / "runs"
        self.entries = [Entry(s, EntryResult(s), device_resource(s.device_type.value)) for s in specs]
        self.progress = Progress(self.entries, say, tty)
        self.deadline = time.monotonic() + max(1, len(specs)) * (ENTRY_TIMEOUT_S + STOP_GRACE_S)
        self.pending: list[Attempt] = []
        self.interrupted_attempts: list[tuple[Attempt, str]] = []
        node = ray.get_runtime_context().get_node_id()  # the collector writes where the driver reads
        ray.cloudpickle.register_pickle_by_value(matrix_collector)  # its code travels, not an import of it
        self.collector = ray.remote(Collector).options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(str(self.runs))
        self.task = ray.remote(run_spec)

    def submit(self, index: int) -> None:
        e = self.entries[index]
        number = len(e.attempts) + 1
        run_id = make_run_id(e.spec.model_id, self.tier.workflow) + (f"_attempt{number}" if number > 1 else "")
        ref = self.task.options(num_cpus=0, resources=spec_resources(e.spec.device_type.value), max_retries=0,
                                name=f"{e.spec.model_id} attempt {number}").remote(
            self.collector, f"{index}.{number}", e.spec, self.tier, self.workflow_args, self.compare_to, run_id,
            ENTRY_TIMEOUT_S, STOP_GRACE_S)
        attempt = Attempt(index, number, run_id, ref, time.monotonic())
        e.attempts.append(attempt)
        e.state = "queued" + (f" (attempt {number})" if number > 1 else "")
        self.pending.append(attempt)

    def run(self) -> bool:
        """Every spec to its end; True when Ctrl-C stopped the tier."""
        nodes = live_nodes()
        for i, e in enumerate(self.entries):
            lacking = missing(e.resource, nodes)
            if lacking is None:
                self.submit(i)
            else:
                self._not_run(e, f"no node of the Ray cluster offers resource {lacking} (a host with that "
                                 f"hardware joins with: python3 scripts/ray_node.py --address HEAD:PORT)")
        try:
            while self.pending:
                self._step()
        except KeyboardInterrupt:
            self._cancel_all()
            return True
        finally:
            self.progress.update()
        return False

    def _not_run(self, e: Entry, reason: str) -> None:
        e.result.not_run, e.state = reason, f"NOT RUN: {reason}"

    def _step(self) -> None:
        refs = [a.ref for a in self.pending]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=POLL_S, fetch_local=False)
        for attempt in [a for a in self.pending if a.ref in ready]:
            self.pending.remove(attempt)
            self._finish(attempt)
        self._watch()
        self.progress.update()

    def _watch(self) -> None:
        """Running states from the collector; queued specs whose resource no live node offers any more are
        NOT RUN; past the tier's deadline every task is cancelled."""
        try:
            states = ray.get(self.collector.all_states.remote(), timeout=GET_TIMEOUT_S)
        except (ray.exceptions.GetTimeoutError, ray.exceptions.RayError):
            states = {}
        nodes = live_nodes()
        for a in list(self.pending):
            e = self.entries[a.spec_index]
            found = states.get(f"{a.spec_index}.{a.number}")
            if found and a.started is None and "node_id" in found:
                a.started = time.monotonic()
                a.node = nodes.get(found["node_id"], {}).get("name", found["node_id"][:8])
                e.state = f"running on {a.node}" + (f" (attempt {a.number})" if a.number > 1 else "")
            lacking = missing(e.resource, nodes) if a.started is None else None
            if lacking is not None:
                ray.cancel(a.ref, force=True)
                self.pending.remove(a)
                self._not_run(e, f"no live node offers resource {lacking} any more (the one that did died)")
            elif a.started is not None:
                e.seconds = time.monotonic() - a.started
        if time.monotonic() > self.deadline:
            for a in list(self.pending):
                ray.cancel(a.ref, force=True)
                self.pending.remove(a)
                self._not_run(self.entries[a.spec_index], "the tier ran past its deadline; cancelled")

    def _finish(self, a: Attempt, cancelled: bool = False) -> None:
        e = self.entries[a.spec_index]
        run_dir = self.runs / a.run_id
        if a.started is not None:
            e.seconds = time.monotonic() - a.started
        try:
            out = ray.get(a.ref, timeout=GET_TIMEOUT_S)
        except ray.exceptions.TaskCancelledError:
            self._finish_cancelled(a)
            return
        except ray.exceptions.RayTaskError as exc:  # the task itself raised: a FAIL row, with its run if any
            e.result.run_dir, e.result.exit_code = run_dir, 1
            e.result.notes.append(f"the task failed: {str(exc).strip().splitlines()[-1]}")
            self.say(f"{self.progress.label(a.spec_index)}: the task raised:\n{_tail(str(exc), 20)}")
            e.state = "FAIL (task error)"
            return
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError) as exc:
            if cancelled:
                self._finish_cancelled(a)
            else:
                self._died(a, e, type(exc).__name__)
            return
        if out.get("cancelled"):
            self._finish_cancelled(a)
            return
        if out.get("not_run"):
            node = live_nodes().get(out.get("node_id", ""), {}).get("name", "its node")
            self._not_run(e, f"{out['not_run']} (node {node})")
            return
        e.result.run_dir, e.result.exit_code = run_dir, out.get("exit_code")
        e.state = _verdict_of(run_dir, out.get("exit_code"))

    def _died(self, a: Attempt, e: Entry, why: str) -> None:
        """The node or worker running the attempt died: keep its partial run as interrupted, try again."""
        where = a.node or "a node"
        note = f"attempt {a.number} on {where} interrupted: the node or its worker died ({why})"
        e.result.notes.append(note + f"; its partial run is in {self.runs / a.run_id}")
        self.interrupted_attempts.append((a, note))
        mark_interrupted(self.runs / a.run_id, note)
        spec_json = self.runs / a.run_id / "model_spec.json"
        if (self.runs / a.run_id / "manifest.json").is_file() and not spec_json.is_file():
            e.spec.write(spec_json)  # died before run.py wrote it: the report of the partial run needs it
        if a.number <= self.retries and time.monotonic() < self.deadline:
            self.say(f"{self.progress.label(a.spec_index)}: {note}; retrying")
            self.submit(a.spec_index)
        else:
            self._not_run(e, f"{note}; no retry left (--retries {self.retries})")

    def _cancel_all(self) -> None:
        """Ctrl-C: every task is cancelled (a running one gets KeyboardInterrupt, stops its run.py with SIGINT
        and sends its run home), waited for, and what did not end in time is killed."""
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            self.say(f"interrupted: cancelling {len(self.pending)} task(s) (at most {STOP_GRACE_S} s for them to "
                     f"stop and send their runs home)")
            try:
                ray.get(self.collector.stop.remote(), timeout=GET_TIMEOUT_S)
            except ray.exceptions.RayError:
                pass  # no collector: the tasks are killed below, and their run.py die with them
            for a in self.pending:
                if a.started is None:
                    ray.cancel(a.ref, force=False)  # still queued: it never starts
            refs = [a.ref for a in self.pending]
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=STOP_GRACE_S + GET_TIMEOUT_S)
            for a in list(self.pending):
                self.pending.remove(a)
                if a.ref in ready:
                    self._finish(a, cancelled=True)
                else:  # did not stop in time: its worker is killed (run.py dies with it, PR_SET_PDEATHSIG)
                    ray.cancel(a.ref, force=True)
                    self._finish_cancelled(a)
        finally:
            signal.signal(signal.SIGINT, previous)

    def _finish_cancelled(self, a: Attempt) -> None:
        e = self.entries[a.spec_index]
        run_dir = self.runs / a.run_id
        if a.started is None and not run_dir.is_dir():
            self._not_run(e, "the matrix was interrupted (Ctrl-C) before this spec")
        else:
            e.result.run_dir = run_dir if run_dir.is_dir() else None
            self._not_run(e, f"interrupted (Ctrl-C) while it ran; its partial run is in {run_dir}")

    def results(self) -> list[EntryResult]:
        return [e.result for e in self.entries]


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _verdict_of(run_dir: Path, exit_code: int | None) -> str:
    try:
        verdict = json.loads((run_dir / "reports" / "report.json").read_text())["verdict"]["result"]
    except (OSError, ValueError, KeyError, TypeError):
        verdict = "FAIL (no report)"
    return f"{verdict} (exit {exit_code})"


def index_runs(results: list[EntryResult], interrupted: list[Path], say: Callable[[str], None]) -> int:
    """Every run brought home into the driver's history store (``TT_HISTORY_URL``, else its SQLite): finished
    runs from their report, interrupted attempts by rebuilding their report (``run.py --workflow reports``,
    which indexes it). The number indexed."""
    from history.store import HistoryError, open_store, shown_url
    from records.report import ReportRecord

    count = 0
    try:
        with open_store() as store:
            for r in results:
                report = r.run_dir / "reports" / "report.json" if r.run_dir else None
                if report is not None and report.is_file() and r.run_dir not in interrupted:
                    store.index(ReportRecord.read(report), r.run_dir)
                    count += 1
            url = store.url
    except (HistoryError, OSError, ValueError) as exc:
        say(f"history: {exc}; the run directories keep everything")
        return count
    for run_dir in interrupted:
        if not (run_dir / "manifest.json").is_file():
            say(f"history: {run_dir.name} is not indexed: its node died before its run directory came home")
            continue
        done = subprocess.run([sys.executable, str(REPO_ROOT / "run.py"), "--workflow", "reports",
                               "--output-dir", str(run_dir), "--ignore-verdict"], capture_output=True,
                              text=True, timeout=600, cwd=REPO_ROOT)
        count += done.returncode == 0
        if done.returncode != 0:
            say(f"history: the report of the interrupted {run_dir.name} could not be built (exit "
                f"{done.returncode}): {_tail(done.stdout + done.stderr, 3)}")
    say(f"history: {count} run(s) indexed in {shown_url(url)}")
    return count


def run_tier_on_ray(tier, specs, workflow_args, *, address: str, out: Path, retries: int, compare_to: str | None,
                    say: Callable[[str], None], tty: bool = False) -> tuple[list[EntryResult], bool, int]:
    """The tier on the cluster: results (in ``specs`` order), whether Ctrl-C stopped it, the number of nodes."""
    _, dashboard = connect(address)
    try:
        if dashboard:
            say(f"Ray dashboard: {dashboard if '://' in dashboard else 'http://' + dashboard}")
        nodes = live_nodes()
        for n in nodes.values():
            devices = sorted(k for k in n["resources"] if k.startswith("device_"))
            say(f"node {n['name']}: {', '.join(devices) or 'no device resource (runs no spec)'}")
        driver = Driver(tier, specs, workflow_args, out=out, retries=retries, compare_to=compare_to, say=say,
                        tty=tty)
        interrupted = driver.run()
    finally:
        ray.shutdown()
    results = driver.results()
    for r in results:
        for note in r.notes:
            say(f"{r.spec.model_name} {r.spec.device_type.value} {r.spec.impl.impl_name}: {note}")
    index_runs(results, [driver.runs / a.run_id for a, _ in driver.interrupted_attempts], say)
    return results, interrupted, len(nodes)
