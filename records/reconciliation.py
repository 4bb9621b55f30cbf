"""Whether a point measured what it says: the server's counters reconciled with the client's, and whether
the client kept up (stdlib only).

Why: a latency decides a release only if it describes this point's requests, on this server, sent when they
were meant to be sent. Three things break that silently: someone else's load on the same server (a second
client, a killed run's client still sending), a proxy or cache that answered requests the server never saw
(or a client that miscounts), and a client that fell behind its own schedule (its latencies then describe
the client). The server counts what it finished (vLLM's ``vllm:request_success_total``,
``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total``; the media server's per-kind counts); the
client knows exactly what it sent. Their difference over the point says which of these happened.

Rules (``reconcile``), with the client's figures of the point window (warm-up requests included, they
reach the server too):

* ``clean``: the server finished between the client's completed and sent requests, and its token counts lie
  between what the completed requests carried and that plus what the failed ones may have carried (their
  prompts and up to their requested outputs), within the counters' own granularity (whole requests and
  tokens; ``token_slack`` where the client's counts are not the server's usage figures);
* ``contaminated``: more requests or tokens than this point's client sent: someone else's load;
* ``uncounted``: fewer completions or tokens than the client counted: a proxy, a cache or a client miscount;
* ``not_reconciled``: the server exposes none of the counters (an external server without /metrics).

A point also reads ``client_bound`` from its pacing (``Pacing``): the send lag of each request behind its
intended send time, the client's CPU share, and Little's law (the mean number in flight while the client was
sending against the concurrency it was asked to hold). A point that is contaminated, uncounted or
client-bound does not decide a target or a comparison (``decides``/``why_not``); a ``not_reconciled`` point
still does (the report says so beside it): nothing contradicts it, nothing confirms it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.typed_record import TypedRecord, described

STATUSES: dict[str, str] = {
    "clean": "the server's counters agree with what this point's client sent and received",
    "contaminated": "the server saw more traffic than this point's client sent (someone else's load)",
    "uncounted": "the server counted fewer completions or tokens than the client (a proxy, a cache or a client "
                 "miscount)",
    "not_reconciled": "the server exposes no request or token counters (/metrics): nothing to reconcile with",
}
#: counter family -> the client figure it is reconciled with (vLLM's names; the stub server uses them too)
VLLM_COUNTERS: dict[str, str] = {
    "vllm:request_success_total": "requests",
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:generation_tokens_total": "generation_tokens",
}
#: the media server counts requests finished, labelled by model and HTTP status (tt-media-server metrics.py)
MEDIA_COUNTERS: dict[str, str] = {"tt_media_server_requests_total": "requests"}
# client-bound thresholds: a client that loses more than this share of its requests' time to sending late,
# holds less than this share of its concurrency in flight, or runs its core nearly flat out, fell behind
MAX_LAG_SHARE = 0.05
MIN_IN_FLIGHT_SHARE = 0.8
MAX_CLIENT_CPU_SHARE = 0.9
#: Lags below this (ms, the p99) are the event loop's own resolution, not a client falling behind: a fake server
#: answering in 1 ms would otherwise make every point "client-bound" by share alone
MIN_LAG_MS = 2.0


@dataclass
class Pacing(TypedRecord):
    """Whether the client sent each request when it meant to (``benchmarking.reconcile.pacing``)."""

    lag_p50_ms: float | None = described("Median send lag (ms): how late a request left after its intended "
                                         "send time (its arrival time, or the moment a concurrency slot freed).",
                                         None)
    lag_p99_ms: float | None = described("99th percentile of the send lag (ms).", None)
    lag_max_ms: float | None = described("Largest send lag (ms).", None)
    lag_share: float | None = described("Sum of send lags / sum of end-to-end latencies: the share of request "
                                        f"time the client added by sending late (client-bound above "
                                        f"{MAX_LAG_SHARE:g}).", None)
    client_cpu_share: float | None = described("The client process's CPU seconds / the point's wall seconds "
                                               f"(one event loop: client-bound above {MAX_CLIENT_CPU_SHARE:g}).",
                                               None)
    mean_in_flight: float | None = described("Little's law: time-averaged requests in flight while the client was "
                                             "sending (sum of in-flight time / sending span).", None)
    expected_in_flight: float | None = described("What it should be: the point's users for a closed loop, the "
                                                 "arrival rate x mean latency (capped by them) for an open loop.",
                                                 None)
    client_bound: bool = described("The client fell behind (any rule above): the point's latencies describe the "
                                   "client, not the server.", False)
    detail: str | None = described("Which rule called it client-bound, with the numbers.", None)


@dataclass
class Reconciliation(TypedRecord):
    """The server's counters over one point against what the point's client sent and received."""

    status: str = described("clean | contaminated | uncounted | not_reconciled (" +
                            "; ".join(f"{k}: {v}" for k, v in STATUSES.items()) + ").")
    detail: str = described("The reconciliation in words, naming the extra or missing requests and tokens.")
    client: dict[str, int] = described(
        "What this point's client did, warm-up included: sent, completed, prompt_tokens and generation_tokens "
        "of the completed requests, failed_prompt_tokens and failed_max_tokens (what failed requests may have "
        "made the server count).", factory=dict)
    server: dict[str, float] | None = described(
        "The server's counter deltas over the point (requests, prompt_tokens, generation_tokens); null when it "
        "has none.", None)
    token_slack: int = described("Tokens either way allowed where the client's counts are not the server's usage "
                                 "figures (tokenizer or chunk counts); 0 when every count is the server's.", 0)
    pacing: Pacing | None = described("Whether the client kept up (send lag, CPU share, Little's law).", None,
                                      record=Pacing)

    @property
    def decides(self) -> bool:
        """Whether the point may decide a target or a comparison."""
        return self.why_not is None

    @property
    def why_not(self) -> str | None:
        """Why the point decides nothing (one line), or None when it may."""
        if self.status in ("contaminated", "uncounted"):
            return f"point not clean ({self.status}): {self.detail}"
        if self.pacing is not None and self.pacing.client_bound:
            return f"point client-bound: {self.pacing.detail}"
        return None


def reconcile(client: dict[str, int], server: dict[str, float] | None, token_slack: int = 0) -> tuple[str, str]:
    """(status, detail) of one point: ``client`` as in ``Reconciliation.client``, ``server`` the counter deltas
    by client figure name (None or empty: the server has no counters)."""
    if not server:
        return "not_reconciled", STATUSES["not_reconciled"]
    ranges = {
        "requests": (client["completed"], client["sent"]),
        "prompt_tokens": (client["prompt_tokens"] - token_slack,
                          client["prompt_tokens"] + client["failed_prompt_tokens"] + token_slack),
        "generation_tokens": (client["generation_tokens"] - token_slack,
                              client["generation_tokens"] + client["failed_max_tokens"] + token_slack),
    }
    extra, missing = [], []
    for name, (low, high) in ranges.items():
        if name not in server:
            continue
        seen = int(round(server[name]))
        if seen > high:
            extra.append(f"{seen - high} {_noun(name)} more than this point's client sent ({seen} at the server, "
                         f"client at most {high})")
        elif seen < low:
            missing.append(f"{low - seen} {_noun(name)} fewer than the client counted ({seen} at the server, "
                           f"client {low})")
    if extra:
        return "contaminated", "; ".join(extra)
    if missing:
        return "uncounted", "; ".join(missing)
    counted = ", ".join(f"{int(round(server[n]))} {_noun(n)}" for n in ranges if n in server)
    return "clean", f"the server counted {counted}, as the client sent"


def _noun(name: str) -> str:
    return {"requests": "requests finished", "prompt_tokens": "prompt tokens",
            "generation_tokens": "generated tokens"}[name]


def counter_deltas(before: dict[str, float], after: dict[str, float],
                   families: dict[str, str] | None = None) -> dict[str, float]:
    """Client figure name -> the server counter's delta, summed over its label sets (``families``: counter
    family -> figure name, default ``VLLM_COUNTERS``); a family the server does not expose is left out."""
    families = VLLM_COUNTERS if families is None else families
    out: dict[str, float] = {}
    for sample, value in after.items():
        family = sample.split("{", 1)[0]
        name = families.get(family)
        if name is not None:
            out[name] = out.get(name, 0.0) + value - before.get(sample, 0.0)
    return out


def media_reconciliation(before: dict[str, float] | None, after: dict[str, float] | None, completed: int,
                         failed: int) -> Reconciliation:
    """A media point's reconciliation: the media server's finished requests (every model and status: another
    model's load shares the devices too) against the point's completed and sent requests; media requests carry
    no token counts."""
    client = {"sent": completed + failed, "completed": completed, "prompt_tokens": 0, "generation_tokens": 0,
              "failed_prompt_tokens": 0, "failed_max_tokens": 0}
    server = None
    if before is not None and after is not None and any(k.split("{", 1)[0] in MEDIA_COUNTERS for k in after):
        server = counter_deltas(before, after, MEDIA_COUNTERS)
        if "requests" not in server:
            server = {"requests": 0.0}
    status, detail = reconcile(client, server)
    return Reconciliation(status=status, detail=detail, client=client, server=server)


def status_of(record: dict[str, Any] | None) -> str | None:
    """A point record's reconciliation status (``point["reconciliation"]["status"]``), or None when it has none
    (an older file, another tool's point): what a comparison reads to skip a point that is not clean."""
    return ((record or {}).get("reconciliation") or {}).get("status")


__all__ = ["MAX_CLIENT_CPU_SHARE", "MAX_LAG_SHARE", "MIN_LAG_MS", "MEDIA_COUNTERS", "MIN_IN_FLIGHT_SHARE", "Pacing",
           "Reconciliation",
           "STATUSES", "VLLM_COUNTERS", "counter_deltas", "media_reconciliation", "reconcile", "status_of"]
