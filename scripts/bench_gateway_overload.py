#!/usr/bin/env python3
"""Benchmark: the JWT gateway in front of a real media server at 10x its capacity.

Starts tt-media-server with its mock CNN runner (a named fake: fixed labels after
``--service-ms`` per request, one request at a time, a queue of ``--queue`` behind it) and the
gateway in front of it, then:

1. capacity: requests/s the server answers with 4 in flight, sent directly (``--capacity-s``);
2. at load: Poisson arrivals at half that rate, each sent at random directly or through the
   gateway (``--load-s``): the latency the gateway adds is the difference of the medians, with a
   95% bootstrap interval, and of the p99s;
3. overload: arrivals at ``--overload-x`` (10) times the capacity through the gateway
   (``--overload-s``): every answer's status and error type is counted, the gateway's memory (RSS
   of its process) is sampled twice a second and its growth after warm-up decided on its 95%
   interval (``stress_tests.drift.memory_drift``, limit 10%).

The rule under overload: the client only ever sees 200, the server's own 429 (queue full) or 503
relayed, or the gateway's own 503 ``overloaded``; never a 500/502/504 or a dropped connection.
Exit 0 when the rule held and the memory did not grow, else 1. One JSON object on stdout.

    .workflow_venvs/dev/bin/python scripts/bench_gateway_overload.py
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
import _repo  # noqa: E402,F401  (the repository importable: scripts/_repo.py)

from contracts.intervals import percentile  # noqa: E402
from contracts.retry import GaveUp, NotYet, retry  # noqa: E402
from stress_tests.drift import memory_drift  # noqa: E402
from stress_tests.memory import process_tree_rss  # noqa: E402

MEDIA_PYTHON = ROOT / ".workflow_venvs" / "media-server" / "bin" / "python"
SECRET = "bench-gateway-overload-secret-0123456789"
UPSTREAM_KEY = "bench-gateway-overload-upstream-key"
MODEL = "tiny-cnn"
ALLOWED = {200, 429, 503}
MEMORY_LIMIT_PCT = 10.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _png() -> bytes:
    """A 1x1 grey PNG, built here (the mock classifies any image by its bytes)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\x80")) + chunk(b"IEND", b""))


def _token() -> str:
    """HS256 JWT with the stdlib (no jwt package needed in the client)."""
    import hashlib
    import hmac

    def b64(data: bytes) -> bytes:
        return base64.urlsafe_b64encode(data).rstrip(b"=")
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64(json.dumps({"team_id": "bench", "exp": int(time.time()) + 3600}).encode())
    sig = b64(hmac.new(SECRET.encode(), head + b"." + body, hashlib.sha256).digest())
    return (head + b"." + body + b"." + sig).decode()


class Proc:
    def __init__(self, argv: list[str], cwd: Path, env: dict, log: Path) -> None:
        self.log = log
        with open(log, "wb") as out:
            self.popen = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                          start_new_session=True)

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()


def _wait_http(port: int, path: str, want: int, proc: Proc, what: str, timeout_s: float = 120.0) -> None:
    def probe(_remaining: float) -> None:
        if proc.popen.poll() is not None:
            raise SystemExit(f"{what} exited ({proc.popen.returncode}): {proc.log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
                sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
                status = int(sock.recv(64).split(b" ", 2)[1])
        except (OSError, ValueError, IndexError) as exc:
            raise NotYet(str(exc)) from None
        if status != want:
            raise NotYet(f"HTTP {status}")
    try:
        retry(f"{what} to answer {path} with {want}", probe, deadline_s=timeout_s, delay_s=0.2)
    except GaveUp as exc:
        raise SystemExit(f"{exc}\n{proc.log.read_text()[-2000:]}") from None


async def _one(port: int, head: bytes, body: bytes) -> tuple[int | None, str | None, float]:
    """(status, error type from the JSON body, seconds) of one request; status None: no answer."""
    started = time.perf_counter()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 30)
        writer.write(head + body)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 60)
        writer.close()
    except (OSError, asyncio.TimeoutError) as exc:
        return None, f"{type(exc).__name__}: {exc}", time.perf_counter() - started
    elapsed = time.perf_counter() - started
    try:
        status = int(raw.split(b" ", 2)[1])
    except (ValueError, IndexError):
        return None, f"not HTTP: {raw[:60]!r}", elapsed
    kind = None
    if status != 200:
        try:
            kind = str(json.loads(raw.split(b"\r\n\r\n", 1)[1]).get("error", {}).get("type"))
        except (ValueError, AttributeError, IndexError):
            kind = "unparsed"
    return status, kind, elapsed


