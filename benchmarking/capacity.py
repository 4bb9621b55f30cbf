"""Measure how many requests and chunks per second the client sustains (a script, never a test).

Run against the stub in burst mode (no programmed delays, pre-rendered responses) so the server
is not the bottleneck; pin the client to one core and the stub to another. Prints one JSON line:
req/s, chunks/s, the client's CPU seconds per 1,000 requests and per 1M chunks, and the stub's
CPU seconds over the same window (to show the stub was not the limit).

    python -m benchmarking.capacity --url http://127.0.0.1:PORT --osl 32 --num-requests 5000 --cpu 0
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request

from benchmarking.client import ClientConfig
from benchmarking.prompts import request_body
from benchmarking.runner import WorkItem, run_point


def _stub_cpu(url: str) -> float | None:
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/stub/stats", timeout=5) as resp:
            return float(json.loads(resp.read())["cpu_s"])
    except Exception:  # noqa: BLE001 - not a stub: no stub CPU figure
        return None


def measure(url: str, osl: int, num_requests: int, concurrency: int, endpoint: str = "/v1/completions") -> dict:
    cfg = ClientConfig(base_url=url, endpoint=endpoint, model="stub-model")
    body = request_body("hello world", osl, "stub-model", chat=endpoint.endswith("chat/completions"))
    items = [WorkItem(body, 2, osl)] * num_requests
    run_point(cfg, [WorkItem(body, 2, osl)] * concurrency, [0.0] * concurrency, concurrency)  # connect + warm
    stub0 = _stub_cpu(url)
    cpu0, t0 = time.process_time(), time.perf_counter()
    run = run_point(cfg, items, [0.0] * num_requests, concurrency)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    stub1 = _stub_cpu(url)
    ok = [r for r in run.records if r.success]
    chunks = sum(len(r.chunk_times) for r in ok)
    return {"tool": "tt-bench", "osl": osl, "concurrency": concurrency, "requests": len(ok),
            "failed": len(run.records) - len(ok), "wall_s": wall, "client_cpu_s": cpu,
            "req_per_s": len(ok) / run.duration, "chunks_per_s": chunks / run.duration,
            "cpu_s_per_1k_requests": cpu / len(ok) * 1000 if ok else None,
            "cpu_s_per_1m_chunks": cpu / chunks * 1e6 if chunks else None,
            "stub_cpu_s": (stub1 - stub0) if stub0 is not None and stub1 is not None else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--osl", type=int, default=32)
    ap.add_argument("--num-requests", type=int, default=5000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--cpu", type=int, default=None, help="pin this process to one CPU")
    a = ap.parse_args(argv)
    if a.cpu is not None:
        os.sched_setaffinity(0, {a.cpu})
    print(json.dumps(measure(a.url, a.osl, a.num_requests, a.concurrency)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
