# Tenstorrent server image: tt-metal and the Tenstorrent vLLM fork built from source at the spec's
# commits, plus the project's launcher. Needs GitHub and a registry for the base image, so
# scripts/build_docker_images.py plans it (--dry-run) but builds it only where those are reachable.
#
#   docker build -f vllm-tt-metal/vllm.tt-metal.Dockerfile \
#     --build-arg TT_METAL_COMMIT=<spec.tt_metal_commit> --build-arg VLLM_COMMIT=<spec.vllm_commit> -t TAG .
ARG BASE_IMAGE=ubuntu:22.04
FROM ${BASE_IMAGE}

ARG DEBIAN_FRONTEND=noninteractive
ARG TT_METAL_COMMIT
ARG VLLM_COMMIT
ARG TT_METAL_REPO=https://github.com/tenstorrent/tt-metal.git
ARG VLLM_REPO=https://github.com/tenstorrent/vllm.git
ARG CONTAINER_APP_UID=15863
ENV CONTAINER_APP_USERNAME=container_app_user \
    HOME=/home/container_app_user \
    TT_METAL_HOME=/home/container_app_user/tt-metal \
    PYTHON_ENV_DIR=/home/container_app_user/tt-metal/python_env \
    VLLM_TARGET_DEVICE=tt \
    PYTHONUNBUFFERED=1

RUN test -n "${TT_METAL_COMMIT}" && test -n "${VLLM_COMMIT}" \
 && apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build git ca-certificates curl python3 python3-venv python3-dev \
      libhwloc-dev libnuma-dev libboost-all-dev clang-17 pkg-config sudo \
 && rm -rf /var/lib/apt/lists/*

RUN groupadd --gid "${CONTAINER_APP_UID}" "${CONTAINER_APP_USERNAME}" \
 && useradd --create-home --uid "${CONTAINER_APP_UID}" --gid "${CONTAINER_APP_UID}" --shell /bin/bash "${CONTAINER_APP_USERNAME}"
USER ${CONTAINER_APP_USERNAME}
WORKDIR ${HOME}

RUN git clone --filter=blob:none "${TT_METAL_REPO}" tt-metal && cd tt-metal && git checkout "${TT_METAL_COMMIT}" \
 && git submodule update --init --recursive && ./build_metal.sh && ./create_venv.sh

RUN git clone --filter=blob:none "${VLLM_REPO}" vllm && cd vllm && git checkout "${VLLM_COMMIT}" \
 && . "${PYTHON_ENV_DIR}/bin/activate" && pip install -e . --extra-index-url https://download.pytorch.org/whl/cpu

RUN mkdir -p "${HOME}/app/src" "${HOME}/cache_root" "${HOME}/model_spec" "${HOME}/readonly_weights_mount"
COPY --chown=${CONTAINER_APP_UID} vllm-tt-metal/src/run_vllm_api_server.py ${HOME}/app/src/run_vllm_api_server.py
WORKDIR ${HOME}/app/src
# What the engine compiles and loads at run time, not at build time:
# - the TT vLLM fork imports its model implementations from tt-metal's top-level `models` package,
#   which create_venv.sh does not install: it is found only with TT_METAL_HOME on PYTHONPATH;
# - tt-metal JIT-compiles every device kernel on first use with the SFPI toolchain and the headers
#   under TT_METAL_HOME: the clone stays whole in the image, and its built/ cache stays writable by
#   the server's user (a cache on the mounted volume would depend on the host directory's owner);
# - torch inductor (vLLM's sampler compiles its logprobs gather) needs g++ and Python.h: kept by
#   build-essential and python3-dev above, which must stay in the final image.
ENV CACHE_ROOT=${HOME}/cache_root SERVICE_HOST=0.0.0.0 \
    PYTHONPATH=${TT_METAL_HOME}
EXPOSE 8000
CMD ["/bin/bash", "-c", "exec ${PYTHON_ENV_DIR}/bin/python -u ${HOME}/app/src/run_vllm_api_server.py"]
