"""Media catalog entries, their targets, the docker plan for a media server, and client routing."""
from __future__ import annotations

import copy
import shlex

import pytest

from contracts.model_spec import InferenceEngine, metric_higher_is_better
from contracts.workflow_args import WorkflowType
from workflows.catalog import expand_targets, load_catalog
from workflows.clients import MEDIA_CLIENT_SCRIPTS, client_scripts, no_variant_reason
from workflows.servers.base import ServerLaunch
from workflows.servers.docker_server import plan_docker_run, print_docker_cmd


def spec(model: str, device: str):
    found = [s for s in load_catalog().specs.values() if s.model_name == model and s.device_type.value == device]
    assert found, f"no catalog entry {model} on {device}"
    return found[0]


def docker_argv(tmp_path, model: str, device: str, api_key: str | None = "k-secret") -> list[str]:
    s = spec(model, device)
    (tmp_path / "model_spec.json").write_text(s.to_json())
    launch = ServerLaunch(spec=s, spec_json_path=tmp_path / "model_spec.json", run_dir=tmp_path, service_port=8123,
                          api_key=api_key)
    return shlex.split(print_docker_cmd(launch))


def env_of(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-e")


def test_media_specs_are_media_and_carry_no_vllm_settings():
    for s in load_catalog().specs.values():
        if s.impl.impl_name != "tt-media":
            continue
        assert s.engine is InferenceEngine.MEDIA
        assert s.model_type in ("image", "speech", "cnn", "embedding", "vision", "text")
        assert s.device_model_spec.vllm_args == {}
        assert not any(k.startswith("VLLM_") for k in s.env_vars), s.model_id
        assert s.env_vars.get("MODELS", "").startswith(s.served_model_name + "="), s.model_id


def test_media_targets_expand_per_tier_in_the_right_direction():
    tiers = expand_targets({"s_per_step": 0.5, "images_per_s": 2.0, "rtf": 0.1, "latency_p50_ms": 40})
    assert tiers["functional"].metrics == {"s_per_step": 5.0, "images_per_s": 0.2, "rtf": 1.0, "latency_p50_ms": 400.0}
    assert tiers["target"].metrics["images_per_s"] == 2.0
    assert metric_higher_is_better("items_per_s") and not metric_higher_is_better("s_per_step")
    refs = spec("stable-diffusion-xl-base-1.0", "galaxy").device_model_spec.perf_reference
    assert refs[0].task_type == "image" and refs[0].params == {"num_inference_steps": 20}
    assert refs[0].targets["complete"].metrics == {"s_per_step": 1.0, "images_per_s": 1.6}


def test_sdxl_on_galaxy_docker_command_has_devices_hugepages_and_env(tmp_path):
    argv = docker_argv(tmp_path, "stable-diffusion-xl-base-1.0", "galaxy")
    env = env_of(argv)
    assert "--device" in argv and argv[argv.index("--device") + 1] == "/dev/tenstorrent:/dev/tenstorrent"
    assert "type=bind,src=/dev/hugepages-1G,dst=/dev/hugepages-1G" in argv
    assert env["MODEL_RUNNER"] == "tt-sdxl" and env["DEVICE"] == "galaxy" and env["MESH_DEVICE"] == "TG"
    assert env["DEVICE_IDS"] == ",".join(f"({i})" for i in range(32))     # 32 single-chip workers
    assert env["SERVICE_PORT"] == "8000" and "127.0.0.1:8123:8000" in argv
    assert "k-secret" not in " ".join(argv) and "API_KEY" not in env            # the key is in the env file only
    assert (tmp_path / ".server.env").read_text().strip() == "API_KEY=k-secret"


def test_whisper_on_n150_docker_command(tmp_path):
    argv = docker_argv(tmp_path, "whisper-large-v3", "n150", api_key=None)
    env = env_of(argv)
    assert "type=bind,src=/dev/hugepages-1G,dst=/dev/hugepages-1G" in argv
    assert (env["MODEL_RUNNER"], env["DEVICE_IDS"], env["MESH_DEVICE"], env["ARCH_NAME"]) == (
        "tt-whisper", "(0)", "N150", "wormhole_b0")
    assert env["NO_AUTH"] == "1"


def test_cpu_media_plan_has_no_tt_devices(tmp_path):
    s = spec("tiny-diffusion-cpu", "cpu")
    (tmp_path / "model_spec.json").write_text(s.to_json())
    plan = plan_docker_run(ServerLaunch(spec=s, spec_json_path=tmp_path / "model_spec.json", run_dir=tmp_path,
                                        service_port=8124, api_key="k"))
    assert plan.devices == [] and plan.container_port == 8000 and plan.env["MODEL_RUNNER"] == "image-cpu"
    assert not any(dst == "/dev/hugepages-1G" for _, dst, _ in plan.mounts)


@pytest.mark.parametrize("model_type, variant", [("image", True), ("cnn", True), ("text", False), ("LLM", False)])
def test_client_variant_follows_the_model_kind(model_type, variant):
    s = copy.deepcopy(spec("tiny-diffusion-cpu", "cpu"))  # the catalog is cached: never mutate its specs
    s.model_type = model_type
    scripts = client_scripts(s)
    assert (scripts is MEDIA_CLIENT_SCRIPTS) is variant
    assert no_variant_reason(s, WorkflowType.STRESS_TESTS) is None  # every media kind has its stress_tests
    assert scripts[WorkflowType.STRESS_TESTS][1] == ("stress_tests/run_media_stress.py" if variant
                                                     else "stress_tests/run_stress_tests.py")
