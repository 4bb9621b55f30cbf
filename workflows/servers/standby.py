"""A standby server: the local server ``run.py --workflow server --local-server`` leaves running, reused by
later ``--local-server`` runs of the same spec instead of starting their own.

Why: starting vLLM's CPU server costs 13-17 s on 2 cores, about 10 s of it importing torch and vLLM, and a
model engineer who iterates pays it on every run. A server the user asked to keep running
(``--workflow server``) is recorded here with the fingerprint of everything that shapes what it serves; a
later run whose fingerprint matches attaches to it (ready at once), says so, and leaves it running, as it
found it. Nothing is kept warm that the user did not start: every other run still stops what it started.
``--fresh-server`` starts a server of the run's own even when a standby matches.

The record (``$TT_STANDBY_DIR``, default ``~/.cache/tt-inference-server/standby/<fingerprint>.json``, mode
0600: it holds the server's bearer key) names the process by pid and start time, so a record whose process
has gone, or whose pid now belongs to another process, is removed and never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from workflows.processes import process_start_time
from workflows.servers.base import LAUNCHER_PATH, ServerHandle, ServerLaunch, ServerStartError, reach_lines
from workflows.servers.probe import check_served_model
from workflows.venvs import FINGERPRINT_FILE

STANDBY_DIR_ENV = "TT_STANDBY_DIR"


def standby_dir() -> Path:
    return Path(os.environ.get(STANDBY_DIR_ENV) or Path.home() / ".cache" / "tt-inference-server" / "standby")


def _file_sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


def fingerprint(launch: ServerLaunch, engine_python: Path | None, auth_identity: str) -> str:
    """What a server serves and how: the resolved spec (with every override), the weights, the launcher's code,
    the engine venv's own fingerprint (a rebuilt engine is another server), the bind host and the auth
    (``key_identity``). Two launches with the same fingerprint start servers that answer alike."""
    try:
        spec = json.loads(launch.spec_json_path.read_text())
    except (OSError, ValueError):
        return "unreadable-spec"  # matches no record: a fresh server starts
    spec.pop("cli_args", None)  # the command line (workflow, its args, the port) does not change what is served
    vllm_args = spec.get("device_model_spec", {}).get("vllm_args", {})
    for where in ("port", "host"):  # a standby is reached where it listens
        vllm_args.pop(where, None)
    venv_fingerprint = _file_sha256(engine_python.parent.parent / FINGERPRINT_FILE) if engine_python else "none"
    parts = {"spec": spec, "weights": str(launch.weights_dir or ""), "launcher": _file_sha256(LAUNCHER_PATH),
             "engine_python": str(engine_python or ""), "engine_venv": venv_fingerprint,
             "bind_host": launch.bind_host, "auth": auth_identity, "device_ids": launch.device_ids}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class StandbyRecord:
    """One standby server, as its ``--workflow server`` run recorded it."""

    fingerprint: str
    pid: int
    pgid: int
    start_time: str | None  # the kernel's, in clock ticks since boot (workflows.processes.process_start_time)
    base_url: str
    served_model_name: str
    log_path: str
    run_id: str
    bearer: str | None
    #: (isl, osl) pairs a run attached to this server has warmed up (its first request of each shape is
    #: behind it): later runs skip their warm-up of these (workflows.pipeline.warm_up)
    warmed: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        # read back from JSON as lists: kept as a sorted tuple of (isl, osl) tuples, comparable with the plan's
        object.__setattr__(self, "warmed", tuple(sorted({(int(i), int(o)) for i, o in self.warmed})))

    def with_warmed(self, pairs: list[tuple[int, int]]) -> "StandbyRecord":
        """This record with ``pairs`` added to what is warmed, written back."""
        record = replace(self, warmed=tuple(self.warmed) + tuple(pairs))
        record.write()
        return record

    def path(self) -> Path:
        return standby_dir() / f"{self.fingerprint}.json"

    def write(self) -> Path:
        """Atomically, readable by this user only (the record holds the bearer key)."""
        target = self.path()
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".standby-")
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(asdict(self), fh)
            os.chmod(tmp, 0o600)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    def alive(self) -> bool:
        """Its process still runs and is the same process (pid and start time)."""
        now = process_start_time(self.pid)
        return now is not None and now == self.start_time


def read_standby(fingerprint_hex: str) -> StandbyRecord | None:
    """The live standby for this fingerprint, or None; a record of a process that has gone is removed."""
    path = standby_dir() / f"{fingerprint_hex}.json"
    try:
        record = StandbyRecord(**json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError):
        path.unlink(missing_ok=True)  # unreadable: never trusted, never in the way again
        return None
    if record.fingerprint != fingerprint_hex or not record.alive():
        path.unlink(missing_ok=True)
        return None
    return record


class StandbyServerHandle(ServerHandle):
    """A standby server this run attached to: watched (its death ends the run's clients), never stopped."""

    kind = "standby"

    def __init__(self, record: StandbyRecord):
        super().__init__(record.base_url, record.served_model_name, Path(record.log_path))
        self.record = record
        self.pid = record.pid
        self.pgid = record.pgid

    def is_alive(self) -> bool:
        return self.record.alive()

    def exit_code(self) -> int | None:
        return None

    def stop(self, timeout: float = 15) -> None:
        """Left running: the user started it with ``--workflow server`` and stops it."""

    def not_yet_warmed(self, pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Of ``pairs``, those no earlier run warmed this server up at."""
        return [p for p in pairs if tuple(p) not in set(self.record.warmed)]

    def mark_warmed(self, pairs: list[tuple[int, int]]) -> None:
        """Record ``pairs`` as warmed, for the next run that attaches (a write that fails only costs it a warm-up)."""
        if pairs:
            try:
                self.record = self.record.with_warmed(pairs)
            except OSError:
                pass

    def write_pidfile(self, run_dir: Path) -> None:
        """``server.pid.json`` for this run's memory and CPU sampling, marked standby so that resuming a killed
        run never stops it (``workflows.resume.stop_orphans``)."""
        try:
            (Path(run_dir) / "server.pid.json").write_text(json.dumps({
                "kind": "local", "standby": True, "pid": self.pid, "pgid": self.pgid, "base_url": self.base_url,
                "start_time": self.record.start_time}) + "\n")
        except OSError:
            pass

    def describe_how_to_reach(self, bearer: str | None = None) -> str:
        return "\n".join(reach_lines(self.base_url, self.served_model_name, bearer) + [
            f"Server log: tail -f {self.log_path}",
            f"Stop it: kill -TERM -- -{self.pgid}",
        ])

    def reuse_line(self) -> str:
        return (f"reusing the standby server at {self.base_url} (pid {self.pid}, left running by run "
                f"{self.record.run_id}; same spec fingerprint {self.record.fingerprint}); it keeps running after "
                f"this run (stop it: kill -TERM -- -{self.pgid}; --fresh-server starts this run's own)")


def key_identity(source: str, key: str | None) -> str:
    """What of the auth a standby must share with a run that reuses it: a key the user chose (API_KEY,
    VLLM_API_KEY, JWT_SECRET) by its hash, so a run under another key never gets a server enforcing the
    first; a generated key by kind only (the reusing run takes the standby's key, which it reads here)."""
    if not key:
        return "none"
    if source == "generated":
        return "generated"
    return f"{source}:{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def attach_standby(launch: ServerLaunch, engine_python: Path | None, auth_identity: str,
                   log: Callable[[str], None]) -> StandbyServerHandle | None:
    """The matching standby, checked to answer and serve the spec's model; None when there is none."""
    wanted = fingerprint(launch, engine_python, auth_identity)
    record = read_standby(wanted)
    if record is None:
        return None
    try:
        check_served_model(record.base_url, record.served_model_name, record.bearer, timeout=5.0)
    except ServerStartError as exc:
        log(f"standby server {record.base_url} (pid {record.pid}) did not answer as expected ({exc}); "
            f"starting this run's own server")
        return None
    return StandbyServerHandle(record)


def keep_as_standby(handle: ServerHandle, launch: ServerLaunch, engine_python: Path | None, auth_identity: str,
                    bearer: str | None, run_id: str) -> StandbyRecord | None:
    """Record a local server ``--workflow server`` leaves running, for later runs of its spec to reuse."""
    pid = getattr(handle, "pid", None)
    if handle.kind != "local" or pid is None:
        return None
    record = StandbyRecord(fingerprint=fingerprint(launch, engine_python, auth_identity), pid=pid,
                           pgid=getattr(handle, "pgid", pid), start_time=process_start_time(pid),
                           base_url=handle.base_url, served_model_name=handle.served_model_name,
                           log_path=str(handle.log_path), run_id=run_id, bearer=bearer)
    record.write()
    return record
