"""``--docker-server``: the spec's image as a container, driven through the ``docker`` SDK.

One plan (:class:`DockerRunPlan`) is built from the launch and rendered two ways: as a ``docker run``
command line (``--print-docker-cmd``, tests) and as SDK keyword arguments (the real run), so the two
can never drift apart.

Rules this backend keeps:
- secrets (the API key, HF_TOKEN, ...) go through an env file written 0600 (``--env-file`` on the
  printed command; for the SDK its contents travel in the API request body), never on a command line;
- the port is published on 127.0.0.1 unless ``--bind-host`` says otherwise;
- flags a host may refuse (ulimits, privileged, GPUs) are added only when the spec asks for them,
  and a refusal becomes one clear line;
- the container gets a predictable name and is always removed by ``stop()`` (logs are streamed into
  the run's server log while it runs, so nothing is lost by removing it);
- a TT device's container always mounts ``/dev/hugepages-1G`` (the printed command is for the TT
  host); starting one on a host without it is one line before Docker is asked.

``--interactive`` (``run_interactive``) is the one path through the docker command line: ``docker run
-it`` with a shell as entrypoint, attached to run.py's terminal; the user starts the server in it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from contracts import REPO_ROOT
from contracts.model_spec import DeviceType
from workflows.auth import SECRET_ENV_NAMES
from workflows.servers.media_launch import HUGEPAGES, apply_media_docker_plan, is_media
from workflows.servers.base import (
    ServerHandle,
    ServerLaunch,
    ServerStartError,
    check_launch_port_free,
    connect_host,
    reach_lines,
    safe_name,
)

CONTAINER_HOME = "/home/container_app_user"
CONTAINER_CACHE_ROOT = f"{CONTAINER_HOME}/cache_root"
CONTAINER_WEIGHTS_ROOT = f"{CONTAINER_HOME}/readonly_weights_mount"
CONTAINER_SPEC_DIR = f"{CONTAINER_HOME}/model_spec"
CONTAINER_APP_SRC = f"{CONTAINER_HOME}/app/src"
CONTAINER_APP_UID = 15863  # the server user of every image we build (CONTAINER_APP_UID in the Dockerfiles)
LABEL = "org.tenstorrent.tt-inference-server"
ENV_FILE_NAME = ".server.env"
INTERACTIVE_SHELL = "/bin/bash"  # every image we build is Debian-based and has bash
# What to type in the interactive shell to start the server (the images' own CMD, by engine).
SERVER_START_HINTS = {
    "media": 'exec ${PYTHON_ENV_DIR:-/opt/venv}/bin/python -m uvicorn main:app --lifespan on '
             '--host "$SERVICE_HOST" --port "$SERVICE_PORT"',
    "vllm": "exec ${PYTHON_ENV_DIR:-/opt/venv}/bin/python -u ~/app/src/run_vllm_api_server.py",
}


@dataclass
class DockerRunPlan:
    image: str
    name: str
    env: dict[str, str]                     # non-secret, shown as -e
    secret_env: dict[str, str]              # only in the env file / API body
    env_file: Path
    bind_host: str
    host_port: int
    container_port: int
    mounts: list[tuple[str, str, bool]]     # (host, container, read_only)
    shm_size: str
    devices: list[str] = field(default_factory=list)   # "host:container"
    gpus: bool = False
    ulimits: dict[str, tuple[int, int]] = field(default_factory=dict)
    privileged: bool = False
    cap_add: list[str] = field(default_factory=list)
    command: list[str] | None = None
    labels: dict[str, str] = field(default_factory=dict)
    interactive: bool = False               # -it with a shell entrypoint; the user starts the server


def container_name(launch: ServerLaunch) -> str:
    """Predictable: one model on one port is one container (the port cannot be shared anyway)."""
    return f"tt-inference-server-{safe_name(launch.model_name)}-{launch.service_port}"


def _extra_mounts_from_env(value: str) -> list[tuple[str, str, bool]]:
    """``TT_DOCKER_EXTRA_MOUNTS=/host:/ctr[:ro],...``: host-provided runtimes (dev images, tests)."""
    mounts = []
    for item in filter(None, (v.strip() for v in value.split(","))):
        parts = item.split(":")
        if len(parts) not in (2, 3):
            raise ServerStartError(f"TT_DOCKER_EXTRA_MOUNTS entry {item!r} is not HOST:CONTAINER[:ro]")
        mounts.append((parts[0], parts[1], len(parts) == 3 and parts[2] == "ro"))
    return mounts


def _weights_mount(weights_dir: Path, model_name: str) -> tuple[str, str, str]:
    """(host dir to mount, where it is mounted, container path of the weights).

    An HF cache snapshot holds symlinks into ``../../blobs``: mount the whole ``models--*`` dir so
    they resolve inside the container, and point at the snapshot below it.
    """
    weights_dir = Path(weights_dir)
    dst = f"{CONTAINER_WEIGHTS_ROOT}/{model_name}"
    parts = weights_dir.parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] == "snapshots" and parts[i - 1].startswith("models--"):
            return str(Path(*parts[:i])), dst, f"{dst}/{Path(*parts[i:]).as_posix()}"
    return str(weights_dir), dst, dst


def plan_docker_run(launch: ServerLaunch) -> DockerRunPlan:
    from workflows.host_setup import cache_root

    spec = launch.spec
    options = dict(spec.docker_options)
    image = launch.docker_image or spec.docker_image
    if not image:
        raise ServerStartError(f"model spec {launch.model_name} has no docker_image (use --override-docker-image)")
    model = launch.model_name
    spec_dst = f"{CONTAINER_SPEC_DIR}/{launch.spec_json_path.name}"
    volume = cache_root() / "docker_volumes" / safe_name(model)
    mounts: list[tuple[str, str, bool]] = [(str(volume), CONTAINER_CACHE_ROOT, False)]  # before nested mounts
    env = {"CACHE_ROOT": CONTAINER_CACHE_ROOT, "TT_MODEL_SPEC_JSON_PATH": spec_dst,
           "SERVICE_PORT": str(launch.service_port), "SERVICE_HOST": "0.0.0.0",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    if launch.weights_dir is not None:
        src, dst, weights_path = _weights_mount(launch.weights_dir, model)
        mounts.append((src, dst, True))
        env["MODEL_WEIGHTS_PATH"] = weights_path
    mounts.append((str(launch.spec_json_path), spec_dst, True))
    if launch.dev_mode:
        mounts.append((str(REPO_ROOT / "vllm-tt-metal" / "src"), CONTAINER_APP_SRC, True))
    mounts += list(launch.extra_mounts) + _extra_mounts_from_env(os.environ.get("TT_DOCKER_EXTRA_MOUNTS", ""))

    devices: list[str] = []
    device = launch.device_type
    if device.is_tenstorrent:
        if launch.device_ids:
            devices = [f"/dev/tenstorrent/{i}:/dev/tenstorrent/{i}" for i in launch.device_ids]
        else:
            devices = ["/dev/tenstorrent:/dev/tenstorrent"]
        # Always: the command is for the TT host (--print-docker-cmd may run anywhere); starting a
        # container here checks the host has them (check_hugepages) with one clear line.
        mounts.append((HUGEPAGES, HUGEPAGES, False))
        env["TT_CACHE_PATH"] = f"{CONTAINER_CACHE_ROOT}/tt_metal_cache/cache_{model}/{device.value.upper()}"
    env.update({k: str(v) for k, v in launch.extra_env.items() if k not in SECRET_ENV_NAMES})

    secret_env = {k: str(v) for k, v in launch.secret_env.items() if v}
    secret_env.update({k: str(v) for k, v in launch.extra_env.items() if k in SECRET_ENV_NAMES and v})
    if launch.api_key:
        secret_env["VLLM_API_KEY"] = launch.api_key
    container_port = launch.service_port
    if is_media(spec):
        container_port = apply_media_docker_plan(spec, launch.api_key, env, secret_env, mounts)
    ulimits = {name: (int(v[0]), int(v[1])) if isinstance(v, (list, tuple)) else (int(v), int(v))
               for name, v in (options.get("ulimits") or {}).items()}
    return DockerRunPlan(
        image=image, name=container_name(launch), env=env, secret_env=secret_env,
        env_file=launch.run_dir / ENV_FILE_NAME, bind_host=launch.bind_host, host_port=launch.service_port,
        container_port=container_port, mounts=mounts,
        shm_size=str(launch.shm_size or options.get("shm_size")
                     or ("4g" if device is DeviceType.CPU else "16G")),
        devices=devices, gpus=(device is DeviceType.GPU), ulimits=ulimits, privileged=bool(options.get("privileged")),
        cap_add=list(options.get("cap_add") or []), command=options.get("command"),
        labels={LABEL: "1", f"{LABEL}.run-dir": str(launch.run_dir), f"{LABEL}.model": model},
        interactive=launch.interactive,
    )


def write_env_file(plan: DockerRunPlan) -> Path:
    """The secrets for ``--env-file``: created 0600 before any byte is written."""
    plan.env_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(plan.env_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        for key, value in plan.secret_env.items():
            fh.write(f"{key}={value}\n")
    os.chmod(plan.env_file, 0o600)
    return plan.env_file


def render_cli(plan: DockerRunPlan) -> list[str]:
    args = ["docker", "run"] + (["-it"] if plan.interactive else []) + ["--rm", "--name", plan.name, "--init"]
    for key, value in plan.labels.items():
        args += ["--label", f"{key}={value}"]
    if plan.secret_env:
        args += ["--env-file", str(plan.env_file)]
    for key, value in plan.env.items():
        args += ["-e", f"{key}={value}"]
    args += ["--publish", f"{plan.bind_host}:{plan.host_port}:{plan.container_port}"]
    for src, dst, ro in plan.mounts:
        args += ["--mount", f"type=bind,src={src},dst={dst}" + (",readonly" if ro else "")]
    args += ["--shm-size", plan.shm_size]
    for dev in plan.devices:
        args += ["--device", dev]
    if plan.gpus:
        args += ["--gpus", "all"]
    for name, (soft, hard) in plan.ulimits.items():
        args += ["--ulimit", f"{name}={soft}:{hard}"]
    if plan.privileged:
        args.append("--privileged")
    for cap in plan.cap_add:
        args += ["--cap-add", cap]
    if plan.interactive:
        # A shell instead of the server: the user starts the server by hand (SERVER_START_HINTS).
        return args + ["--entrypoint", INTERACTIVE_SHELL, plan.image]
    args.append(plan.image)
    return args + list(plan.command or [])


def build_docker_run_args(launch: ServerLaunch, *, write_secrets: bool = True) -> list[str]:
    """The equivalent ``docker run`` argv (for ``--print-docker-cmd``); writes the 0600 env file it names."""
    plan = plan_docker_run(launch)
    if write_secrets and plan.secret_env:
        write_env_file(plan)
    return render_cli(plan)


def print_docker_cmd(launch: ServerLaunch) -> str:
    return shlex.join(build_docker_run_args(launch))


def sdk_kwargs(plan: DockerRunPlan) -> dict:
    import docker

    kwargs: dict = dict(
        image=plan.image, name=plan.name, detach=True, init=True, labels=plan.labels,
        environment={**plan.env, **plan.secret_env},
        ports={f"{plan.container_port}/tcp": (plan.bind_host, plan.host_port)},
        mounts=[docker.types.Mount(target=dst, source=src, type="bind", read_only=ro) for src, dst, ro in plan.mounts],
        shm_size=plan.shm_size, devices=[f"{d}:rwm" for d in plan.devices] or None,
    )
    if plan.command:
        kwargs["command"] = plan.command
    if plan.gpus:
        kwargs["device_requests"] = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
    if plan.ulimits:
        kwargs["ulimits"] = [docker.types.Ulimit(name=n, soft=s, hard=h) for n, (s, h) in plan.ulimits.items()]
    if plan.privileged:
        kwargs["privileged"] = True
    if plan.cap_add:
        kwargs["cap_add"] = plan.cap_add
    return {k: v for k, v in kwargs.items() if v is not None}


def explain_refusal(plan: DockerRunPlan, exc: Exception) -> str:
    """Turn a Docker API refusal into one line that says which flag the host refused."""
    text = str(getattr(exc, "explanation", None) or exc).replace("\n", " ")
    if "could not select device driver" in text or "capabilities: [[gpu]]" in text:
        return "this Docker host cannot give the container GPUs (no NVIDIA container runtime): install " \
               "nvidia-container-toolkit or use another --device"
    if "rlimit" in text:
        limits = ", ".join(f"{n}={s}:{h}" for n, (s, h) in plan.ulimits.items())
        return (f"this Docker host refused the ulimits the spec asks for ({limits}): they exceed the daemon's "
                f"hard limits")
    if "apply caps" in text or "operation not permitted" in text:
        return "this Docker host refused --privileged/--cap-add (operation not permitted)"
    if "port is already allocated" in text or "address already in use" in text:
        return f"port {plan.host_port} on {plan.bind_host} is already in use"
    if "Conflict" in text and "already in use" in text:
        return f"a container named {plan.name} already exists: docker rm -f {plan.name}"
    return f"docker refused to start {plan.image}: {text[:300]}"


class DockerServerHandle(ServerHandle):
    kind = "docker"

    def __init__(self, client, container, plan: DockerRunPlan, launch: ServerLaunch):
        super().__init__(f"http://{connect_host(plan.bind_host)}:{plan.host_port}", launch.served_model_name,
                         launch.server_log_path)
        self.client, self.container, self.plan = client, container, plan
        self.name = plan.name
        self._stopped = False
        self._final_code: int | None = None
        self._log_thread = threading.Thread(target=self._stream_logs, name=f"logs-{plan.name}", daemon=True)
        self._log_thread.start()

    def _stream_logs(self) -> None:
        """Copy the container's stdout+stderr into server.log until the container stops."""
        try:
            with open(self.log_path, "ab", buffering=0) as fh:
                for chunk in self.container.logs(stream=True, follow=True, stdout=True, stderr=True):
                    fh.write(chunk)
        except Exception:  # noqa: BLE001 - the container was removed or the daemon went away
            pass

    def _state(self) -> dict:
        try:
            self.container.reload()
            return self.container.attrs.get("State", {})
        except Exception:  # noqa: BLE001 - gone: treat as exited
            return {"Status": "removed", "ExitCode": self._final_code}

    def is_alive(self) -> bool:
        return self._state().get("Status") in ("created", "running", "restarting")

    def exit_code(self) -> int | None:
        state = self._state()
        if state.get("Status") in ("created", "running", "restarting"):
            return None
        return state.get("ExitCode")

    def log_tail(self, n: int = 40) -> str:
        if self._log_thread.is_alive() and not self.is_alive():
            self._log_thread.join(timeout=3)  # let the last lines of a dead container reach server.log
        return super().log_tail(n)

    def stop(self, timeout: float = 15) -> None:
        """docker stop (SIGTERM to the init, SIGKILL after ``timeout``), then remove. Idempotent."""
        if self.detached or self._stopped:
            return
        self._stopped = True
        try:
            self._final_code = self.exit_code()
            self.container.stop(timeout=int(max(1, timeout)))
            self._final_code = self.exit_code()
        except Exception:  # noqa: BLE001 - already stopped or gone
            pass
        try:
            self.container.remove(force=True)
        except Exception:  # noqa: BLE001
            pass
        self._log_thread.join(timeout=5)
        self.plan.env_file.unlink(missing_ok=True)

    def describe_how_to_reach(self, bearer: str | None = None) -> str:
        return "\n".join(reach_lines(self.base_url, self.served_model_name, bearer) + [
            f"Server log: docker logs -f {self.name}",
            f"Stop it: docker rm -f {self.name}",
        ])


