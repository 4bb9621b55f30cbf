"""The driver's side of ``--executor ray``'s trip home: the collector actor on the driver's node, the snapshot
format (a gzipped tar of a run directory) and the dead attempt's manifest.

Why a module of its own, standard library only: the driver ships the collector's class by value (its code, not
a reference to this module), so the actor starts on the driver's node whatever that node's worker can import;
the tasks, which run the project's code, import this module from the shipped checkout as usual.
"""
from __future__ import annotations

import io
import json
import shutil
import tarfile
import time
from pathlib import Path


def pack(run_dir: Path) -> bytes:
    """The run directory as a gzipped tar (members relative to it)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        if run_dir.is_dir():
            for path in sorted(run_dir.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    tar.add(path, arcname=str(path.relative_to(run_dir)), recursive=False)
    return buf.getvalue()


def unpack(blob: bytes, target: Path) -> None:
    """Replace ``target`` with the snapshot: written beside it and renamed, so a reader never sees half of one."""
    part = target.with_name(target.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        tar.extractall(part, filter="data")
    old = target.with_name(target.name + ".old")
    if target.exists():
        target.rename(old)
    part.rename(target)
    shutil.rmtree(old, ignore_errors=True)


class Collector:
    """On the driver's node (``ray.remote`` with node affinity): takes snapshots into ``runs_root/<run_id>``
    and keeps each attempt's state for the progress table."""

    def __init__(self, runs_root: str) -> None:
        self.root = Path(runs_root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.states: dict[str, dict] = {}
        self.stopping = False

    def stop(self) -> None:
        """Ctrl-C on the driver: every task stops its run.py at its next look (every snapshot period)."""
        self.stopping = True

    def should_stop(self) -> bool:
        return self.stopping

    def started(self, attempt: str, node_id: str, run_id: str) -> None:
        self.states[attempt] = {"node_id": node_id, "run_id": run_id, "started": time.time()}

    def files(self, attempt: str, run_id: str, blob: bytes) -> int:
        unpack(blob, self.root / run_id)
        self.states.setdefault(attempt, {})["snapshots"] = self.states.get(attempt, {}).get("snapshots", 0) + 1
        return len(blob)

    def all_states(self) -> dict[str, dict]:
        return dict(self.states)


def mark_interrupted(run_dir: Path, note: str) -> None:
    """The dead attempt's manifest says what happened: status interrupted, the running step failed with why."""
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    path = run_dir / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    manifest["status"], manifest["ended"] = "interrupted", manifest.get("ended") or now
    for step in manifest.get("steps", []):
        if step.get("status") == "running":
            step.update(status="failed", ended=now, detail=note)
    path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