def _request(authorization: str) -> tuple[bytes, bytes]:
    body = json.dumps({"model": MODEL, "image": base64.b64encode(_png()).decode(), "top_k": 1}).encode()
    head = (f"POST /v1/cnn/search-image HTTP/1.1\r\nHost: bench\r\nAuthorization: {authorization}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    return head, body


async def _open_loop(rate: float, seconds: float, pick, sample=None) -> list[tuple[str, int | None, str | None, float]]:
    """Poisson arrivals for ``seconds``; ``pick()`` -> (label, port, head, body) per arrival."""
    rng = random.Random(7)
    tasks, t0 = [], time.perf_counter()
    next_t, next_sample = t0, t0

    async def labelled(label, port, head, body):
        return (label, *await _one(port, head, body))

    while True:
        next_t += rng.expovariate(rate)
        now = time.perf_counter()
        if next_t - t0 > seconds:
            break
        while sample is not None and next_sample <= now:
            sample(now - t0)
            next_sample += 0.5
        if next_t > now:
            await asyncio.sleep(next_t - now)
        tasks.append(asyncio.ensure_future(labelled(*pick())))
    return list(await asyncio.gather(*tasks))


def _bootstrap_median_diff(a: list[float], b: list[float], iterations: int = 2000) -> list[float] | None:
    """95% percentile-bootstrap interval of median(b) - median(a), seeded."""
    if len(a) < 5 or len(b) < 5:
        return None
    rng = random.Random(11)
    diffs = sorted(statistics.median(rng.choices(b, k=len(b))) - statistics.median(rng.choices(a, k=len(a)))
                   for _ in range(iterations))
    return [round(diffs[int(0.025 * iterations)] * 1000, 3), round(diffs[int(0.975 * iterations) - 1] * 1000, 3)]


def run(args: argparse.Namespace) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="gateway-overload-"))
    server_port, gateway_port = _free_port(), _free_port()
    env = _server_env(args)
    server = Proc([str(MEDIA_PYTHON), "-m", "uvicorn", "main:app", "--lifespan", "on", "--host", "127.0.0.1",
                   "--port", str(server_port), "--no-access-log"], ROOT / "tt-media-server", env, tmp / "server.log")
    gateway = None
    try:
        _wait_http(server_port, "/health", 200, server, "the media server")
        gateway = Proc([str(MEDIA_PYTHON), "-m", "gateway", "--upstream", f"http://127.0.0.1:{server_port}",
                        "--port", str(gateway_port), "--upstream-api-key-env", "UPSTREAM_KEY",
                        "--max-in-flight", str(args.max_in_flight)], ROOT / "tt-media-server", env, tmp / "gateway.log")
        _wait_http(gateway_port, "/v1/models", 401, gateway, "the gateway")
        direct = (server_port, *_request(f"Bearer {UPSTREAM_KEY}"))
        via = (gateway_port, *_request(f"Bearer {_token()}"))
        loop = asyncio.new_event_loop()
        capacity = _measure_capacity(loop, direct, args.capacity_s)
        added = _measure_added_latency(loop, capacity, args.load_s, direct, via)
        over, samples = _overload(loop, args.overload_x * capacity, args.overload_s, via, gateway)
        loop.close()
        return _overload_result(args, capacity, added, over, samples, gateway)
    finally:
        if gateway is not None:
            gateway.stop()
        server.stop()


def _server_env(args: argparse.Namespace) -> dict[str, str]:
    """The media server's (and the gateway's) environment: the mock CNN runner, one request at a time."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_", "MODEL", "DEVICE"))}
    env.update({"MODELS": f"{MODEL}=mock-cnn", "API_KEY": UPSTREAM_KEY, "ENVIRONMENT": "development",
                "MOCK_INFERENCE_DELAY_MS": str(args.service_ms), "MAX_BATCH_SIZE": "1",
                "MAX_QUEUE_SIZE": str(args.queue), "LOG_LEVEL": "WARNING", "PYTHONUNBUFFERED": "1",
                "JWT_SECRET": SECRET, "UPSTREAM_KEY": UPSTREAM_KEY})
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    return env


def _measure_capacity(loop: asyncio.AbstractEventLoop, direct: tuple, seconds: float) -> float:
    """1. capacity: requests/s answered 200, closed loop with 4 in flight, sent directly to the server."""
    async def closed(seconds: float) -> int:
        end, done = time.perf_counter() + seconds, [0]

        async def worker():
            while time.perf_counter() < end:
                status, _, _ = await _one(*direct)
                done[0] += status == 200
        await asyncio.gather(*(worker() for _ in range(4)))
        return done[0]
    capacity = loop.run_until_complete(closed(seconds)) / seconds
    if capacity <= 0:
        raise SystemExit("the media server answered nothing in the capacity phase")
    return capacity


def _measure_added_latency(loop: asyncio.AbstractEventLoop, capacity: float, seconds: float, direct: tuple,
                           via: tuple) -> dict:
    """2. at load: half the capacity, each arrival direct or through the gateway at random; the latency the
    gateway adds is the difference of the medians (with its bootstrap interval) and of the p99s."""
    rng = random.Random(3)
    at_load = loop.run_until_complete(_open_loop(
        capacity / 2, seconds, lambda: ("gateway", *via) if rng.random() < 0.5 else ("direct", *direct)))
    lat = {k: [e for label, s, _, e in at_load if label == k and s == 200] for k in ("direct", "gateway")}
    added = {"n_direct": len(lat["direct"]), "n_gateway": len(lat["gateway"]),
             "direct_p50_ms": _ms(percentile(lat["direct"], 50)),
             "gateway_p50_ms": _ms(percentile(lat["gateway"], 50)),
             "direct_p99_ms": _ms(percentile(lat["direct"], 99)),
             "gateway_p99_ms": _ms(percentile(lat["gateway"], 99)),
             "failed": sum(1 for _, s, _, _ in at_load if s != 200),
             "failed_by_status": _by_status(r for r in at_load if r[1] != 200)}
    if lat["direct"] and lat["gateway"]:
        added["added_p50_ms"] = round(added["gateway_p50_ms"] - added["direct_p50_ms"], 3)
        added["added_p50_ci95_ms"] = _bootstrap_median_diff(lat["direct"], lat["gateway"])
        added["added_p99_ms"] = round(added["gateway_p99_ms"] - added["direct_p99_ms"], 3)
    return added


def _overload(loop: asyncio.AbstractEventLoop, rate: float, seconds: float, via: tuple,
              gateway: Proc) -> tuple[list, list[tuple[float, float]]]:
    """3. overload through the gateway: every answer, and the gateway's RSS sampled twice a second."""
    samples: list[tuple[float, float]] = []

    def sample(t: float) -> None:
        rss = process_tree_rss(gateway.popen.pid)
        if rss:
            samples.append((t, rss))
    over = loop.run_until_complete(_open_loop(rate, seconds, lambda: ("gateway", *via), sample))
    return over, samples


