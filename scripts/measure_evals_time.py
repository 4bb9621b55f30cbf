#!/usr/bin/env python3
"""Measure the evals workflow's wall time (mode=smoke by default) against one real vLLM CPU server.

Starts the catalog's SmolLM2-135M-Instruct CPU server once (as ``run.py --local-server`` does; a
server already running can be given with ``--server-url``), then runs ``evals/run_evals.py`` in the
``evals`` venv exactly as the orchestrator does, once per variant, each into a fresh run directory,
and prints the wall time, the machine load and the task statuses. The server is stopped at the end.

    .workflow_venvs/dev/bin/python scripts/measure_evals_time.py --runs 2 \
        --variant now --variant 'before:tree=/tmp/old-checkout:pycache=/tmp/empty-dir'

A variant is ``NAME`` (this checkout) with optional ``:tree=DIR`` (run another checkout's
``evals/run_evals.py``, e.g. an older commit exported with ``git archive``) and ``:pycache=DIR``
(``PYTHONPYCACHEPREFIX``: an empty directory reproduces a venv without bytecode under
``PYTHONDONTWRITEBYTECODE=1``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
import _repo  # noqa: E402,F401  (the repository and scripts/ importable: scripts/_repo.py)

EVALS_PYTHON = REPO / ".workflow_venvs" / "evals" / "bin" / "python"


def parse_variant(text: str) -> dict:
    name, *parts = text.split(":")
    var = {"name": name, "tree": str(REPO), "pycache": None}
    for part in parts:
        key, _, value = part.partition("=")
        if key not in ("tree", "pycache"):
            raise SystemExit(f"bad variant part {part!r} in {text!r}")
        var[key] = value
    return var


def run_evals_once(var: dict, server_url: str, api_key: str | None, workflow_args: dict) -> dict:
    tree = Path(var["tree"])
    with tempfile.TemporaryDirectory(prefix="measure_evals_") as tmp:
        run_dir = Path(tmp)
        spec = {"model_id": "id_vllm-cpu_SmolLM2-135M-Instruct_cpu", "model_name": "SmolLM2-135M-Instruct",
                "hf_model_repo": "HuggingFaceTB/SmolLM2-135M-Instruct", "served_model_name": "SmolLM2-135M-Instruct",
                "engine": "vllm", "device_type": "cpu"}
        (run_dir / "model_spec.json").write_text(json.dumps(spec))
        env = dict(os.environ, PYTHONPATH=str(tree), TT_SERVED_MODEL_NAME="SmolLM2-135M-Instruct",
                   TT_TOKENIZER_DIR="", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        env.pop("OPENAI_API_KEY", None)
        if api_key:
            env["OPENAI_API_KEY"] = api_key
        if var["pycache"]:
            env["PYTHONPYCACHEPREFIX"] = var["pycache"]
        load = Path("/proc/loadavg").read_text().split()[:3]
        argv = [str(EVALS_PYTHON), str(tree / "evals" / "run_evals.py"), "--run-dir", str(run_dir),
                "--model-spec-json", str(run_dir / "model_spec.json"), "--server-url", server_url,
                "--workflow-args-json", json.dumps(workflow_args)]
        t0 = time.monotonic()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
        wall = time.monotonic() - t0
        statuses = {}
        for path in sorted((run_dir / "evals").glob("*/eval_record.json")):
            rec = json.loads(path.read_text())
            statuses[rec["task"]] = f"{rec['status']} {rec.get('value')}"
        return {"variant": var["name"], "wall_s": round(wall, 1), "rc": proc.returncode, "load_before": load,
                "tasks": statuses, "tail": proc.stdout.strip().splitlines()[-1:]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", action="append", default=[], help="see the module docstring; default: now")
    ap.add_argument("--runs", type=int, default=1, help="runs per variant (interleaved)")
    ap.add_argument("--workflow-args", default='{"mode": "smoke"}', help="JSON given to run_evals.py")
    ap.add_argument("--server-url", help="a running server (no auth unless OPENAI_API_KEY is set)")
    ap.add_argument("--server-env", default="", help="extra spec env vars K=V,K=V for the server we start")
    args = ap.parse_args(argv)
    variants = [parse_variant(v) for v in (args.variant or ["now"])]
    handle = None
    if args.server_url:
        url, key = args.server_url, os.environ.get("OPENAI_API_KEY")
    else:
        import measure_server_start as mss  # noqa: PLC0415
        from contracts.model_spec import ModelSpec  # noqa: PLC0415
        from workflows.catalog import load_catalog  # noqa: PLC0415
        from workflows.host_setup import ensure_packaged_smollm2  # noqa: PLC0415
        from workflows.servers import ServerLaunch, start_server  # noqa: PLC0415

        spec = load_catalog().specs[mss.SPEC_ID].to_dict()
        spec = mss.apply_variant(spec, mss.parse_variant("server:env:" + args.server_env if args.server_env
                                                         else "server"))
        tmp = Path(tempfile.mkdtemp(prefix="measure_evals_server_"))
        (tmp / "model_spec.json").write_text(json.dumps(spec))
        launch = ServerLaunch(spec=ModelSpec.from_dict(spec), spec_json_path=tmp / "model_spec.json", run_dir=tmp,
                              service_port=mss.free_port(), api_key=None, weights_dir=Path(ensure_packaged_smollm2()))
        handle = start_server("local", launch)
        mss.wait_first_answer(handle.base_url, handle.served_model_name, handle, mss.READY_DEADLINE_S)
        print(f"server ready at {handle.base_url}", flush=True)
        url, key = handle.base_url, None
    try:
        results: dict[str, list[dict]] = {v["name"]: [] for v in variants}
        for _ in range(args.runs):
            for var in variants:
                res = run_evals_once(var, url, key, json.loads(args.workflow_args))
                results[var["name"]].append(res)
                print(json.dumps(res), flush=True)
    finally:
        if handle is not None:
            handle.stop()
    print(f"\n{'variant':<12} {'runs':>4} {'median wall s':>14} {'min':>6}  load before (1/5/15 min)")
    for name, runs in results.items():
        walls = [r["wall_s"] for r in runs]
        print(f"{name:<12} {len(runs):>4} {statistics.median(walls):>14.1f} {min(walls):>6.1f}  "
              f"{' | '.join('/'.join(r['load_before']) for r in runs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
