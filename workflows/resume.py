"""Resume a run that run.py did not live to finish (SIGKILL, the OOM killer, a lost terminal).

Why: a benchmark sweep can take an hour; a rerun of the same command after a hard kill must keep
every finished point and its per-request rows and measure only what is missing, not start over in
a new run directory. Ctrl-C and failures end a run properly (status, report); only a kill leaves
it behind unfinished, and only the files can tell.

How a killed run is recognised, from what each run leaves in its directory:

- ``run.pid.json`` names run.py's pid and that process's start time; it is written when the run
  starts and removed when it ends in any way run.py sees. Present, with its process gone (or the
  pid now another process), means run.py was killed.
- ``client.pid.json`` names the client workflows running at that moment (each leads its own process
  group; a release runs evals and tests side by side, so there may be two). A client gets SIGTERM
  when run.py dies and may still be flushing for a few seconds: the rerun stops each, by pid and
  start time, before it uses the directory, so two writers never share it.

A rerun without ``--output-dir`` resumes the newest run of the same model and workflow under the
runs root when that run was killed and its ``cli_args.json`` equals this run's arguments; anything
else starts a new run. Stdlib only.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.retry import GaveUp, NotYet, retry
from workflows.processes import process_start_time

OWNER_FILE = "run.pid.json"
CLIENT_FILE = "client.pid.json"
ORPHAN_STOP_TIMEOUT_S = 15.0


def _identity(pid: int) -> dict[str, Any]:
    return {"pid": pid, "start_time": process_start_time(pid)}


def _alive(identity: Any) -> bool:
    """True when the process a pid file names still runs (same pid, same start time)."""
    if not isinstance(identity, dict) or not isinstance(identity.get("pid"), int):
        return False
    now = process_start_time(identity["pid"])
    return now is not None and now == identity.get("start_time")


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data) + "\n")
    os.replace(tmp, path)


def mark_owner(run_dir: Path) -> None:
    """This run.py owns ``run_dir`` until ``release_owner``."""
    _write(Path(run_dir) / OWNER_FILE, _identity(os.getpid()))


def release_owner(run_dir: Path) -> None:
    (Path(run_dir) / OWNER_FILE).unlink(missing_ok=True)


_CLIENTS_LOCK = threading.Lock()  # clients of one stage start and end in threads of their own


def _clients(data: Any) -> list[dict]:
    """The entries of a client pid file: ``{"clients": [...]}``, or one entry (a run of an older version)."""
    if isinstance(data, dict) and isinstance(data.get("clients"), list):
        return [c for c in data["clients"] if isinstance(c, dict)]
    return [data] if isinstance(data, dict) and "pid" in data else []


def mark_client(run_dir: Path, pid: int, workflow: str) -> None:
    """A client workflow (leading its own process group) now writes into ``run_dir``; the others
    running beside it stay recorded."""
    path = Path(run_dir) / CLIENT_FILE
    with _CLIENTS_LOCK:
        entries = [c for c in _clients(_read(path)) if c.get("pid") != pid]
        _write(path, {"clients": [*entries, {**_identity(pid), "workflow": workflow}]})


def release_client(run_dir: Path, pid: int | None = None) -> None:
    """Client ``pid`` ended (None: every client); the file goes when no client is left in it."""
    path = Path(run_dir) / CLIENT_FILE
    with _CLIENTS_LOCK:
        entries = [] if pid is None else [c for c in _clients(_read(path)) if c.get("pid") != pid]
        if entries:
            _write(path, {"clients": entries})
        else:
            path.unlink(missing_ok=True)


@dataclass(frozen=True)
class KilledRun:
    path: Path
    run_id: str


class RunInProgress(ValueError):
    """The run directory belongs to a run.py that is still running; the message is one line."""


def find_killed_run(runs_root: Path, model_id: str, workflow: str, cli_args: dict) -> KilledRun | None:
    """The newest run of ``model_id``/``workflow`` under ``runs_root`` when run.py was killed during
    it and it was started with the same arguments; else None."""
    try:
        candidates = sorted((p for p in Path(runs_root).iterdir() if (p / "manifest.json").is_file()),
                            key=lambda p: p.name, reverse=True)
    except OSError:
        return None
    for path in candidates:
        manifest = _read(path / "manifest.json")
        if not isinstance(manifest, dict) or (manifest.get("model_id"), manifest.get("workflow")) != (
                model_id, workflow):
            continue
        # Only the newest run of this model and workflow: an older killed run was superseded.
        return _killed(path, manifest, cli_args)
    return None


def killed_run_at(path: Path, model_id: str, workflow: str, cli_args: dict) -> KilledRun | None:
    """``--output-dir PATH``: the run in PATH when its run.py was killed and this is the same command (resumed,
    its orphans stopped, as without --output-dir); RunInProgress when its run.py still runs (two runs must
    never write one directory); else None."""
    manifest = _read(Path(path) / "manifest.json")
    if not isinstance(manifest, dict) or (manifest.get("model_id"), manifest.get("workflow")) != (model_id, workflow):
        return None
    owner = _read(Path(path) / OWNER_FILE)
    if manifest.get("status") == "running" and _alive(owner):
        raise RunInProgress(f"--output-dir {path} belongs to a run that is still going (run.py pid "
                            f"{owner['pid']}): wait for it, stop it, or pick another directory")
    return _killed(Path(path), manifest, cli_args)


def _killed(path: Path, manifest: dict, cli_args: dict) -> KilledRun | None:
    owner = _read(path / OWNER_FILE)
    if manifest.get("status") != "running" or owner is None or _alive(owner):
        return None
    if _read(path / "cli_args.json") != json.loads(json.dumps(cli_args, default=str)):
        return None
    return KilledRun(path, str(manifest.get("run_id") or path.name))


def stop_orphans(run_dir: Path, timeout: float = ORPHAN_STOP_TIMEOUT_S) -> list[str]:
    """Stop what the killed run left running in ``run_dir`` (its client, then its server), by pid
    and start time; one line per process group stopped."""
    lines = []
    for name, what in ((CLIENT_FILE, "client workflow"), ("server.pid.json", "server")):
        data = _read(Path(run_dir) / name)
        entries = _clients(data) if name == CLIENT_FILE else [data] if isinstance(data, dict) else []
        for info in entries:
            if info.get("standby"):
                continue  # a standby server the killed run reused: the user's, left running
            pgid = info.get("pgid", info.get("pid"))
            # Without a start time a pid may be anyone's by now: only a process known to be the same is stopped.
            if not _alive({"pid": pgid, "start_time": info.get("start_time")}):
                continue
            label = f"{what} {info.get('workflow') or ''}".strip()
            lines.append(f"stopped the killed run's {label} (process group {pgid}): {_stop_group(pgid, timeout)}")
        # every entry is handled (stopped, or already gone): a stale one must not outlive the rerun's own records
        if data is not None:
            (Path(run_dir) / name).unlink(missing_ok=True)
    return lines


def _stop_group(pgid: int, timeout: float) -> str:
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return "already gone"

    def ended(_remaining_s: float) -> None:
        if process_start_time(pgid) is not None:
            raise NotYet("still running")

    try:
        retry(f"process group {pgid} to end on SIGTERM", ended, deadline_s=timeout)
        return "ended on SIGTERM"
    except GaveUp:
        pass
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return "ended on SIGTERM"
    return f"killed after {timeout:.0f} s"
