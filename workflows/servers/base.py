"""What every server backend receives (ServerLaunch) and returns (ServerHandle).

Why one handle type for three very different servers (a local process, a container, someone
else's URL): the client workflows, readiness and teardown must not care which one they measured.
"""

from __future__ import annotations

import errno
import os
import re
import socket
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from contracts import REPO_ROOT
from contracts.model_spec import DeviceType, ModelSpec
from contracts.openai_http import bearer_headers

# The launcher inside images and for --local-server (never imported: it runs in the engine's python).
LAUNCHER_PATH = REPO_ROOT / "vllm-tt-metal" / "src" / "run_vllm_api_server.py"


class ServerStartError(Exception):
    """The server could not be started or reached; the message is one line for the user."""


class ServerDied(ServerStartError):
    """The server process/container exited while we waited for it; carries its exit code and log tail."""

    def __init__(self, what: str, exit_code: int | None, log_tail: str, log_path: Path | None = None):
        self.exit_code = exit_code
        self.log_tail = log_tail
        self.log_path = log_path
        where = f" ({log_path})" if log_path else ""
        super().__init__(f"{what} exited with code {exit_code} during start-up; last lines of its log{where}:\n"
                         f"{log_tail.rstrip()}")


@dataclass
class ServerLaunch:
    """Everything a backend needs to start one server for one run."""

    spec: ModelSpec
    spec_json_path: Path
    run_dir: Path
    service_port: int
    bind_host: str = "127.0.0.1"
    api_key: str | None = None          # the key the server must enforce (None: no auth)
    weights_dir: Path | None = None
    device_ids: list[int] | None = None
    dev_mode: bool = False
    interactive: bool = False
    server_log_path: Path | None = None  # default: run_dir/server.log
    extra_env: dict = field(default_factory=dict)
    # Optional additions (defaults keep the contract above unchanged):
    docker_image: str | None = None      # --override-docker-image
    shm_size: str | None = None          # default from spec["shm_size"] or "16G"
    secret_env: dict = field(default_factory=dict)  # HF_TOKEN etc. for the container's env file
    extra_mounts: list[tuple[str, str, bool]] = field(default_factory=list)  # (host, container, read_only)
    # --workflow server leaves the server up; any other run must not leave it behind even if
    # run.py itself is SIGKILLed (the local backend then asks the kernel to SIGTERM it).
    outlive_orchestrator: bool = False

    def __post_init__(self) -> None:
        self.spec_json_path = Path(self.spec_json_path)
        self.run_dir = Path(self.run_dir)
        self.service_port = int(self.service_port)
        if self.weights_dir is not None:
            self.weights_dir = Path(self.weights_dir)
        if self.server_log_path is None:
            self.server_log_path = self.run_dir / "server.log"
        self.server_log_path = Path(self.server_log_path)

    @property
    def model_name(self) -> str:
        return self.spec.model_name

    @property
    def served_model_name(self) -> str:
        return served_model_name(self.spec)

    @property
    def device_type(self) -> DeviceType:
        return self.spec.device_type


def served_model_name(spec: ModelSpec) -> str:
    """Same precedence as the launcher: served_model_name > hf_model_repo > model_name."""
    return str(spec.served_model_name or spec.device_model_spec.vllm_args.get("served_model_name")
               or spec.hf_model_repo or spec.model_name)


def connect_host(bind_host: str) -> str:
    """Where a client on this host connects to a server bound on ``bind_host``."""
    return "127.0.0.1" if bind_host in ("0.0.0.0", "", "*") else ("[::1]" if bind_host == "::" else bind_host)


def check_port_free(host: str, port: int) -> None:
    """Fail before launching if something already listens on host:port (one clear line)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ServerStartError(
                    f"port {port} on {host} is already in use: stop whatever listens there or pick "
                    f"another --service-port") from None
            raise ServerStartError(f"cannot bind {host}:{port}: {exc.strerror}") from None


def check_launch_port_free(launch: ServerLaunch) -> None:
    """``check_port_free`` for a launch; with ``--device-id`` the line says how a second card's server coexists
    (one server per port: two of one model on one port would shadow each other)."""
    try:
        check_port_free(launch.bind_host, launch.service_port)
    except ServerStartError as exc:
        if not launch.device_ids:
            raise
        ids = ",".join(str(i) for i in launch.device_ids)
        raise ServerStartError(f"{exc}; a server for --device-id {ids} beside another card's needs its own port: "
                               f"--service-port {launch.service_port + 1 + min(launch.device_ids)}, say") from None


def tail_file(path: Path | None, n: int = 40) -> str:
    """Last ``n`` lines of a (possibly large, possibly missing) text file."""
    if path is None or not Path(path).is_file():
        return ""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        block, data = 8192, b""
        while size > 0 and data.count(b"\n") <= n:
            step = min(block, size)
            size -= step
            fh.seek(size)
            data = fh.read(step) + data
            block *= 2
    lines = data.decode("utf-8", "replace").splitlines()
    return "\n".join(lines[-n:])


def safe_name(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]+", "-", text).strip("-").lower() or "model"


class ServerHandle(ABC):
    """A running (or attached) server. ``stop`` is idempotent: graceful first, forced after timeout."""

    kind: str = "?"

    def __init__(self, base_url: str, served_model_name: str, log_path: Path | None):
        self.base_url = base_url.rstrip("/")
        self.served_model_name = served_model_name
        self.log_path = log_path
        self.detached = False

    @abstractmethod
    def is_alive(self) -> bool: ...

    @abstractmethod
    def exit_code(self) -> int | None: ...

    def log_tail(self, n: int = 40) -> str:
        return tail_file(self.log_path, n)

    @abstractmethod
    def stop(self, timeout: float = 15) -> None: ...

    @abstractmethod
    def describe_how_to_reach(self, bearer: str | None = None) -> str: ...

    def detach(self) -> "ServerHandle":
        """Leave the server running after run.py exits (``--workflow server``); stop() becomes a no-op."""
        self.detached = True
        return self

    def died(self, what: str) -> ServerDied:
        return ServerDied(what, self.exit_code(), self.log_tail(40), self.log_path)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.kind} {self.base_url} model={self.served_model_name!r}>"


def reach_lines(base_url: str, served: str, bearer: str | None) -> list[str]:
    """The stable part of the ``--workflow server`` message (parsed by tests and users' scripts)."""
    auth_header = "".join(f' -H "{name}: {value}"' for name, value in bearer_headers(bearer).items())
    return [
        f"Server URL: {base_url}",
        f"Served model: {served}",
        f"Bearer: {bearer if bearer else '(none: auth disabled)'}",
        f"Try: curl -s {base_url}/v1/models{auth_header}",
    ]
