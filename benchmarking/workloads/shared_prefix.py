"""``workload=shared_prefix prefixes=P prefix_tokens=L``: many users behind a few system prompts.

Each point runs twice over the same lengths and arrivals: first without sharing (every prompt's
first ``L`` tokens its own), then with ``P`` shared prefixes of ``L`` tokens (request i carries
prefix i mod P, then ``isl - L`` tokens of its own). The point's record holds the shared run; the
unshared run's rows are kept beside it (``<stem>.unshared.requests.jsonl``).

Why both runs and the server's counters: a lower TTFT alone could be noise or a warmer server; the
server's own prefix-cache counters (``vllm:prefix_cache_queries`` / ``_hits``, tokens looked up and
found, read from /metrics before and after each run) say how much of the prompts it did not
prefill again, and the unshared run, measured the same way on the same server, is what the
sharing is compared with.
"""
from __future__ import annotations

import json
import math
import os
import random
import time

from contracts import prometheus as prom
from benchmarking.arrivals import release_offsets
from benchmarking.prompts import request_body
from benchmarking.runner import WorkItem, run_point
from contracts.server_state import prefix_cache_hit_rate
from benchmarking.sweeps import build_points
from benchmarking.workloads import Measured, WorkloadPoint, latency_stats, prompt_check
from benchmarking.workloads.corpus import Corpus
from contracts.model_spec import ModelSpec


def prefix_len(bench, isl: int) -> int:
    return bench.prefix_tokens or isl // 2


def points(spec: ModelSpec, bench) -> list[WorkloadPoint]:
    """The sweep's points; every one must leave room after the prefix (``prefix_tokens < isl``)."""
    out = []
    for p in build_points(spec, bench):
        plen = prefix_len(bench, p.isl)
        if not 0 < plen < p.isl:
            raise ValueError(f"workload=shared_prefix: prefix_tokens={plen} must be between 1 and isl-1 "
                             f"(point isl={p.isl})")
        out.append(WorkloadPoint(p.isl, p.osl, p.max_concurrency, p.num_prompts, source="shared_prefix",
                                 workload="shared_prefix"))
    return out


def _prompts(corpus: Corpus, point: WorkloadPoint, plen: int, prefixes: int | None, seed: int):
    """Prompts of exactly isl tokens: prefix ``i % prefixes`` (or one of its own when None) + own tail."""
    out = []
    for i in range(point.num_prompts):
        head_key = f"shared_prefix:{seed}:{i % prefixes}" if prefixes else f"unshared:{seed}:{point.isl}:{i}"
        out.append(corpus.shared_prompt(head_key, plen, f"tail:{seed}:{point.isl}:{i}", point.isl))
    return out


def _phase(ctx, point: WorkloadPoint, prompts, budget_s, pending_signal, name: str):
    b = ctx.bench
    chat = b.endpoint.endswith("chat/completions")
    items = [WorkItem(request_body(p.text, point.osl, ctx.model, chat, b.body_fields),
                      p.token_len or p.intended_len, point.osl) for p in prompts]
    offsets = release_offsets(len(items), b.request_rate, b.burstiness, b.ramp, seed=b.seed)
    before = prom.fetch_metrics(ctx.base_url, ctx.api_key)
    run = run_point(ctx.client_config(), items, offsets, point.max_concurrency, None, budget_s,
                    id_prefix=f"{name}-{point.isl}-{point.osl}-{point.max_concurrency}", stop_on_signals=True,
                    pending_signal=pending_signal)
    after = prom.fetch_metrics(ctx.base_url, ctx.api_key) if before is not None and not run.interrupted else None
    ok = [r for r in run.records if r.success]
    return run, {"ttft": latency_stats([r.ttft for r in ok]), "completed": len(ok),
                 "failed": sum(1 for r in run.records if not r.success),
                 "prefix_cache": prefix_cache_hit_rate(before, after)}


def ratio_interval(shared: list[float], unshared: list[float], iterations: int = 2000,
                   seed: int = 0) -> list[float] | None:
    """95% percentile-bootstrap interval of mean(shared) / mean(unshared), each run resampled on its
    own (two independent samples of requests); None with fewer than two requests in either."""
    if len(shared) < 2 or len(unshared) < 2:
        return None
    rng = random.Random(seed)
    stats = []
    for _ in range(iterations):
        a = sum(rng.choice(shared) for _ in shared) / len(shared)
        b = sum(rng.choice(unshared) for _ in unshared) / len(unshared)
        if b > 0:
            stats.append(a / b)
    if not stats:
        return None
    stats.sort()
    last = len(stats) - 1
    return [round(stats[int(0.025 * last)], 4), round(stats[math.ceil(0.975 * last)], 4)]


def measure(ctx, point: WorkloadPoint, budget_s: float | None, pending_signal) -> Measured:
    b = ctx.bench
    plen = prefix_len(b, point.isl)
    corpus = Corpus(ctx.tokenizer)
    started = time.monotonic()
    unshared_prompts = _prompts(corpus, point, plen, None, b.seed)
    unshared_run, unshared = _phase(ctx, point, unshared_prompts, budget_s, pending_signal, "unshared")
    path = os.path.join(ctx.out_dir, point.stem + ".unshared.requests.jsonl")
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r.to_json()) + "\n" for r in unshared_run.records)
    unshared["requests_file"] = ctx.rel(path)
    left = None if budget_s is None else max(1.0, budget_s - (time.monotonic() - started))
    shared_prompts = _prompts(corpus, point, plen, b.prefixes, b.seed)
    if unshared_run.interrupted:  # a signal stopped the first run: the second is not started
        run, shared = unshared_run, unshared
        run.records = []
    else:
        run, shared = _phase(ctx, point, shared_prompts, left, pending_signal, "shared")
    base, with_sharing = unshared["ttft"]["mean_ms"], shared["ttft"]["mean_ms"]
    ratio_ci = ratio_interval([r.ttft for r in run.records if r.success],
                              [r.ttft for r in unshared_run.records if r.success])
    summary = {"kind": "shared_prefix", "prefixes": b.prefixes, "prefix_tokens": plen,
               "prefix_cache": shared["prefix_cache"],
               "shared": shared, "unshared": unshared,
               "ttft_ratio_shared_to_unshared": round(with_sharing / base, 4) if base and with_sharing else None,
               "ttft_ratio_ci95": ratio_ci}
    warnings = []
    if shared["prefix_cache"] is None:
        warnings.append("the server exposes no prefix-cache counters (vllm:prefix_cache_queries/hits) on /metrics: "
                        "no hit rate")
    elif not shared["prefix_cache"]["hit_rate"]:
        warnings.append(f"the server found none of the {shared['prefix_cache']['queried_tokens']:.0f} prompt tokens "
                        "it looked up in its prefix cache (prefix caching off, or prefixes shorter than a block)")
    return Measured(run=run, prompt_check=prompt_check(shared_prompts, ctx.tokenizer), summary=summary,
                    warnings=warnings)
