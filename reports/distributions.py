"""Per-request TTFT/TPOT distributions for the report's plots.

The per-request file (``point_*.requests.jsonl``) is written by the load generator; this reader
is tolerant of the usual field spellings (ms or seconds, vLLM-style names) because the plots
are a view, not a gate. When no per-request file exists the point's own percentiles are used.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from records.distribution import Distribution
from records.distribution import summarise as distribution_of


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _ms(rec: dict, ms_keys: tuple[str, ...], s_keys: tuple[str, ...]) -> float | None:
    for key in ms_keys:
        v = _num(rec.get(key))
        if v is not None:
            return v
    for key in s_keys:
        v = _num(rec.get(key))
        if v is not None:
            return v * 1000.0
    return None


def _request_values(rec: dict) -> tuple[float | None, float | None]:
    # Warm-up requests are excluded from the point's metrics, so from its plots too.
    if rec.get("warmup") or rec.get("success") is False or rec.get("ok") is False or rec.get(
            "error"):
        return None, None
    ttft = _ms(rec, ("ttft_ms",), ("ttft_s", "ttft"))
    tpot = _ms(rec, ("tpot_ms",), ("tpot_s", "tpot"))
    if tpot is None and ttft is not None:
        e2el, out = _e2el_ms(rec), _output_tokens(rec)
        if e2el is not None and out is not None and out > 1:
            tpot = (e2el - ttft) / (out - 1)
    return ttft, tpot


def _e2el_ms(rec: dict) -> float | None:
    return _ms(rec, ("e2el_ms", "latency_ms"), ("e2el_s", "latency", "e2el"))


def _output_tokens(rec: dict) -> float | None:
    """The request's output tokens, under the first of the names the per-request files use."""
    for key in ("output_tokens", "output_len", "completion_tokens", "num_output_tokens"):
        out = _num(rec.get(key))
        if out is not None:
            return out
    return None


def _output_rate(rec: dict) -> float | None:
    """Output tokens per second of one completed, measured request over its whole wall time (first
    token included): what one user saw of the point's output throughput."""
    if rec.get("warmup") or rec.get("success") is False or rec.get("ok") is False or rec.get("error"):
        return None
    e2el, out = _e2el_ms(rec), _output_tokens(rec)
    if e2el is None or e2el <= 0 or out is None or out < 1:
        return None
    return out / (e2el / 1000.0)


def request_output_rates(path: Path) -> list[float] | None:
    """Output tokens/s of each completed, measured request of a per-request file (``_output_rate``);
    None when the file cannot be read."""
    rates: list[float] = []
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    rec = json.loads(line) if line.strip() else None
                except ValueError:
                    continue
                rate = _output_rate(rec) if isinstance(rec, dict) else None
                if rate is not None:
                    rates.append(rate)
    except OSError:
        return None
    return rates


def summarise(values: list[float], source: str = "requests") -> Distribution | None:
    """The distribution with its histogram (``records.distribution.summarise``), None for no values."""
    return distribution_of(values, source) if values else None


def from_requests(path: Path) -> tuple[Distribution | None, Distribution | None]:
    values = request_values(path)
    if values is None:
        return None, None
    return summarise(values[0]), summarise(values[1])


def request_values(path: Path) -> tuple[list[float], list[float]] | None:
    """(TTFTs, TPOTs) in ms of the completed, measured requests of a per-request file; None when
    the file cannot be read."""
    ttfts: list[float] = []
    tpots: list[float] = []
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(rec, dict):
                    continue
                ttft, tpot = _request_values(rec)
                if ttft is not None:
                    ttfts.append(ttft)
                if tpot is not None:
                    tpots.append(tpot)
    except OSError:
        return None
    return ttfts, tpots


def from_metrics(metrics: dict, name: str) -> Distribution | None:
    """Fallback from the point's summary keys (median_/pNN_/mean_<name>_ms)."""
    def get(prefix: str) -> float | None:
        return _num(metrics.get(f"{prefix}_{name}_ms"))

    p50 = get("median") if get("median") is not None else get("p50")
    if p50 is None and get("mean") is None:
        return None
    return Distribution(
        source="metrics",
        count=metrics["completed"] if type(metrics.get("completed")) is int else None,
        p5=get("p5"), p25=get("p25"), p50=p50, p75=get("p75"), p95=get("p95"),
        p99=get("p99"), mean=get("mean"),
        min=get("min"), max=get("max"))
