"""How a media server (tt-media-server) differs from vLLM at launch: its settings are env vars.

vLLM's launcher reads the model spec JSON; the media server reads UPPERCASE env vars (MODEL,
MODEL_RUNNER, MODELS, DEVICE, DEVICE_IDS, DEVICE_MESH_SHAPE, ...) and its bearer key from
API_KEY. The docker plan is otherwise the same (env file for secrets, 127.0.0.1 ports, devices,
volumes); the image listens on port 8000 inside the container.
"""
from __future__ import annotations

from contracts.model_spec import InferenceEngine, ModelSpec

MEDIA_CONTAINER_PORT = 8000
HUGEPAGES = "/dev/hugepages-1G"


def is_media(spec: ModelSpec) -> bool:
    return spec.engine is InferenceEngine.MEDIA


def media_server_env(spec: ModelSpec, api_key: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """(plain env, secret env) the media server needs for this spec and key."""
    env = {k: str(v) for k, v in spec.env_vars.items()}
    env.setdefault("DEVICE", spec.device_type.value)
    env["ENVIRONMENT"] = "production" if api_key else "development"
    secrets: dict[str, str] = {}
    if api_key:
        secrets["API_KEY"] = api_key
    else:
        env["NO_AUTH"] = "1"
    return env, secrets


def apply_media_docker_plan(spec: ModelSpec, api_key: str | None, env: dict[str, str], secret_env: dict[str, str],
                            mounts: list[tuple[str, str, bool]]) -> int:
    """Turn a vLLM docker plan into a media one, in place; returns the container port."""
    plain, secrets = media_server_env(spec, api_key)
    env.update(plain)
    env["SERVICE_PORT"] = str(MEDIA_CONTAINER_PORT)
    secret_env.pop("VLLM_API_KEY", None)
    secret_env.update(secrets)
    if spec.device_type.is_tenstorrent and not any(dst == HUGEPAGES for _, dst, _ in mounts):
        # TT runners pin host memory in 1 GiB hugepages: the host that runs this needs them.
        mounts.append((HUGEPAGES, HUGEPAGES, False))
    return MEDIA_CONTAINER_PORT
