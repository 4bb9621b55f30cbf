"""Metric math over per-request records (stdlib only, so the report and tests can reuse it).

Definitions follow vLLM's `bench serve` so our numbers are comparable key for key; each key's
definition is the description of its field on ``records.bench.BenchMetrics``. Percentiles use
linear interpolation between closest ranks (numpy's default, ``contracts.intervals.percentile``) and
std is the population std (numpy's default). An empty sample gives null, not 0.0: a point where nothing completed has no
latency, and a judge must not read 0 ms as a fast answer. Derived figures (throughputs per user,
decode/prefill, error rate) are computed by the record (``BenchMetrics.derive``), not here.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from contracts.intervals import percentile
from records.bench import BenchMetrics, PointParams


@dataclass
class RequestRecord:
    """What the client learned about one request; times are seconds on the perf_counter clock."""

    index: int
    request_id: str
    prompt_len: int              # intended input tokens (from the dataset)
    requested_output_len: int
    warmup: bool = False
    send_time: float = 0.0
    success: bool = False
    ttft: float | None = None            # s, first chunk with non-empty choices
    ttft_nonempty: float | None = None   # s, first chunk with non-empty text
    latency: float | None = None         # s, dispatch -> last content chunk
    chunk_times: list[float] = field(default_factory=list)  # s since dispatch, content chunks only
    input_tokens: int | None = None
    input_token_source: str = "dataset"  # usage | dataset
    output_tokens: int | None = None
    output_token_source: str = "usage"   # usage | tokenizer | chunks
    status: int | None = None
    error_class: str | None = None
    error: str | None = None
    server_request_id: str | None = None
    generated_text: str | None = None
    scheduled_time: float | None = None  # perf_counter the request was due to leave (timed workloads)
    extra: dict = field(default_factory=dict)  # a workload's tags for the row (conversation, turn, ...)

    @property
    def itls(self) -> list[float]:
        ct = self.chunk_times
        return [ct[i] - ct[i - 1] for i in range(1, len(ct))]

    @property
    def tpot(self) -> float | None:
        """(e2el - ttft) / (output_tokens - 1), only defined for more than one output token."""
        if not self.success or not self.output_tokens or self.output_tokens <= 1:
            return None
        return (self.latency - self.ttft) / (self.output_tokens - 1)

    def to_json(self) -> dict:
        """The JSONL row: times in ms, chunk gaps included so any metric can be recomputed later."""
        ms = lambda v: None if v is None else round(v * 1000.0, 4)  # noqa: E731
        return {
            "index": self.index, "request_id": self.request_id, "server_request_id": self.server_request_id,
            "warmup": self.warmup, "success": self.success, "status": self.status,
            "error_class": self.error_class, "error": self.error,
            "send_time_s": self.send_time, "ttft_ms": ms(self.ttft), "ttft_first_nonempty_ms": ms(self.ttft_nonempty),
            "e2el_ms": ms(self.latency), "tpot_ms": ms(self.tpot),
            "chunk_times_ms": [round(t * 1000.0, 4) for t in self.chunk_times],
            "prompt_len": self.prompt_len, "input_tokens": self.input_tokens,
            "input_token_source": self.input_token_source,
            "requested_output_len": self.requested_output_len, "output_tokens": self.output_tokens,
            "output_token_source": self.output_token_source,
            **({"scheduled_time_s": self.scheduled_time,
                "lateness_ms": (None if not self.send_time
                                else round((self.send_time - self.scheduled_time) * 1000.0, 4))}
               if self.scheduled_time is not None else {}),
            **{k: v for k, v in self.extra.items() if not hasattr(self, k)},
        }


def _stats(name: str, values_s: list[float], percentiles: list[float], out: dict) -> None:
    vals = [v * 1000.0 for v in values_s]
    n = len(vals)
    mean = sum(vals) / n if n else None
    out[f"mean_{name}_ms"] = mean
    out[f"median_{name}_ms"] = percentile(vals, 50) if n else None
    out[f"std_{name}_ms"] = math.sqrt(sum((v - mean) ** 2 for v in vals) / n) if n else None
    for p in percentiles:
        out[f"p{p:g}_{name}_ms"] = percentile(vals, p) if n else None


def compute_metrics(records: list[RequestRecord], duration: float, *, isl: int, osl: int,
                    max_concurrency: int, num_prompts: int, percentiles: list[float],
                    goodput: dict[str, float] | None = None) -> dict:
    """Summary metrics of one point from its measured (non-warm-up) request records.

    Returns the ``BenchMetrics`` dict: the measured figures from here, the derived ones filled
    by the record (``BenchMetrics.derive``)."""
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.success]
    failed = [r for r in measured if not r.success]
    total_in = sum(r.input_tokens if r.input_tokens is not None else r.prompt_len for r in ok)
    total_out = sum(r.output_tokens or 0 for r in ok)
    m: dict = {
        "duration": duration, "completed": len(ok), "failed": len(failed),
        "total_input_tokens": total_in, "total_output_tokens": total_out,
    }
    ttfts = [r.ttft for r in ok]
    tpots = [t for t in (r.tpot for r in ok) if t is not None]
    itls = [g for r in ok for g in r.itls]
    e2els = [r.latency for r in ok]
    for name, vals in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        _stats(name, vals, percentiles, m)

    if goodput:
        good = 0
        for r in ok:
            checks = {"ttft": r.ttft, "tpot": r.tpot or 0.0, "e2el": r.latency}
            if all(checks[k] * 1000.0 <= slo for k, slo in goodput.items()):
                good += 1
        m["request_goodput"] = good / duration if ok and duration > 0 else 0.0
    else:
        m["request_goodput"] = None

    nonempty = [r.ttft_nonempty for r in ok if r.ttft_nonempty is not None]
    m["mean_ttft_first_nonempty_ms"] = sum(nonempty) * 1000.0 / len(nonempty) if nonempty else None
    m["failures_by_class"] = dict(sorted(Counter(r.error_class or "other" for r in failed).items()))
    sources = {r.output_token_source for r in ok}
    m["output_token_source"] = sources.pop() if len(sources) == 1 else ("mixed" if sources else None)
    m["output_length_mismatches"] = sum(1 for r in ok if r.output_tokens != r.requested_output_len)
    drift = [r.input_tokens - r.prompt_len for r in ok
             if r.input_token_source == "usage" and r.input_tokens is not None]
    m["input_token_drift"] = sum(drift) / len(drift) if drift else None
    m["chunks_total"] = sum(len(r.chunk_times) for r in ok)
    metrics = BenchMetrics.from_dict(m)
    metrics.derive(PointParams(isl=isl, osl=osl, max_concurrency=max_concurrency, num_prompts=num_prompts))
    return metrics.to_dict()
