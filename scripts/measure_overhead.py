#!/usr/bin/env python3
"""Measure run.py's own overhead with warm venvs: process start -> first request at the server.

Server start-up is excluded by construction: run.py is pointed (``--server-url``) at a tiny
in-process HTTP server that is already up and records when the first request arrives. Each
sample starts ``python3 run.py`` fresh (interpreter start, uv bootstrap check, venv fingerprints,
re-exec into the orchestrator venv, catalog, spec resolution, run directory, host and venv checks)
and is stopped with SIGTERM once the first request is in.

    python3 scripts/measure_overhead.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
import _repo  # noqa: E402,F401  (the repository importable: scripts/_repo.py)

from contracts.retry import GaveUp, NotYet, retry  # noqa: E402

MODEL = "SmolLM2-135M-Instruct"
first_request: list[float] = []


class Handler(BaseHTTPRequestHandler):
    def _json(self, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _mark(self) -> None:
        if not first_request:
            first_request.append(time.time())

    def do_GET(self) -> None:  # noqa: N802
        self._mark()
        self._json({"object": "list", "data": [{"id": MODEL, "object": "model"}]} if "models" in self.path else {})

    def do_POST(self) -> None:  # noqa: N802
        self._mark()
        length = int(self.headers.get("Content-Length", 0))
        self.rfile.read(length)
        self._json({"choices": [{"text": " ok", "index": 0, "finish_reason": "length"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    def log_message(self, *args) -> None:
        pass


def one_sample(port: int) -> float:
    first_request.clear()
    with tempfile.TemporaryDirectory() as out:
        started = time.time()
        proc = subprocess.Popen(
            [sys.executable, str(REPO / "run.py"), "--model", MODEL, "--device", "cpu", "--workflow", "benchmarks",
             "--server-url", f"http://127.0.0.1:{port}", "--no-auth", "--disable-trace-capture",
             "--workflow-args", "mode=smoke", "--output-dir", str(Path(out) / "run")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)

        def reached(_remaining_s: float) -> None:
            if not first_request and proc.poll() is None:
                raise NotYet("no request yet")

        try:
            retry("run.py's first request to the server", reached, deadline_s=60, delay_s=0.002)
        except GaveUp:
            pass  # judged below: no request is an error
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        if not first_request:
            raise SystemExit("run.py never reached the server (is the catalog/venv set up? run it once by hand)")
        return first_request[0] - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    one_sample(port)  # warm-up: builds/reuses venvs, page cache
    samples = [one_sample(port) for _ in range(args.runs)]
    server.shutdown()
    print(f"run.py start -> first server request (warm venvs, {args.runs} runs): "
          f"median {statistics.median(samples):.3f} s, min {min(samples):.3f} s, max {max(samples):.3f} s "
          f"(goal < 2 s; host load average {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
