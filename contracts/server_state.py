"""The server's own state during a point: its /metrics sampled once a second (stdlib only).

Why beside the client's numbers: a TTFT that climbs halfway through a point means little alone; the
same seconds of the server's waiting queue, running batch and KV-cache use say whether it queued,
ran out of cache or recomputed prefixes. The sampler runs in its own thread (a blocking scrape
never delays a request's send or a chunk's stamp on the client's event loop) and stamps each
sample on the client's clock (``time.perf_counter``), the clock of the request rows'
``send_time_s``, so the report plots both over one time axis.

Series kept (only those the server exposes; the rest stay out of the record):

* vLLM: ``vllm:num_requests_running``, ``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc``,
  and the prefix-cache counters ``vllm:prefix_cache_queries_total`` / ``vllm:prefix_cache_hits_total``
  (tokens looked up / found), kept as the hit rate of each interval.
* the media server: ``tt_media_server_queue_depth`` and the mean of ``tt_media_server_batch_size``
  over each interval.
"""
from __future__ import annotations

import threading
import time
from typing import Any

from contracts import prometheus as prom

# series name -> (help, metric base name) for gauges read as they are
GAUGES = {
    "running": ("Requests the engine is running (vllm:num_requests_running).", "vllm:num_requests_running"),
    "waiting": ("Requests waiting to be scheduled (vllm:num_requests_waiting).", "vllm:num_requests_waiting"),
    "kv_cache_usage_pct": ("KV-cache blocks in use, percent (100 x vllm:kv_cache_usage_perc).",
                           "vllm:kv_cache_usage_perc"),
    "queue_depth": ("Requests waiting in the media server's queue (tt_media_server_queue_depth).",
                    "tt_media_server_queue_depth"),
}
# series name -> (help, numerator counter, denominator counter): ratio of their increases per interval
RATIOS = {
    "prefix_cache_hit_rate": ("Share of prompt tokens found in the prefix cache during the interval "
                              "(increase of vllm:prefix_cache_hits / of vllm:prefix_cache_queries).",
                              "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"),
    "mean_batch_size": ("Mean requests per batch the media server formed during the interval "
                        "(increase of tt_media_server_batch_size_sum / _count).",
                        "tt_media_server_batch_size_sum", "tt_media_server_batch_size_count"),
}
SERIES_HELP = {name: spec[0] for name, spec in {**GAUGES, **RATIOS}.items()}
# the metrics a sample keeps (parsing only these keeps the sampler's share of the client's CPU small)
SAMPLED = tuple(sorted({base for _, base in GAUGES.values()} | {m for _, a, b in RATIOS.values() for m in (a, b)}))


def total(sample: dict[str, float], base: str) -> float | None:
    """Sum of every labelled series of metric ``base`` in a scrape, or None when it has none."""
    values = [v for k, v in sample.items() if k == base or k.startswith(base + "{")]
    return sum(values) if values else None


def prefix_cache_hit_rate(before: dict[str, float] | None,
                          after: dict[str, float] | None) -> dict[str, float | None] | None:
    """Prefix-cache hits over lookups (prompt tokens) between two scrapes; None without the counters."""
    if not before or not after:
        return None
    hits0, hits1 = (total(s, "vllm:prefix_cache_hits_total") for s in (before, after))
    queries0, queries1 = (total(s, "vllm:prefix_cache_queries_total") for s in (before, after))
    if hits0 is None or hits1 is None or queries0 is None or queries1 is None:
        return None
    dq, dh = queries1 - queries0, hits1 - hits0
    return {"hit_rate": dh / dq if dq > 0 else None, "hit_tokens": dh, "queried_tokens": dq}


class ServerStateSampler:
    """Scrape ``base_url``/metrics every ``interval_s`` from start() to stop(); ``series()`` is the record."""

    def __init__(self, base_url: str, api_key: str | None = None, interval_s: float = 1.0):
        self.base_url, self.api_key, self.interval_s = base_url, api_key, interval_s
        self.samples: list[tuple[float, dict[str, float]]] = []
        self.missed = 0
        self.origin = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "ServerStateSampler":
        self.origin = time.perf_counter()
        self._thread = threading.Thread(target=self._loop, name="server-state", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        tick = self.origin
        while not self._stop.is_set():
            scrape = prom.fetch_metrics(self.base_url, self.api_key, timeout=max(self.interval_s, 0.5), names=SAMPLED)
            if scrape is None:
                self.missed += 1
            else:
                self.samples.append((time.perf_counter(), scrape))
            tick += self.interval_s
            self._stop.wait(max(0.0, tick - time.perf_counter()))

    def stop(self) -> dict[str, Any] | None:
        """Stop sampling (waits for a scrape in progress) and return the record's time series."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 15.0)
        return self.series()

    def series(self) -> dict[str, Any] | None:
        if not self.samples:
            return None
        times = [round(t - self.origin, 3) for t, _ in self.samples]
        out: dict[str, list[float | None]] = {}
        for name, (_, base) in GAUGES.items():
            values = [total(s, base) for _, s in self.samples]
            if name == "kv_cache_usage_pct":
                values = [None if v is None else v * 100.0 for v in values]
            if any(v is not None for v in values):
                out[name] = values
        for name, (_, num, den) in RATIOS.items():
            values = []
            prev: tuple[float | None, float | None] | None = None
            for _, s in self.samples:
                cur = (total(s, num), total(s, den))
                values.append(None if prev is None else _rate_between(prev, cur))
                prev = cur
            if total(self.samples[-1][1], den) is not None:  # the server has the counter
                out[name] = values
        return {"interval_s": self.interval_s, "origin_perf_s": self.origin, "t_s": times, "series": out,
                "samples": len(self.samples), "missed": self.missed}


def _rate_between(prev: tuple[float | None, float | None], cur: tuple[float | None, float | None]) -> float | None:
    """A ratio's change between two scrapes of (numerator, denominator): the numerator's growth over the
    denominator's; None when either scrape lacks a counter or the denominator did not grow."""
    (num0, den0), (num1, den1) = prev, cur
    if num0 is None or den0 is None or num1 is None or den1 is None or not den1 - den0 > 0:
        return None
    return (num1 - num0) / (den1 - den0)
