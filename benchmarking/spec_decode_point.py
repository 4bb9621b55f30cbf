"""A point's speculative decoding, from the reading the reconciliation already takes (``records.spec_decode``).

Why here and not a second scraper: ``run_benchmarks.run_tt_point`` snapshots the server's whole /metrics before
the point and ``benchmarking.reconcile`` after it (waiting until the counters caught up with the last chunk);
the spec-decode counters are in those snapshots. Only a server whose drafts are counted elsewhere (an external
or multi-worker deployment: ``--workflow-args spec_decode_metrics_url=URL[,URL]``) needs its own before/after,
taken at the same two moments and summed over the workers.
"""
from __future__ import annotations

from contracts import prometheus as prom
from records.spec_decode import PREFIXES, SpecDecode, from_snapshots, sum_snapshots

SERVER = "this run's server /metrics"


def _urls(ctx) -> list[str]:
    return list(getattr(ctx.bench, "spec_decode_metrics_url", None) or [])


def before(ctx) -> dict[str, float] | None:
    """The workers' summed spec-decode counters at the point's start (None without spec_decode_metrics_url, or
    when no worker answered): taken beside the server's own snapshot."""
    urls = _urls(ctx)
    if not urls:
        return None
    return sum_snapshots([prom.fetch_metrics(u, ctx.api_key, names=PREFIXES) for u in urls])


def read(ctx, server_before: dict | None, server_after: dict | None,
         workers_before: dict | None) -> SpecDecode | None:
    """The point's record: from the spec_decode_metrics_url endpoints when given (a worker that answered
    neither time counts for nothing; one that answered only once makes the counters look reset), else from the
    server's own snapshots; None when the counters are absent (the server does not speculate)."""
    urls = _urls(ctx)
    if urls:
        after = sum_snapshots([prom.fetch_metrics(u, ctx.api_key, names=PREFIXES) for u in urls])
        source = "spec_decode_metrics_url " + ",".join(urls)
        found = from_snapshots(workers_before, after, source)
        if found is None:  # named on purpose: saying nothing would hide a wrong URL
            return SpecDecode(source=source, status="no_counters",
                              detail="no spec_decode_metrics_url endpoint answered with spec-decode counters "
                                     f"({'none answered' if after is None or workers_before is None else 'none'}"
                                     " exposes vllm:spec_decode_* or tt_spec_decode_*)")
        return found
    return from_snapshots(server_before, server_after, SERVER)
