# Tenstorrent media server image: tt-metal built from source at the spec's commit plus tt-media-server
# with its Tenstorrent runners (SDXL, SD3.5, Whisper, ResNet via ttnn). Needs GitHub and a registry, so
# scripts/build_docker_images.py plans it (--dry-run) but builds it only where those are reachable.
ARG BASE_IMAGE=ubuntu:22.04
FROM ${BASE_IMAGE}

ARG DEBIAN_FRONTEND=noninteractive
ARG TT_METAL_COMMIT
ARG TT_METAL_REPO=https://github.com/tenstorrent/tt-metal.git
ARG CONTAINER_APP_UID=15863
ENV CONTAINER_APP_USERNAME=container_app_user \
    HOME=/home/container_app_user \
    TT_METAL_HOME=/home/container_app_user/tt-metal \
    PYTHON_ENV_DIR=/home/container_app_user/tt-metal/python_env \
    PYTHONUNBUFFERED=1

RUN test -n "${TT_METAL_COMMIT}" \
 && apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build git ca-certificates python3 python3-venv python3-dev \
      libhwloc-dev libnuma-dev libboost-all-dev clang-17 pkg-config \
 && rm -rf /var/lib/apt/lists/*

RUN groupadd --gid "${CONTAINER_APP_UID}" "${CONTAINER_APP_USERNAME}" \
 && useradd --create-home --uid "${CONTAINER_APP_UID}" --gid "${CONTAINER_APP_UID}" --shell /bin/bash "${CONTAINER_APP_USERNAME}"
USER ${CONTAINER_APP_USERNAME}
WORKDIR ${HOME}
RUN git clone --filter=blob:none "${TT_METAL_REPO}" tt-metal && cd tt-metal && git checkout "${TT_METAL_COMMIT}" \
 && git submodule update --init --recursive && ./build_metal.sh && ./create_venv.sh

COPY --chown=${CONTAINER_APP_UID} requirements/media-server.txt /tmp/req/media-server.txt
RUN grep -v '^torch==' /tmp/req/media-server.txt > /tmp/req/media.txt \
 && "${PYTHON_ENV_DIR}/bin/pip" install -r /tmp/req/media.txt \
 && rm -rf /tmp/req "${HOME}/.cache/pip" \
 && mkdir -p "${HOME}/app" "${HOME}/cache_root" "${HOME}/model_spec" "${HOME}/readonly_weights_mount"
COPY --chown=${CONTAINER_APP_UID} tt-media-server ${HOME}/app/tt-media-server
WORKDIR ${HOME}/app/tt-media-server
# What the runners compile and load at run time, not at build time:
# - the TT runners (SDXL, SD3.5, Whisper, ResNet) import tt-metal's top-level `models` package, which
#   create_venv.sh does not install: found only with TT_METAL_HOME on PYTHONPATH (without it every
#   TT runner refuses to start: "tt-metal's models package on PYTHONPATH");
# - tt-metal JIT-compiles every device kernel on first use (SFPI toolchain + headers under
#   TT_METAL_HOME): the clone stays whole in the image and its built/ cache writable by the server's
#   user (TT_METAL_CACHE_ROOT may move it to a volume the host made writable: media_server/workers.py);
# - torch inductor, where a runner uses torch.compile, needs g++ and Python.h: build-essential and
#   python3-dev above stay in the image.
# The cache_root, model_spec and weights mount points are made by the build, owned by the server's
# user, as in the other server images (the image also runs without the cache mount).
ENV CACHE_ROOT=${HOME}/cache_root SERVICE_HOST=0.0.0.0 SERVICE_PORT=8000 \
    PYTHONPATH=${TT_METAL_HOME}
EXPOSE 8000
CMD ["/bin/bash", "-c", "exec ${PYTHON_ENV_DIR}/bin/python -m uvicorn main:app --lifespan on --host \"$SERVICE_HOST\" --port \"$SERVICE_PORT\""]
