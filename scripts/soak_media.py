#!/usr/bin/env python3
"""Soak: one media server serving all four CPU models at once, each under a stress_tests endurance run.

    python3 scripts/soak_media.py --duration-s 1800            # the 30-minute soak
    python3 scripts/soak_media.py --duration-s 60 --window-s 5  # a quick look

One tt-media-server (the project's local backend, media-server venv) serves efficientnet-lite0
(cnn), whisper-tiny.en (speech), all-MiniLM-L6-v2 (embedding) and tiny-diffusion-cpu (image, the
random-weight pipeline generated once); their spec settings are merged (MODELS lists all four; a
setting two specs give differently takes the value named in ``SHARED_SETTINGS``). Then the
stress_tests media entry (``stress_tests/run_media_stress.py``) runs ``run_mode=endurance`` for
every model at the same time, each in its own run directory under ``--out`` with the server's pid
file, so every run samples the same server's process-tree RSS. Each run's report is built.

Prints one JSON summary (per model: requests, error rate, the judged latency drift (which
percentile: ``latency_statistic``), the p99 drift and memory growth after warm-up with their 95%
intervals and decisions) and writes it to ``--out/soak_summary.json``.
Exit 0 when no run failed (an inconclusive check is named, not failed), 1 otherwise.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
import _repo  # noqa: E402,F401  (the repository importable: scripts/_repo.py)

from contracts.retry import GaveUp, NotYet, retry  # noqa: E402

SPEC_IDS = ("id_tt-media_efficientnet-lite0_cpu", "id_tt-media_whisper-tiny.en_cpu",
            "id_tt-media_all-MiniLM-L6-v2_cpu", "id_tt-media_tiny-diffusion-cpu_cpu")
# Settings the four specs give differently: one server, one value (threads per worker kept at 1 on
# a small host; batches up to 8 for the CNN, the embedding batching window as its spec sets it).
SHARED_SETTINGS = {"CPU_THREADS_PER_WORKER": "1", "MAX_BATCH_SIZE": "8"}
PER_MODEL_ONLY = ("MODEL", "MODEL_RUNNER", "MODELS")


def free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def combined_spec(specs):
    """One spec whose env serves every model (MODELS = all four), named after the first."""
    env: dict[str, str] = {}
    for spec in specs:
        env.update({k: str(v) for k, v in spec.env_vars.items() if k not in PER_MODEL_ONLY})
    env.update(SHARED_SETTINGS)
    env["MODELS"] = ",".join(f"{s.served_model_name}={s.env_vars['MODEL_RUNNER']}" for s in specs)
    return dataclasses.replace(specs[0], env_vars=env)


def wait_healthy(base_url: str, handle, deadline_s: float) -> None:
    def probe(_remaining: float) -> None:
        if not handle.is_alive():
            raise SystemExit(f"the media server exited; last lines of its log:\n{handle.log_tail(30)}")
        try:
            with urllib.request.urlopen(base_url + "/health", timeout=5) as resp:
                if resp.status == 200:
                    return
        except OSError as exc:
            raise NotYet(str(exc)) from None
        raise NotYet("not healthy yet")
    try:
        retry("every model of the media server to be healthy", probe, deadline_s=deadline_s, delay_s=2.0)
    except GaveUp as exc:
        raise SystemExit(f"{exc}; last lines of its log:\n{handle.log_tail(30)}") from None


def summarise(run_dir: Path, model: str, code: int) -> dict:
    out = {"model": model, "exit_code": code, "run_dir": str(run_dir)}
    path = run_dir / "stress_tests" / "stress_record.json"
    if not path.is_file():
        return {**out, "error": "no stress record"}
    point = json.loads(path.read_text())["points"][0]
    drift = point.get("drift") or {}
    return {**out, "status": point["status"], "duration_s": point["duration_s"], "sent": point["sent"],
            "completed": point["completed"], "error_rate": point["error_rate"],
            "failures_by_class": point["failures_by_class"], "e2el_p50_ms": (point.get("e2el_ms") or {}).get("p50"),
            "e2el_p99_ms": (point.get("e2el_ms") or {}).get("p99"), "items_per_s": point.get("items_throughput"),
            "p99_first_last_ms": [drift.get("latency_p99_first_ms"), drift.get("latency_p99_last_ms")],
            "p99_n_first_last": drift.get("latency_p99_n"), "p99_drift_pct": drift.get("latency_p99_drift_pct"),
            "p99_drift_ci95": drift.get("latency_p99_drift_ci"), "latency_statistic": drift.get("latency_statistic"),
            "latency_drift_pct": drift.get("latency_judged_drift_pct"),
            "latency_drift_ci95": drift.get("latency_judged_drift_ci"),
            "latency_decision": drift.get("latency_decision"),
            "memory_source": drift.get("memory_source"), "memory_baseline_mb": drift.get("memory_baseline_mb"),
            "memory_last_mb": drift.get("memory_last_mb"), "memory_peak_mb": drift.get("memory_peak_mb"),
            "memory_growth_pct": drift.get("memory_growth_after_warmup_pct"),
            "memory_growth_ci95": drift.get("memory_growth_ci"), "memory_decision": drift.get("memory_decision"),
            "median_window_drift_pct": drift.get("latency_drift_pct")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=1800.0)
    parser.add_argument("--window-s", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=2, help="requests in flight per model")
    parser.add_argument("--out", type=Path, default=None, help="default workflow_logs/soak/<UTC time>")
    args = parser.parse_args(argv)

    from workflows.catalog import load_catalog
    from workflows.host_setup import cache_root
    from workflows.media_weights import ensure_generated
    from workflows.servers import ServerLaunch, start_server
    from workflows.venvs import ensure_venv

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d_%H-%M-%S")
    out = args.out or ROOT / "workflow_logs" / "soak" / f"{stamp}_media"
    out.mkdir(parents=True, exist_ok=True)
    catalog = load_catalog()
    specs = [catalog.specs[i] for i in SPEC_IDS]
    image_spec = next(s for s in specs if s.model_type == "image")
    weights = ensure_generated(image_spec, cache_root())
    spec = combined_spec(specs)
    # The image runner's own setting: MODEL_WEIGHTS_PATH would be read by the other runners too.
    spec = dataclasses.replace(spec, env_vars={**spec.env_vars, "IMAGE_CPU_WEIGHTS_PATH": str(weights)})
    key = secrets.token_urlsafe(24)
    server_dir = out / "server"
    server_dir.mkdir(exist_ok=True)
    launch = ServerLaunch(spec=spec, spec_json_path=spec.write(server_dir / "model_spec.json"), run_dir=server_dir,
                          service_port=free_port(), api_key=key)
    client_python = ensure_venv("media-clients").python
    reports_python = ensure_venv("reports").python
    handle = start_server("local", launch)
    results, code = [], 0
    try:
        wait_healthy(handle.base_url, handle, 900.0)
        pid_file = (server_dir / "server.pid.json").read_text()
        print(f"soak: {len(specs)} models on {handle.base_url} (pid file {server_dir / 'server.pid.json'}); "
              f"{args.duration_s:g} s each, {args.concurrency} in flight each", flush=True)
        wf_args = {"run_mode": "endurance", "endurance_s": str(args.duration_s), "window_s": str(args.window_s),
                   "max_concurrent": str(args.concurrency), "budget_s": str(args.duration_s + 900)}
        procs = []
        for s in specs:
            run_dir = out / s.served_model_name
            run_dir.mkdir(exist_ok=True)
            s.write(run_dir / "model_spec.json")
            (run_dir / "server.pid.json").write_text(pid_file)
            env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": key,
                   "TT_SERVED_MODEL_NAME": s.served_model_name}
            log = open(run_dir / "stress.log", "wb")
            procs.append((s, run_dir, subprocess.Popen(
                [str(client_python), "-m", "stress_tests.run_media_stress", "--run-dir", str(run_dir),
                 "--model-spec-json", str(run_dir / "model_spec.json"), "--server-url", handle.base_url,
                 "--workflow-args-json", json.dumps(wf_args)], env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT),
                log))
        deadline = time.monotonic() + args.duration_s + 1200
        for s, run_dir, proc, log in procs:
            try:
                rc = proc.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
            log.close()
            subprocess.run([str(reports_python), "-m", "reports.run_reports", "--run-dir", str(run_dir),
                            "--model-spec-json", str(run_dir / "model_spec.json"), "--server-url", "",
                            "--workflow-args-json", json.dumps(wf_args), "--ignore-verdict"],
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, capture_output=True, timeout=300)
            results.append(summarise(run_dir, s.served_model_name, rc))
            code |= rc not in (0,)
    finally:
        handle.stop()
    summary = {"started": stamp, "server": {"models": spec.env_vars["MODELS"], "shared_settings": SHARED_SETTINGS},
               "duration_s": args.duration_s, "window_s": args.window_s, "concurrency": args.concurrency,
               "runs": results}
    (out / "soak_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 1 if code else 0


if __name__ == "__main__":
    sys.exit(main())
