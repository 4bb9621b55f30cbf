#!/usr/bin/env python3
"""Measure how long the vLLM CPU server takes to answer, per start-up option, and check it answers right.

What is timed: from starting the launcher (``vllm-tt-metal/src/run_vllm_api_server.py``, exactly as
``run.py --local-server`` starts it, through the local backend) to the first HTTP 200 on a 1-token
completion, polled every 0.2 s. After that, for correctness, it records a greedy 24-token completion
of a fixed prompt, a chat answer and ``/tokenize`` (the evals need it), and a 32-token decode (tokens/s
and, steadier on a shared machine, CPU milliseconds per token), then stops the server (the whole
process group). ``cpu s`` is the CPU time the server's processes used until the first answer: on a
loaded machine the wall time stretches with the load, the CPU time much less. Options are applied
on top of the catalog's spec, so a variant differs from the default in exactly what it names.

    .workflow_venvs/dev/bin/python scripts/measure_server_start.py --runs 2 --variant catalog \
        --variant 'three-processes:unset:VLLM_ENABLE_V1_MULTIPROCESSING,TT_VLLM_ENGINE_START' \
        --variant 'spawn:unset:TT_VLLM_ENGINE_START'

A variant is ``NAME`` followed by any of ``:env:K=V,K2=V2`` (spec env_vars), ``:arg:k=v`` (spec
vllm_args), ``:unset:K`` (drop from either), ``:penv:K=V`` (the server process's environment, as the
caller sets it) and ``:launcher:PATH`` (another launcher file, e.g. an older version kept for a
before/after figure). ``catalog`` alone is the spec as the catalog resolves it.

A cold bytecode cache is reproduced with ``:penv:PYTHONPYCACHEPREFIX=/tmp/empty-dir`` (Python then
reads no ``__pycache__``) under ``PYTHONDONTWRITEBYTECODE=1`` and a launcher that honours it.
Prints one JSON line per run and a summary table; the machine load (``/proc/loadavg``) is recorded
before each run, since other processes on a 2-core machine change the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
import _repo  # noqa: E402,F401  (the repository importable: scripts/_repo.py)

from contracts.openai_http import one_token  # noqa: E402
from contracts.retry import GaveUp, NotYet, retry  # noqa: E402

SPEC_ID = "id_vllm-cpu_SmolLM2-135M-Instruct_cpu"
PROMPT = "The capital of France is"
READY_DEADLINE_S = 600.0


@dataclass
class Variant:
    name: str
    env: dict[str, str] = field(default_factory=dict)
    args: dict[str, object] = field(default_factory=dict)
    unset: list[str] = field(default_factory=list)
    process_env: dict[str, str] = field(default_factory=dict)
    launcher: str | None = None


def parse_variant(text: str) -> Variant:
    """``name[:env:K=V,...][:arg:k=v,...][:unset:K,...]`` -> Variant."""
    name, *rest = text.split(":")
    if len(rest) % 2:
        raise SystemExit(f"bad variant {text!r}: expected NAME[:env|arg|unset:ITEMS]...")
    var = Variant(name)
    for kind, items in zip(rest[::2], rest[1::2]):
        for item in filter(None, items.split(",")):
            if kind == "unset":
                var.unset.append(item)
                continue
            if kind == "launcher":
                var.launcher = item
                continue
            key, _, value = item.partition("=")
            if kind == "env":
                var.env[key] = value
            elif kind == "arg":
                var.args[key] = True if value == "" else value
            elif kind == "penv":
                var.process_env[key] = value
            else:
                raise SystemExit(f"bad variant kind {kind!r} in {text!r}")
    return var


def apply_variant(spec: dict, var: Variant) -> dict:
    """The spec with the variant's env vars (top level, where the launcher lets them win) and args."""
    dms = spec["device_model_spec"]
    env_vars = dict(spec.get("env_vars") or {})
    dms_env = dict(dms.get("env_vars") or {})
    vllm_args = dict(dms.get("vllm_args") or {})
    for key in var.unset:
        for section in (env_vars, dms_env, vllm_args):
            section.pop(key, None)
    env_vars.update(var.env)
    vllm_args.update(var.args)
    return {**spec, "env_vars": env_vars,
            "device_model_spec": {**dms, "env_vars": dms_env, "vllm_args": vllm_args}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _post(url: str, body: dict, timeout: float) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.load(resp)


def wait_first_answer(base: str, model: str, handle, deadline_s: float) -> float:
    """Seconds until a 1-token completion answers 200; raises if the server dies or the deadline passes."""
    def answered(remaining_s: float) -> float:
        if not handle.is_alive():
            raise RuntimeError(f"server exited ({handle.exit_code()}) before answering; see {handle.log_path}")
        answer = one_token(base, model, None, min(30.0, max(remaining_s, 1.0)))
        if not answer.ok:
            raise NotYet(f"HTTP {answer.status}" if answer.status else answer.text[:200])
        return time.monotonic()

    try:
        return retry(f"a 1-token completion from {base}", answered, deadline_s=deadline_s, delay_s=0.2)
    except GaveUp as exc:
        raise RuntimeError(str(exc)) from None


def group_process_count(pgid: int) -> int:
    n = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                n += os.getpgid(int(entry.name)) == pgid
            except (ProcessLookupError, PermissionError):
                pass
    return n


def group_cpu_seconds(pgid: int) -> float:
    """User+system CPU seconds used so far by the group's live processes and their reaped children."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pgid:
                continue
            stat = (entry / "stat").read_text()
        except (ProcessLookupError, PermissionError, OSError):
            continue
        fields_after_name = stat[stat.rindex(")") + 2:].split()
        total += sum(int(x) for x in fields_after_name[11:15])  # utime stime cutime cstime
    return total / tick


def log_marks(log_path: Path) -> dict[str, str]:
    """First log line of each start-up phase vLLM prints (timestamps are in the lines)."""
    marks = {"engine_core": "EngineCore", "weights_loaded": "Loading weights took", "kv_cache": "KV cache",
             "startup_complete": "Application startup complete"}
    found: dict[str, str] = {}
    for line in log_path.read_text(errors="replace").splitlines():
        for key, needle in marks.items():
            if key not in found and needle in line:
                found[key] = line.strip()[:160]
    return found


def measure_once(spec: dict, var: Variant, weights: Path, log_dir: Path | None = None) -> dict:
    from contracts.model_spec import ModelSpec  # noqa: PLC0415
    from workflows.servers import ServerLaunch, start_server  # noqa: PLC0415
    from workflows.servers import local as local_backend  # noqa: PLC0415
    from workflows.servers.base import LAUNCHER_PATH as default_launcher  # noqa: PLC0415

    spec = apply_variant(spec, var)
    with tempfile.TemporaryDirectory(prefix="measure_start_") as tmp:
        run_dir = Path(tmp)
        spec_path = run_dir / "model_spec.json"
        spec_path.write_text(json.dumps(spec))
        load = Path("/proc/loadavg").read_text().split()[:3]
        launch = ServerLaunch(spec=ModelSpec.from_dict(spec), spec_json_path=spec_path, run_dir=run_dir,
                              service_port=free_port(), api_key=None, weights_dir=weights,
                              extra_env=dict(var.process_env))
        local_backend.LAUNCHER_PATH = Path(var.launcher) if var.launcher else default_launcher
        t0 = time.monotonic()
        handle = start_server("local", launch)
        try:
            ready = wait_first_answer(handle.base_url, handle.served_model_name, handle, READY_DEADLINE_S) - t0
            procs = group_process_count(handle.pgid)
            cpu_s = group_cpu_seconds(handle.pgid)
            model = handle.served_model_name
            text = _post(handle.base_url + "/v1/completions",
                         {"model": model, "prompt": PROMPT, "max_tokens": 24, "temperature": 0}, 60)
            chat = _post(handle.base_url + "/v1/chat/completions",
                         {"model": model, "messages": [{"role": "user", "content": "What is 2+2?"}],
                          "max_tokens": 16, "temperature": 0}, 60)
            tok = _post(handle.base_url + "/tokenize", {"model": model, "prompt": PROMPT}, 30)
            cpu_before_decode = group_cpu_seconds(handle.pgid)
            t_dec = time.monotonic()
            dec = _post(handle.base_url + "/v1/completions", {"model": model, "prompt": PROMPT, "max_tokens": 32,
                                                             "temperature": 0, "ignore_eos": True}, 300)
            decode_tps = dec["usage"]["completion_tokens"] / (time.monotonic() - t_dec)
            # CPU time per generated token: unlike tokens/s, it does not move with the machine's load.
            cpu_ms_per_token = 1000 * (group_cpu_seconds(handle.pgid) - cpu_before_decode) / dec["usage"][
                "completion_tokens"]
            return {"variant": var.name, "ready_s": round(ready, 1), "processes": procs, "cpu_s": round(cpu_s, 1),
                    "load_before": load,
                    "greedy": text["choices"][0]["text"], "chat": chat["choices"][0]["message"]["content"],
                    "tokenize_count": tok.get("count"),
                    "decode_tok_s": round(decode_tps, 1), "decode_cpu_ms_per_token": round(cpu_ms_per_token, 1),
                    "marks": log_marks(handle.log_path)}
        finally:
            handle.stop()
            if log_dir is not None:  # kept for failed runs too: the log says why
                log_dir.mkdir(parents=True, exist_ok=True)
                (log_dir / f"{var.name}.{int(time.time())}.server.log").write_bytes(handle.log_path.read_bytes())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", action="append", default=[], help="see the module docstring; default: catalog")
    ap.add_argument("--runs", type=int, default=1, help="starts per variant (interleaved)")
    ap.add_argument("--log-dir", type=Path, help="keep each run's server.log here")
    args = ap.parse_args(argv)
    from workflows.catalog import load_catalog  # noqa: PLC0415
    from workflows.host_setup import ensure_packaged_smollm2  # noqa: PLC0415

    spec = load_catalog().specs[SPEC_ID].to_dict()
    weights = Path(ensure_packaged_smollm2())
    variants = [parse_variant(v) for v in (args.variant or ["catalog"])]
    results: dict[str, list[dict]] = {v.name: [] for v in variants}
    for _ in range(args.runs):
        for var in variants:
            try:
                res = measure_once(spec, var, weights, args.log_dir)
            except (OSError, RuntimeError, ValueError, KeyError) as exc:  # a broken variant is a result too
                print(json.dumps({"variant": var.name, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
                continue
            results[var.name].append(res)
            print(json.dumps(res), flush=True)
    print(f"\n{'variant':<28} {'runs':>4} {'median ready s':>15} {'min':>6} {'cpu s':>6} {'procs':>5} {'tok/s':>6}"
          f" {'cpu ms/tok':>10}  greedy output")
    for name, runs in results.items():
        if not runs:
            print(f"{name:<28} no successful run")
            continue
        readies = [r["ready_s"] for r in runs]
        print(f"{name:<28} {len(runs):>4} {statistics.median(readies):>15.1f} {min(readies):>6.1f} "
              f"{statistics.median(r['cpu_s'] for r in runs):>6.1f} {runs[0]['processes']:>5} "
              f"{statistics.median(r['decode_tok_s'] for r in runs):>6.1f} "
              f"{statistics.median(r['decode_cpu_ms_per_token'] for r in runs):>10.1f}  {runs[0]['greedy']!r}")
    greedy = {r["greedy"] for runs in results.values() for r in runs}
    print("same greedy output for every variant" if len(greedy) == 1 else f"greedy outputs DIFFER: {greedy}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
