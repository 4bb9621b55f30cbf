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

# gcc, libc6-dev and python3-dev: webrtcvad (the speaker encoder's dependency, speech preprocessing)
# ships only as source on PyPI and is compiled when the requirements are installed.
RUN if ! python3 -c "import venv, ensurepip" 2>/dev/null || [ ! -e /usr/lib/x86_64-linux-gnu/libgomp.so.1 ] \
       || ! command -v gcc >/dev/null || ! command -v python3-config >/dev/null; then \
      apt-get update && apt-get install -y --no-install-recommends ca-certificates python3 python3-venv libgomp1 \
        gcc libc6-dev python3-dev && rm -rf /var/lib/apt/lists/*; \
    fi

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
