"""Prometheus /metrics snapshots around a point (stdlib only).

vLLM and most servers expose counters (prompt/generation tokens, request counts, latency
histograms). A before/after pair and its delta lets the report check the client's token counts
against the server's own and see server-side latency for the same window.
"""
from __future__ import annotations

import urllib.request

from contracts.openai_http import bearer_headers


def parse_prometheus(text: str, names: tuple[str, ...] | None = None) -> dict[str, float]:
    """{'name{labels}': value} for every sample line (comments and bad lines skipped); with ``names``,
    only the samples of those metrics (a once-a-second sampler skips the histogram buckets)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or (names is not None and not line.startswith(names)):
            continue
        # the value is the first field after the (possibly label-containing) name
        if "}" in line:
            name, _, rest = line.rpartition("}")
            name += "}"
        else:
            name, _, rest = line.partition(" ")
        fields = rest.split()
        if not fields:
            continue
        try:
            out[name.strip()] = float(fields[0])
        except ValueError:
            continue
    return out


def fetch_metrics(base_url: str, api_key: str | None = None, timeout: float = 10.0,
                  names: tuple[str, ...] | None = None) -> dict[str, float] | None:
    """Snapshot of the server's /metrics (only metrics starting with ``names`` when given), or None
    when it has none."""
    req = urllib.request.Request(base_url.rstrip("/") + "/metrics", headers=bearer_headers(api_key))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            if resp.status != 200:
                return None
            return parse_prometheus(resp.read().decode("utf-8", "replace"), names)
    except Exception:  # noqa: BLE001 - no metrics endpoint is a normal case
        return None


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """after - before for samples present in both whose value changed."""
    return {k: after[k] - v for k, v in before.items() if k in after and after[k] != v}


def headline(d: dict[str, float]) -> dict[str, float]:
    """The deltas worth showing beside the client's numbers (totals, sums and counts; no buckets)."""
    keep = ("_total", "_sum", "_count")
    return {k: v for k, v in d.items() if "_bucket" not in k and k.split("{")[0].endswith(keep)}
