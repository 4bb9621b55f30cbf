#!/usr/bin/env python3
"""Benchmark: the first-byte latency the JWT gateway adds in front of a streaming server.

Starts the benchmarks' stub server (TTFT 0, a token every --itl-ms) and the gateway in front of
it, then sends the same streaming request N times, alternating direct and through the gateway,
one at a time, and reports time to first byte (request written -> first body byte) for each path
and the difference of the medians. Run from the repository root:

    .workflow_venvs/dev/bin/python scripts/bench_gateway.py --requests 200

The gateway runs in the media-server venv (its runtime); the client is plain sockets, so no client
library's own latency is in the figures. One JSON object on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import _repo  # noqa: E402,F401  (the repository importable: scripts/_repo.py)

from contracts.intervals import percentile  # noqa: E402
from contracts.retry import GaveUp, NotYet, retry  # noqa: E402

MEDIA_PYTHON = os.path.join(ROOT, ".workflow_venvs", "media-server", "bin", "python")
SECRET = "bench-gateway-secret-0123456789abcdef"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(port: int, timeout: float = 60.0) -> None:
    def listening(_remaining_s: float) -> None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError as exc:
            raise NotYet(str(exc)) from None

    try:
        retry(f"something to listen on port {port}", listening, deadline_s=timeout, delay_s=0.05)
    except GaveUp as exc:
        raise SystemExit(str(exc)) from None


def _token() -> str:
    import jwt

    return jwt.encode({"team_id": "bench", "exp": int(time.time()) + 3600}, SECRET, algorithm="HS256")


def ttfb(port: int, token: str, tokens: int) -> tuple[float, float]:
    """(seconds to the first body byte, seconds to the end) of one streaming request."""
    body = json.dumps({"model": "stub-model", "prompt": "x", "max_tokens": tokens, "stream": True}).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sent = time.perf_counter()
        sock.sendall(head + body)
        data = b""
        first = None
        while True:  # until EOF or the last chunk of a chunked body (servers may keep the socket)
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            if first is None and b"\r\n\r\n" in data and len(data) > data.index(b"\r\n\r\n") + 4:
                first = time.perf_counter()
            if data.endswith(b"0\r\n\r\n"):
                break
        end = time.perf_counter()
    if b" 200 " not in data.split(b"\r\n", 1)[0]:
        raise SystemExit(f"request failed: {data[:200]!r}")
    return (first or end) - sent, end - sent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=4)
    parser.add_argument("--itl-ms", type=float, default=1.0)
    ns = parser.parse_args()
    stub_port, gateway_port = _free_port(), _free_port()
    env = {**os.environ, "PYTHONPATH": ROOT, "JWT_SECRET": SECRET}
    processes = [
        subprocess.Popen([sys.executable, "-m", "benchmarking.stub_server", "--port", str(stub_port),
                          "--itl-ms", str(ns.itl_ms)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL),
        subprocess.Popen([MEDIA_PYTHON, "-m", "gateway", "--upstream", f"http://127.0.0.1:{stub_port}",
                          "--port", str(gateway_port)], cwd=os.path.join(ROOT, "tt-media-server"), env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` stops the children
    try:
        _wait(stub_port)
        _wait(gateway_port)
        token = _token()
        for _ in range(20):  # warm both paths (connections, imports, caches)
            ttfb(stub_port, token, ns.tokens)
            ttfb(gateway_port, token, ns.tokens)
        direct, through = [], []
        for _ in range(ns.requests):
            direct.append(ttfb(stub_port, token, ns.tokens)[0])
            through.append(ttfb(gateway_port, token, ns.tokens)[0])
    finally:
        for process in processes:
            process.terminate()
            process.wait(10)
    ms = lambda values, q: round(percentile(values, q) * 1000, 3)  # noqa: E731
    report = {"requests": ns.requests, "load_avg": os.getloadavg(),
              "direct_ttfb_ms": {"p50": ms(direct, 50), "p90": ms(direct, 90), "p99": ms(direct, 99)},
              "gateway_ttfb_ms": {"p50": ms(through, 50), "p90": ms(through, 90), "p99": ms(through, 99)},
              "added_p50_ms": round((statistics.median(through) - statistics.median(direct)) * 1000, 3)}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