def docker_client():
    """A client for DOCKER_HOST (or the default socket), or one clear line why there is none."""
    try:
        import docker
    except ImportError:
        raise ServerStartError("the docker Python SDK is not installed in this venv (pip install docker)") from None
    try:
        client = docker.from_env()
        client.ping()
        return client
    except Exception as exc:  # noqa: BLE001 - DockerException, connection errors, permissions
        where = os.environ.get("DOCKER_HOST", "the default socket")
        raise ServerStartError(f"cannot reach a Docker engine at {where}: {type(exc).__name__}") from None


def ensure_image(client, image: str) -> None:
    import docker

    try:
        client.images.get(image)
        return
    except docker.errors.ImageNotFound:
        pass
    try:
        client.images.pull(image)
    except docker.errors.APIError as exc:
        reason = str(getattr(exc, "explanation", "") or exc).splitlines()[0][:200]
        raise ServerStartError(f"docker image {image} is not available locally and cannot be pulled ({reason}); "
                               f"build it or pass --override-docker-image") from None


def make_cache_volume(path: Path) -> None:
    """The cache volume, writable by the image's server user.

    Why: engines write there at run time (tt-metal's JIT kernels and weight caches, compile caches);
    a directory made by root here is read-only to uid 15863 in the container. Only root can hand it
    over; a rootless engine maps the user itself.
    """
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0 and path.stat().st_uid != CONTAINER_APP_UID:
        os.chown(path, CONTAINER_APP_UID, CONTAINER_APP_UID)


