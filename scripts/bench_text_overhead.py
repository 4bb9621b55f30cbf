#!/usr/bin/env python3
"""Benchmark: the media server's own overhead per streamed token, with the slot loop's mock backend.

Starts the media server (uvicorn + one worker process) with ``TEXT_BACKEND=mock`` (a named fake:
no model, fake tokens) and ``TEXT_MOCK_STEP_MS`` standing in for the device's time per decode
step, then streams ``--streams`` concurrent requests of ``--tokens`` tokens each (end of
sequence ignored) and reads every byte with plain sockets. With S streams that start together,
the fake device runs ``tokens`` decode steps, so

    overhead per token = (wall - tokens * step_ms) / (S * tokens)

is what the server adds on top of the device: the engine's bookkeeping, the worker pipe, the
event loop, SSE framing and HTTP writes. Each stream's body is checked (the SSE ends with
``data: [DONE]``, usage counts every token); a failed stream fails the run (exit 1). Run from the
repository root:

    .workflow_venvs/dev/bin/python scripts/bench_text_overhead.py --step-ms 20 --streams 1 --tokens 500

One JSON object on stdout (with the 1-minute load average: the host is shared).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import _repo  # noqa: E402,F401  (the repository importable: scripts/_repo.py)

from contracts.retry import GaveUp, wait_http_ok  # noqa: E402

MEDIA_PYTHON = os.path.join(ROOT, ".workflow_venvs", "media-server", "bin", "python")
API_KEY = "bench-text-overhead-key"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _request(port: int, path: str, body: dict) -> bytes:
    payload = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {API_KEY}\r\nContent-Length: {len(payload)}\r\n"
            "Connection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.sendall(head + payload)
        parts = []
        while True:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            parts.append(chunk)
    return b"".join(parts)


def _wait_ready(port: int, process: subprocess.Popen, timeout: float = 120.0) -> None:
    def not_exited() -> None:
        if process.poll() is not None:
            raise SystemExit(f"media server exited with {process.returncode} before it was ready")

    try:
        wait_http_ok(f"the media server to answer /health with 200 on port {port}", f"http://127.0.0.1:{port}/health",
                     deadline_s=timeout, alive_check=not_exited)
    except GaveUp as exc:
        raise SystemExit(str(exc)) from None


def stop_server(process: subprocess.Popen) -> None:
    """SIGINT (the server stops its workers in order), 20 s, then SIGKILL to its whole group."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def one_stream(port: int, index: int, tokens: int) -> tuple[float, int]:
    """(seconds, completion tokens) of one SSE stream; SystemExit when the stream is wrong."""
    body = {"prompt": f"overhead stream {index}", "max_tokens": tokens, "stream": True,
            "temperature": 0.0, "ignore_eos": True, "stream_options": {"include_usage": True}}
    started = time.perf_counter()
    raw = _request(port, "/v1/completions", body)
    seconds = time.perf_counter() - started
    if b" 200 " not in raw.split(b"\r\n", 1)[0] or b"data: [DONE]" not in raw:
        raise SystemExit(f"stream {index} failed: {raw[:300]!r}")
    usage = [json.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b'data: {"id"')
             and b'"usage"' in line]
    completion = usage[-1]["usage"]["completion_tokens"] if usage else 0
    if completion != tokens:
        raise SystemExit(f"stream {index}: {completion} tokens, expected {tokens}")
    return seconds, completion


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step-ms", type=float, default=20.0, help="fake device time per decode step")
    parser.add_argument("--streams", type=int, default=1, help="concurrent streams (<= slots)")
    parser.add_argument("--tokens", type=int, default=500, help="tokens per stream")
    parser.add_argument("--rounds", type=int, default=3, help="repeats; the median round is reported")
    ns = parser.parse_args()
    if not 1 <= ns.streams <= 64 or ns.tokens < 1 or ns.rounds < 1:
        print("bench_text_overhead: --streams must be 1..64, --tokens and --rounds >= 1", file=sys.stderr)
        return 2
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_", "MODEL", "DEVICE"))}
    env.update({"API_KEY": API_KEY, "ENVIRONMENT": "development", "LOG_LEVEL": "WARNING",
                "MODEL_RUNNER": "text-slots", "TEXT_BACKEND": "mock", "MAX_USER_SLOTS": str(max(8, ns.streams)),
                "TEXT_MOCK_STEP_MS": str(ns.step_ms), "MAX_QUEUE_SIZE": "128", "OMP_NUM_THREADS": "1",
                "PYTHONUNBUFFERED": "1"})
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    log = tempfile.NamedTemporaryFile(prefix="bench-text-overhead-", suffix=".log", delete=False)
    process = subprocess.Popen([MEDIA_PYTHON, "-m", "uvicorn", "main:app", "--lifespan", "on", "--host",
                                "127.0.0.1", "--port", str(port), "--no-access-log"],
                               cwd=os.path.join(ROOT, "tt-media-server"), env=env, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` stops the server
    rounds = []
    try:
        _wait_ready(port, process)
        one_stream(port, 0, 8)  # warm the path
        with concurrent.futures.ThreadPoolExecutor(ns.streams) as pool:
            for _ in range(ns.rounds):
                started = time.perf_counter()
                results = list(pool.map(lambda i: one_stream(port, i, ns.tokens), range(ns.streams)))
                wall = time.perf_counter() - started
                total = sum(count for _, count in results)
                overhead = wall - ns.tokens * ns.step_ms / 1000
                rounds.append({"wall_s": round(wall, 3), "tokens": total,
                               "overhead_ms_per_token": round(overhead * 1000 / total, 4)})
                print(json.dumps(rounds[-1]), file=sys.stderr)
    finally:
        stop_server(process)
        log.close()
    median = statistics.median(r["overhead_ms_per_token"] for r in rounds)
    print(json.dumps({"step_ms": ns.step_ms, "streams": ns.streams, "tokens_per_stream": ns.tokens,
                      "load_avg_1m": round(os.getloadavg()[0], 2), "rounds": rounds,
                      "overhead_ms_per_token_median": median}, indent=1))
    os.unlink(log.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
