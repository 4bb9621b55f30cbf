#!/usr/bin/env bash
# The documented start-up: from tt-media-server/, `source run_uvicorn.sh` (or `bash run_uvicorn.sh`) runs the
# server in the foreground with the settings of this shell's environment (MODEL_RUNNER, DEVICE, DEVICE_IDS, TP2...;
# tt-media-server/README.md). The same command as everywhere else: uvicorn main:app --lifespan on.
#   HOST (default 0.0.0.0), SERVICE_PORT (default 8000); PYTHON, else the media-server venv run.py builds
#   (../.workflow_venvs/media-server), else python3.
# Sourced, it changes nothing in the calling shell: it runs in a subshell and returns the server's exit code.
(
  here="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)" || exit 2
  cd "$here" || exit 2
  python="${PYTHON:-}"
  if [ -z "$python" ]; then
    if [ -x "$here/../.workflow_venvs/media-server/bin/python" ]; then
      python="$here/../.workflow_venvs/media-server/bin/python"
    else
      python="python3"
    fi
  fi
  exec "$python" -m uvicorn main:app --lifespan on --host "${HOST:-0.0.0.0}" --port "${SERVICE_PORT:-8000}"
)