def check_hugepages(plan: DockerRunPlan, hugepages: Path = Path(HUGEPAGES)) -> None:
    """A TT container needs the host's 1 GiB hugepages mounted; say so before docker does, in one line."""
    if any(dst == HUGEPAGES for _, dst, _ in plan.mounts) and not hugepages.exists():
        raise ServerStartError(f"{HUGEPAGES} does not exist on this host: Tenstorrent devices need 1 GiB hugepages "
                               f"(tt-installer sets them up), then start again")


def start_hint(launch: ServerLaunch) -> str:
    """The command that starts the server inside the interactive shell (the image's own CMD)."""
    if launch.spec.docker_options.get("command"):
        return shlex.join(launch.spec.docker_options["command"])
    return SERVER_START_HINTS["media" if is_media(launch.spec) else "vllm"]


def run_interactive(launch: ServerLaunch, call=subprocess.call) -> int:
    """``--docker-server --interactive``: ``docker run -it`` with a shell, attached to this terminal.

    Why the docker CLI and not the SDK: only the CLI hands the container a TTY wired to run.py's own
    terminal. Returns the shell's exit code; the container is removed when the shell exits (--rm).
    """
    check_launch_port_free(launch)
    plan = plan_docker_run(launch)
    plan.interactive = True
    check_hugepages(plan)
    docker_cli = shutil.which("docker")
    if docker_cli is None:
        raise ServerStartError("--interactive runs the docker command line, and no `docker` is on PATH")
    make_cache_volume(Path(plan.mounts[0][0]))
    if plan.secret_env:
        write_env_file(plan)
    try:
        return call([docker_cli, *render_cli(plan)[1:]])
    finally:
        plan.env_file.unlink(missing_ok=True)


def start_docker(launch: ServerLaunch) -> DockerServerHandle:
    import docker

    check_launch_port_free(launch)
    plan = plan_docker_run(launch)
    check_hugepages(plan)
    client = docker_client()
    ensure_image(client, plan.image)
    try:
        old = client.containers.get(plan.name)
        if old.status in ("running", "restarting"):
            raise ServerStartError(f"container {plan.name} is already running: docker rm -f {plan.name}")
        old.remove(force=True)  # a stopped leftover with our predictable name
    except docker.errors.NotFound:
        pass
    make_cache_volume(Path(plan.mounts[0][0]))
    if plan.secret_env:
        write_env_file(plan)  # so a user can rerun the printed command; removed by stop()
    launch.server_log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        container = client.containers.run(**sdk_kwargs(plan))
    except docker.errors.APIError as exc:
        try:
            client.containers.get(plan.name).remove(force=True)  # created but refused to start
        except docker.errors.APIError:
            pass
        plan.env_file.unlink(missing_ok=True)
        raise ServerStartError(explain_refusal(plan, exc)) from None
    return DockerServerHandle(client, container, plan, launch)
