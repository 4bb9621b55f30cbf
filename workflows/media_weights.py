"""Weights a media spec generates on first use (``weights_source.kind == "generated"``).

Why: the CPU image pipeline is a real diffusers architecture with random weights (no hub
download is possible here); its generator script builds a normal diffusers folder once into the
project cache, and the server loads it like any checkpoint. Reused while the completion marker
is there; a half-built folder (interrupted run) is rebuilt.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from contracts import REPO_ROOT
from contracts.model_spec import ModelSpec

MARKER = ".tt-complete.json"
GENERATE_TIMEOUT_S = 900.0


class GeneratedWeightsError(RuntimeError):
    """The generator could not produce the weights; one line."""


def generated_dir(spec: ModelSpec, cache: Path) -> Path:
    return cache / "models" / spec.model_name


def find_generated(spec: ModelSpec, cache: Path) -> Path | None:
    """The generated folder when it is complete, else None."""
    target = generated_dir(spec, cache)
    return target if (target / MARKER).is_file() else None


def ensure_generated(spec: ModelSpec, cache: Path) -> Path:
    """Run the spec's generator (in the media-server venv) once; GeneratedWeightsError says why it failed."""
    from workflows.venvs import ensure_venv

    found = find_generated(spec, cache)
    if found is not None:
        return found
    source = spec.weights_source
    script = REPO_ROOT / str(source.get("generator", ""))
    if not script.is_file():
        raise GeneratedWeightsError(f"{spec.model_name}: weights generator {script} not found")
    target = generated_dir(spec, cache)
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    python = ensure_venv("media-server").python
    command = [str(python), str(script), str(target)] + (["--size", str(source["size"])] if source.get("size") else [])
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=GENERATE_TIMEOUT_S,
                              env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    except subprocess.TimeoutExpired:
        raise GeneratedWeightsError(f"{spec.model_name}: generating weights took over {GENERATE_TIMEOUT_S:g} s") \
            from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise GeneratedWeightsError(f"{spec.model_name}: weights generator exited {done.returncode}: {tail[0]}")
    (target / MARKER).write_text(json.dumps({"generator": str(source.get("generator")), "size": source.get("size"),
                                             "seconds": round(time.monotonic() - started, 1)}) + "\n")
    return target
