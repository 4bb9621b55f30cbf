"""``workload=trace``: replay a timestamped trace, each request leaving at its own time.

The trace is read and checked before anything is sent (``trace_file.read_trace``; exit 2 names the
line). Prompts are cut from the local corpus to each row's exact input length; Mooncake
``hash_ids`` blocks become shared token prefixes. Every request has its own release time (an open
loop: no concurrency cap holds one back), and the time it actually left is measured against it.

Why lateness is measured instead of trusted: a client that falls behind a trace (busy event loop,
slow prompt building, too few connections) silently compresses time and offers less load than the
trace. Here each request's lateness is in its row (``lateness_ms``), the point's summary gives its
distribution, and when any request left more than ``max_lateness_ms`` late the point says the
client could not keep up and the run exits 1, instead of reporting the trace as replayed.
"""
from __future__ import annotations

import gc
import math

from benchmarking.prompts import request_body
from benchmarking.runner import WorkItem, run_point
from benchmarking.workloads import Measured, WorkloadPoint, prompt_check
from benchmarking.workloads.corpus import Corpus
from benchmarking.workloads.trace_file import read_trace
from contracts.intervals import percentile
from contracts.model_spec import ModelSpec

MAX_RATE_BINS = 600
# requests the client keeps waiting for their time or in flight at once: one per request up to this
# (an open loop); a longer trace reuses them in order, and a request that had to wait for one shows
# up as lateness, never as silently compressed time
MAX_IN_FLIGHT = 4096


def points(spec: ModelSpec, bench) -> list[WorkloadPoint]:
    """One point: the whole trace. Its isl/osl are the trace's mean lengths (rounded), its
    concurrency and prompt count the number of requests (none is held back)."""
    if not bench.trace_file:
        raise ValueError("workload=trace needs trace_file=PATH")
    max_context = int(spec.device_model_spec.max_context or 0) or None
    trace = read_trace(bench.trace_file, max_context=max_context, time_scale=bench.time_scale)
    n = len(trace.requests)
    isl = round(sum(r.input_tokens for r in trace.requests) / n)
    osl = round(sum(r.output_tokens for r in trace.requests) / n)
    return [WorkloadPoint(isl, osl, n, n, source="trace", workload="trace", data=trace, label=trace.name,
                          span_s=trace.span_s)]


def rate_over_time(offsets: list[float], sends: list[float | None], done: list[float | None],
                   span_s: float) -> dict:
    """Offered (the trace's), sent and completed requests per second in fixed bins (s since the start)."""
    end = max([span_s] + [t for t in sends + done if t is not None])
    bin_s = max(1.0, math.ceil(end / MAX_RATE_BINS))
    bins = int(end // bin_s) + 1

    def per_bin(times) -> list[float]:
        counts = [0] * bins
        for t in times:
            if t is not None:
                counts[min(int(t // bin_s), bins - 1)] += 1
        return [c / bin_s for c in counts]

    return {"bin_s": bin_s, "t_s": [i * bin_s for i in range(bins)], "offered_rps": per_bin(offsets),
            "sent_rps": per_bin(sends), "completed_rps": per_bin(done)}


def measure(ctx, point: WorkloadPoint, budget_s: float | None, pending_signal) -> Measured:
    trace, b = point.data, ctx.bench
    corpus = Corpus(ctx.tokenizer)
    prompts = [corpus.prompt(f"trace:{r.line}", r.input_tokens,
                             corpus.block_prefix(r.hash_ids, b.block_tokens, "mooncake") if r.hash_ids else None)
               for r in trace.requests]
    chat = b.endpoint.endswith("chat/completions")
    items = [WorkItem(request_body(p.text, r.output_tokens, ctx.model, chat, b.body_fields),
                      p.token_len or p.intended_len, r.output_tokens) for p, r in zip(prompts, trace.requests)]
    offsets = [r.at_s for r in trace.requests]
    id_prefix = f"trace-{trace.name}"
    # everything built so far lives until the end: out of the collector's way, so no full collection
    # over the prompts pauses the loop at a release time
    gc.collect()
    gc.freeze()
    try:
        run = run_point(ctx.client_config(), items, offsets, min(len(items), MAX_IN_FLIGHT), None, budget_s,
                        id_prefix=id_prefix, stop_on_signals=True, pending_signal=pending_signal)
    finally:
        gc.unfreeze()
    sends: list[float | None] = [None] * len(items)
    done: list[float | None] = [None] * len(items)
    lateness = []
    for rec in run.records:
        i = int(rec.request_id.rsplit("-", 1)[1])
        rec.scheduled_time = run.origin + offsets[i]
        rec.extra["trace_line"] = trace.requests[i].line
        if rec.send_time:
            sends[i] = rec.send_time - run.origin
            lateness.append((rec.send_time - rec.scheduled_time) * 1000.0)
            if rec.success and rec.latency is not None:
                done[i] = sends[i] + rec.latency
    limit = b.max_lateness_ms
    late = sum(1 for v in lateness if abs(v) > limit)
    summary = {
        "kind": "trace", "trace_file": trace.path, "shape": trace.shape, "requests": len(items),
        "span_s": round(trace.span_s, 6), "time_scale": b.time_scale,
        "offered_rate_rps": round(len(items) / trace.span_s, 6) if trace.span_s > 0 else None,
        "block_tokens": b.block_tokens if trace.shape == "mooncake" else None,
        "lateness_ms": {"n": len(lateness), "p50": _r(percentile(lateness, 50)), "p99": _r(percentile(lateness, 99)),
                        "max": _r(max(lateness, default=None)), "over_limit": late},
        "max_lateness_ms": limit,
        "kept_up": late == 0,
        "rate_over_time": rate_over_time(offsets, sends, done, trace.span_s),
    }
    failed = None
    if late:
        failed = (f"the client could not keep up with trace {trace.path}: {late} of {len(lateness)} requests "
                  f"left more than {limit:g} ms after their timestamp (worst {max(lateness):.1f} ms); "
                  f"the trace was not replayed as written")
    return Measured(run=run, prompt_check=prompt_check(prompts, ctx.tokenizer), summary=summary,
                    warnings=[failed] if failed else [], failed_check=failed)


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)