def _overload_result(args: argparse.Namespace, capacity: float, added: dict, over: list,
                     samples: list[tuple[float, float]], gateway: Proc) -> dict:
    """The JSON object: the three phases, the gateway's memory drift, and whether the overload rule held."""
    counts = _by_status(over)
    own = sum(1 for _, s, k, _ in over if s == 503 and k == "overloaded")
    bad = {k: v for k, v in counts.items() if not k.split(" ")[0].isdigit() or int(k.split(" ")[0]) not in ALLOWED}
    memory = memory_drift(samples, args.overload_s, 1.0, MEMORY_LIMIT_PCT)
    ok_lat = [e for _, s, _, e in over if s == 200]
    gateway_alive = gateway.popen.poll() is None
    return {
        "capacity_rps": round(capacity, 2),
        "at_load": {"offered_rps": round(capacity / 2, 2), "seconds": args.load_s, **added},
        "overload": {"offered_rps": round(args.overload_x * capacity, 2), "times_capacity": args.overload_x,
                     "seconds": args.overload_s, "sent": len(over), "by_status": dict(sorted(counts.items())),
                     "gateway_own_503": own, "relayed_429": counts.get("429 queue_full", 0),
                     "not_allowed": bad, "answered_200_p50_ms": _ms(percentile(ok_lat, 50)),
                     "gateway_max_in_flight": args.max_in_flight, "upstream_queue": args.queue,
                     "gateway_alive_after": gateway_alive},
        "gateway_memory": {"samples": memory.n, "baseline_mb": memory.baseline_mb, "last_mb": memory.last_mb,
                           "peak_mb": memory.peak_mb, "growth_pct": memory.growth_pct, "ci95_pct": memory.ci_pct,
                           "limit_pct": MEMORY_LIMIT_PCT, "decision": memory.decision, "detail": memory.detail},
        "passed": not bad and gateway_alive and memory.decision != "fail" and len(over) > 0,
    }


def _by_status(results) -> dict[str, int]:
    """'200', '429 queue_full', '503 overloaded', 'no answer (ConnectionResetError)' ... -> count."""
    counts: dict[str, int] = {}
    for _, status, kind, _ in results:
        key = (f"{status}" + (f" {kind}" if kind else "")) if status is not None else \
            f"no answer ({kind.split(':')[0] if kind else 'unknown'})"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--service-ms", type=int, default=50, help="mock runner time per request (ms)")
    parser.add_argument("--queue", type=int, default=4, help="the media server's MAX_QUEUE_SIZE")
    parser.add_argument("--max-in-flight", type=int, default=8, help="the gateway's --max-in-flight")
    parser.add_argument("--capacity-s", type=float, default=4.0)
    parser.add_argument("--load-s", type=float, default=20.0)
    parser.add_argument("--overload-s", type=float, default=30.0)
    parser.add_argument("--overload-x", type=float, default=10.0, help="offered load / capacity")
    args = parser.parse_args(argv)
    if not MEDIA_PYTHON.exists():
        print(f"media-server venv missing at {MEDIA_PYTHON}", file=sys.stderr)
        return 2
    result = run(args)
    print(json.dumps(result, indent=1))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
