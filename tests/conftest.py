"""Shared fixtures: the real CPU engine, the converted SmolLM2 model and one real server per session.

They use the tool's own code paths (workflows.venvs, workflows.host_setup, the local server
backend), so a test run on a fresh machine builds exactly what `run.py` would, and the
integration tests of every package talk to one server instead of each starting their own.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import FakeServerProcess, free_port, live_group_members
from tests.scheduling import SHARED_SERVER_RELEASE

pytest_plugins = ["tests.scheduling"]

SERVED_MODEL = "SmolLM2-135M-Instruct"
REPO_ROOT = Path(__file__).resolve().parents[1]
K8S_TOOLS_UNAVAILABLE = 3  # scripts/ci/fetch_helm.py's exit code when npm or the registry cannot be reached


def pytest_configure(config) -> None:
    """Runs made by tests index into a run history of this test session, not the checkout's: a
    release compares with the last run of its spec on the host by default, and a developer's own
    runs (or another session's) must not become a test's baseline. Tests of the history itself
    name their stores explicitly; an outer TT_HISTORY_URL (a CI database) is kept."""
    if "TT_HISTORY_URL" not in os.environ:
        folder = Path(tempfile.mkdtemp(prefix="tt-test-history-"))
        os.environ["TT_HISTORY_URL"] = f"sqlite:///{folder / 'history.sqlite3'}"
    # Likewise standby servers (workflows/servers/standby.py): a developer's own `--workflow server` must not be
    # reused by a test's --local-server run, nor a test's by the developer; always this session's own folder.
    os.environ["TT_STANDBY_DIR"] = tempfile.mkdtemp(prefix="tt-test-standby-")


@dataclass
class RealServer:
    base_url: str
    api_key: str
    served_model_name: str
    model_dir: Path
    log_path: Path
    handle: object  # the local backend's ServerHandle (pgid, describe_how_to_reach, ...)


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The packaged SmolLM2 converted to a HF directory (built once, cached across runs)."""
    from workflows.host_setup import ensure_packaged_smollm2

    return ensure_packaged_smollm2()


@pytest.fixture(scope="session")
def real_cpu_server(smollm2_dir, tmp_path_factory, pytestconfig):
    """vLLM's CPU build serving SmolLM2 through the local backend, auth enforced, for the session.

    The tests that use it run one after another (tests/scheduling.py groups them), and the server is
    stopped after the last of them, not at the end of the session."""
    from workflows.catalog import load_catalog
    from workflows.readiness import wait_until_ready
    from workflows.servers import ServerLaunch, start_server

    spec = load_catalog().specs["id_vllm-cpu_SmolLM2-135M-Instruct_cpu"]
    run_dir = tmp_path_factory.mktemp("real_server")
    spec_path = spec.write(run_dir / "model_spec.json")
    api_key = secrets.token_urlsafe(24)
    launch = ServerLaunch(spec=spec, spec_json_path=spec_path, run_dir=run_dir, service_port=free_port(),
                          api_key=api_key, weights_dir=smollm2_dir)
    handle = start_server("local", launch)
    try:
        wait_until_ready(handle, bearer=api_key, timeout_s=900)
        pytestconfig.stash[SHARED_SERVER_RELEASE] = lambda: stop_and_check_group(handle)
        yield RealServer(handle.base_url, api_key, handle.served_model_name, smollm2_dir, handle.log_path, handle)
    finally:
        stop_and_check_group(handle)


def stop_and_check_group(handle) -> None:
    """Stop a local server and fail if any live member of its process group outlived the stop."""
    handle.stop()
    left = live_group_members(handle.pgid)
    assert not left, f"the real server's processes outlived its stop: {left}"


@pytest.fixture
def fake_server_process():
    """Start shipped fake servers (``FakeServerProcess(module, *args)``); all are stopped afterwards."""
    started: list[FakeServerProcess] = []

    def start(module: str = "benchmarking.stub_server", *args: str) -> FakeServerProcess:
        started.append(FakeServerProcess(module, *args))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@dataclass(frozen=True)
class K8sTools:
    helm: str
    kubectl: str


@pytest.fixture(scope="session")
def k8s_tools() -> K8sTools:
    """The real ``helm`` v3.17.3 and ``kubectl`` v1.31.9 (pinned npm package, checksums; fetched once
    by ``scripts/ci/fetch_helm.py`` and cached). Skips with the fetcher's reason only where they cannot
    be fetched, and fails instead under REQUIRE_HELM=1 (CI fetched them first)."""
    done = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "ci" / "fetch_helm.py")],
                          capture_output=True, text=True, timeout=600)
    if done.returncode == K8S_TOOLS_UNAVAILABLE:
        if os.environ.get("REQUIRE_HELM") == "1":
            pytest.fail(f"REQUIRE_HELM=1 but the real helm/kubectl are not available: {done.stderr.strip()}")
        pytest.skip(f"real helm/kubectl not available: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr  # a checksum mismatch is a failure, never a skip
    helm, kubectl = done.stdout.splitlines()[:2]
    return K8sTools(helm=helm, kubectl=kubectl)
