"""``--docker-server``: the argv/SDK plan (no engine needed) and a real container on a real engine.

Real-engine tests are marked ``docker``: they skip when no Docker engine is reachable and FAIL when
``REQUIRE_DOCKER=1`` (CI starts a private dockerd with scripts/ci/docker_engine.sh). The image is
built with no registry by scripts/ci/build_test_image.py: a tiny rootfs holding the project's real
launcher, tagged with the spec's real image name; the host's /usr, the engine venv and its base
interpreter are bind-mounted read-only, and the real SmolLM2 weights through the backend's
normal read-only weights mount.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import secrets
import shlex
import socket
import stat
import sys
from pathlib import Path

import pytest
import requests

from contracts import REPO_ROOT
from contracts.model_spec import DeviceType, ModelSpec
from contracts.openai_http import bearer_headers
from workflows.servers import ServerDied, ServerStartError, start_server
from workflows.servers.docker_server import (
    CONTAINER_WEIGHTS_ROOT,
    LABEL,
    build_docker_run_args,
    check_hugepages,
    container_name,
    explain_refusal,
    plan_docker_run,
    run_interactive,
)

REQUIRE_DOCKER = os.environ.get("REQUIRE_DOCKER") == "1"
IMAGE = "ghcr.io/tenstorrent/tt-inference-server/vllm-cpu-release-ubuntu-22.04-amd64:0.0.0-test"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


test_local = _load(Path(__file__).with_name("test_local.py"), "test_local_helpers")
make_launch, cpu_spec = test_local.make_launch, test_local.cpu_spec


def spec_for(device="cpu", **extra) -> ModelSpec:
    return dataclasses.replace(cpu_spec(), device_type=DeviceType(device), docker_image=IMAGE, **extra)


# ------------------------------------------------------------------------------ plan / argv (no engine)


def test_argv_secrets_only_in_env_file(tmp_path):
    launch = make_launch(tmp_path, spec_for(), api_key="very-secret-key-1", weights_dir=tmp_path,
                         secret_env={"HF_TOKEN": "hf_secret_token"}, port=8123)
    argv = build_docker_run_args(launch)
    line = shlex.join(argv)
    assert "very-secret-key-1" not in line and "hf_secret_token" not in line
    env_file = Path(argv[argv.index("--env-file") + 1])
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert env_file.read_text().splitlines() == ["HF_TOKEN=hf_secret_token", "VLLM_API_KEY=very-secret-key-1"]
    assert argv[:6] == ["docker", "run", "--rm", "--name", container_name(launch), "--init"]
    assert argv[argv.index("--publish") + 1] == "127.0.0.1:8123:8123"
    assert argv[-1] == IMAGE and "--shm-size" in argv
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "--mount"]
    assert f"type=bind,src={tmp_path},dst={CONTAINER_WEIGHTS_ROOT}/SmolLM2-135M-Instruct,readonly" in mounts
    assert any(m.endswith("/model_spec/model_spec.json,readonly") for m in mounts)
    assert any(m.endswith("dst=/home/container_app_user/cache_root") for m in mounts)  # writable cache
    for refused in ("--gpus", "--ulimit", "--privileged", "--device"):
        assert refused not in argv  # not asked for by a CPU spec


def test_bind_host_and_tt_devices_and_gpu(tmp_path):
    launch = make_launch(tmp_path, spec_for("n300"), device_ids=[0, 2], bind_host="0.0.0.0", port=9000)
    argv = build_docker_run_args(launch)
    devices = [argv[i + 1] for i, a in enumerate(argv) if a == "--device"]
    assert devices == ["/dev/tenstorrent/0:/dev/tenstorrent/0", "/dev/tenstorrent/2:/dev/tenstorrent/2"]
    assert "type=bind,src=/dev/hugepages-1G,dst=/dev/hugepages-1G" in argv
    assert argv[argv.index("--publish") + 1] == "0.0.0.0:9000:9000"
    assert "--env-file" not in argv  # no secrets: no file
    argv = build_docker_run_args(make_launch(tmp_path / "g", spec_for("gpu")))
    assert argv[argv.index("--gpus") + 1] == "all"
    argv = build_docker_run_args(make_launch(tmp_path / "t", spec_for("n150")))
    assert "/dev/tenstorrent:/dev/tenstorrent" in argv


def test_tt_command_mounts_hugepages_whatever_this_host_has(tmp_path, monkeypatch):
    """The printed command is for the TT host: the mount must not depend on the host that prints it."""
    monkeypatch.setattr(Path, "exists",
                        lambda self: False if str(self) == "/dev/hugepages-1G" else os.path.exists(self))
    argv = build_docker_run_args(make_launch(tmp_path, spec_for("t3k")))
    assert "type=bind,src=/dev/hugepages-1G,dst=/dev/hugepages-1G" in argv
    cpu = build_docker_run_args(make_launch(tmp_path / "cpu", spec_for("cpu")))
    assert not any("hugepages" in a for a in cpu)


def test_starting_a_tt_container_without_hugepages_is_one_line(tmp_path):
    plan = plan_docker_run(make_launch(tmp_path, spec_for("n150")))
    with pytest.raises(ServerStartError) as info:
        check_hugepages(plan, hugepages=tmp_path / "no-hugepages")
    assert str(info.value).startswith("/dev/hugepages-1G does not exist on this host: Tenstorrent devices need")
    assert "\n" not in str(info.value)
    (tmp_path / "hugepages").mkdir()
    check_hugepages(plan, hugepages=tmp_path / "hugepages")  # present: no error
    check_hugepages(plan_docker_run(make_launch(tmp_path / "cpu", spec_for("cpu"))), hugepages=tmp_path / "none")


def test_interactive_runs_docker_it_with_a_shell_on_this_terminal(tmp_path, monkeypatch):
    """``--docker-server --interactive``: ``docker run -it ... --entrypoint /bin/bash IMAGE``, no server command."""
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/docker" if name == "docker" else None)
    spec = spec_for(docker_options={"command": ["python", "-m", "server"]})
    launch = make_launch(tmp_path, spec, interactive=True, api_key="k-secret-1", port=9001)
    calls = []

    def call(argv):
        calls.append(argv)
        assert Path(argv[argv.index("--env-file") + 1]).read_text() == "VLLM_API_KEY=k-secret-1\n"
        return 7

    assert run_interactive(launch, call=call) == 7          # the shell's exit code is the run's
    (argv,) = calls
    assert argv[:3] == ["/usr/bin/docker", "run", "-it"]
    assert argv[-3:] == ["--entrypoint", "/bin/bash", IMAGE]  # a shell, not the spec's server command
    assert "python" not in argv and "k-secret-1" not in " ".join(argv)
    assert argv[argv.index("--publish") + 1] == "127.0.0.1:9001:9001"
    assert not (tmp_path / ".server.env").exists()           # the secrets file goes with the shell
    printed = build_docker_run_args(launch, write_secrets=False)
    assert printed[:3] == ["docker", "run", "-it"] and printed[-1] == IMAGE


def test_interactive_without_docker_cli_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(ServerStartError, match="no `docker` is on PATH"):
        run_interactive(make_launch(tmp_path, spec_for(), interactive=True), call=lambda argv: 0)


def test_ulimits_privileged_only_when_spec_asks(tmp_path):
    spec = spec_for(docker_options={"ulimits": {"nofile": 65536, "memlock": [-1, -1]}, "privileged": True})
    argv = build_docker_run_args(make_launch(tmp_path, spec))
    assert argv[argv.index("--ulimit") + 1] == "nofile=65536:65536" and "memlock=-1:-1" in argv
    assert "--privileged" in argv


def test_hf_snapshot_mounts_the_repo_dir(tmp_path):
    snap = tmp_path / "hub" / "models--org--M" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    plan = plan_docker_run(make_launch(tmp_path / "run", spec_for(), weights_dir=snap))
    assert (str(tmp_path / "hub" / "models--org--M"), f"{CONTAINER_WEIGHTS_ROOT}/SmolLM2-135M-Instruct",
            True) in plan.mounts
    assert plan.env["MODEL_WEIGHTS_PATH"] == f"{CONTAINER_WEIGHTS_ROOT}/SmolLM2-135M-Instruct/snapshots/abc"


def test_refusals_become_one_line(tmp_path):
    plan = plan_docker_run(make_launch(tmp_path, spec_for(docker_options={"ulimits": {"nofile": 65536}})))
    cases = {
        'could not select device driver "" with capabilities: [[gpu]]': "no NVIDIA container runtime",
        "error setting rlimits for ready process: error setting rlimit type 7: operation not permitted": "nofile=65536",
        "unable to apply caps: operation not permitted": "--privileged",
    }
    for raw, expected in cases.items():
        line = explain_refusal(plan, Exception(raw))
        assert expected in line and "\n" not in line


def test_port_taken_before_any_docker_call(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        launch = make_launch(tmp_path, spec_for(), port=s.getsockname()[1])
        with pytest.raises(ServerStartError, match="already in use"):
            start_server("docker", launch)


# ------------------------------------------------------------------------------ real engine


@pytest.fixture(scope="module")
def docker_client():
    try:
        import docker

        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001
        where = os.environ.get("DOCKER_HOST", "the default socket")
        if REQUIRE_DOCKER:
            pytest.fail(f"REQUIRE_DOCKER=1 but no Docker engine is reachable at {where}: {exc}")
        pytest.skip(f"no Docker engine reachable at {where}")
    yield client
    client.close()


@pytest.fixture(scope="module")
def test_image(docker_client):
    from workflows.venvs import ensure_venv

    builder = _load(REPO_ROOT / "scripts" / "ci" / "build_test_image.py", "build_test_image")
    venv = Path(ensure_venv("engine-vllm-cpu").path)
    builder.build_image(docker_client, IMAGE, venv)
    yield builder.runtime_mounts(venv)
    docker_client.images.remove(IMAGE, force=True)


def assert_no_container(client, name):
    assert client.containers.list(all=True, filters={"name": name}) == []


@pytest.fixture(scope="module")
def real_container(docker_client, test_image, tmp_path_factory):
    from workflows.host_setup import prepare_host

    spec = dataclasses.replace(cpu_spec(), docker_image=IMAGE)
    host = prepare_host(spec)
    key = "dk-" + secrets.token_urlsafe(24)
    launch = make_launch(tmp_path_factory.mktemp("docker_run"), spec, api_key=key, weights_dir=host.weights_dir,
                         extra_mounts=test_image, shm_size="1g")
    handle = start_server("docker", launch)
    try:
        from workflows.readiness import wait_until_ready

        wait_until_ready(handle, bearer=key, timeout_s=spec.readiness_timeout_s)
        yield handle, key, launch
    finally:
        handle.stop(timeout=20)
        assert_no_container(docker_client, handle.name)
        assert not (launch.run_dir / ".server.env").exists()


@pytest.mark.docker
@pytest.mark.integration
@pytest.mark.slow
def test_real_completion_through_published_port(real_container):
    handle, key, _ = real_container
    url = handle.base_url + "/v1/completions"
    body = {"model": handle.served_model_name, "prompt": "The capital of France is", "max_tokens": 4, "temperature": 0}
    assert requests.post(url, json=body, timeout=60).status_code == 401
    resp = requests.post(url, json=body, headers=bearer_headers(key), timeout=120)
    assert resp.status_code == 200 and "Paris" in resp.json()["choices"][0]["text"]


@pytest.mark.docker
@pytest.mark.integration
@pytest.mark.slow
def test_container_shape_and_log_streaming(real_container, docker_client):
    handle, key, launch = real_container
    attrs = docker_client.containers.get(handle.name).attrs
    assert attrs["HostConfig"]["PortBindings"] == {f"{launch.service_port}/tcp": [
        {"HostIp": "127.0.0.1", "HostPort": str(launch.service_port)}]}
    assert attrs["HostConfig"]["Init"] is True and attrs["HostConfig"]["ShmSize"] == 1 << 30
    assert attrs["Config"]["Labels"][LABEL] == "1"
    assert key not in json.dumps(attrs["Config"]["Cmd"]) + json.dumps(attrs["Path"]) + json.dumps(attrs["Args"])
    ro = {m["Destination"]: m["RW"] for m in attrs["Mounts"]}
    assert ro[f"{CONTAINER_WEIGHTS_ROOT}/SmolLM2-135M-Instruct"] is False
    log = handle.log_path.read_text()
    assert "[run_vllm_api_server]" in log and "Application startup complete" in log and key not in log


@pytest.mark.docker
def test_container_exit_during_startup(docker_client, test_image, tmp_path):
    script = ("import sys\nfor i in range(45): print('fake start-up line', i)\n"
              "print('boom: fake engine failure')\nsys.exit(3)")
    spec = spec_for(docker_options={"command": ["/usr/bin/python3.11", "-c", script]})
    launch = make_launch(tmp_path, spec, extra_mounts=test_image, shm_size="64m")
    handle = start_server("docker", launch)
    try:
        from workflows.readiness import wait_until_ready

        with pytest.raises(ServerDied) as exc:
            wait_until_ready(handle, bearer=None, timeout_s=60, poll_interval_s=0.2)
    finally:
        handle.stop(timeout=5)
    assert exc.value.exit_code == 3 and "boom: fake engine failure" in str(exc.value)
    assert_no_container(docker_client, handle.name)


@pytest.mark.docker
def test_host_refusals_are_one_line_and_leave_nothing(docker_client, test_image, tmp_path):
    for device, options, expected in (("gpu", {}, "no NVIDIA container runtime"),
                                      ("cpu", {"ulimits": {"nofile": 1 << 20}}, "refused the ulimits")):
        launch = make_launch(tmp_path / device, spec_for(device, docker_options=options), extra_mounts=test_image)
        with pytest.raises(ServerStartError) as exc:
            start_server("docker", launch)
        assert expected in str(exc.value) and "\n" not in str(exc.value)
        assert_no_container(docker_client, container_name(launch))


@pytest.mark.docker
def test_missing_image_is_one_line(docker_client, tmp_path):
    launch = make_launch(tmp_path, spec_for(), docker_image="example.invalid/no-such-image:1")
    with pytest.raises(ServerStartError, match="not available locally and cannot be pulled"):
        start_server("docker", launch)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_the_cache_volume_is_handed_to_the_image_user_when_root(tmp_path):
    """Engines write JIT and compile caches there; a root-owned directory is read-only in the container."""
    from workflows.servers.docker_server import CONTAINER_APP_UID, make_cache_volume

    volume = tmp_path / "docker_volumes" / "model"
    make_cache_volume(volume)
    make_cache_volume(volume)  # idempotent
    assert volume.is_dir()
    if os.geteuid() == 0:
        assert volume.stat().st_uid == CONTAINER_APP_UID


@pytest.mark.docker
@pytest.mark.integration
@pytest.mark.slow
def test_stress_endurance_reads_the_containers_memory_with_docker_stats(real_container, tmp_path):
    """stress_tests against a containerised server samples the container's memory with `docker stats`
    (the source run.py names in TT_SERVER_CONTAINER for --docker-server runs), every window."""
    import subprocess

    from records.stress import StressRecord

    handle, key, launch = real_container
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env.update(PYTHONPATH=str(REPO_ROOT), OPENAI_API_KEY=key, TT_SERVED_MODEL_NAME=handle.served_model_name,
               TT_SERVER_CONTAINER=handle.name, TT_TOKENIZER_DIR="")
    # 30 s: memory is judged after 10 s (a third of a short run), and on a busy host each `docker stats` call
    # takes up to 3 s (CI: 3 samples in the 10 s after a 15 s run's warm-up)
    args = {"mode": "smoke", "run_mode": "endurance", "endurance_s": "30", "window_s": "1", "input_size": "16",
            "output_size": "4", "max_concurrent": "2"}
    done = subprocess.run([sys.executable, "-m", "stress_tests.run_stress_tests", "--run-dir",
                           str(tmp_path), "--model-spec-json", str(launch.spec_json_path), "--server-url",
                           handle.base_url, "--workflow-args-json", json.dumps(args)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    (point,) = StressRecord.read(tmp_path / "stress_tests" / "stress_record.json").points
    drift = point.drift
    assert drift.memory_source == "docker" and handle.name in drift.memory_what
    # sampled again and again (each `docker stats` call waits for the engine: seconds when another test beside
    # this one builds an image), and every window has a value
    assert drift.memory_samples >= 2 and drift.memory_baseline_mb > 50
    assert all(w["memory_bytes"] for w in point.windows) and point.completed > 0
    assert point.checks["memory_growth_pct"]["decision"] in ("pass", "inconclusive")
