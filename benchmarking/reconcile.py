"""Reconcile one benchmark point: the server's counters before and after it against what its client sent,
and whether the client kept its own schedule (``records.reconciliation`` holds the rules and the record).

Why a module of its own: the point's measurement (``run_benchmarks.run_tt_point``) only has to scrape
/metrics before the point and hand this module the request rows; the after-scrape waits here until the
server's counters have caught up (vLLM updates them just after it streams a request's last chunk), so a
point is never called ``uncounted`` for a scrape that came a few milliseconds early.
"""
from __future__ import annotations

import os
import time

from contracts import prometheus as prom
from contracts.intervals import percentile
from records.reconciliation import (
    MAX_CLIENT_CPU_SHARE,
    MAX_LAG_SHARE,
    MIN_LAG_MS,
    MIN_IN_FLIGHT_SHARE,
    VLLM_COUNTERS,
    Pacing,
    Reconciliation,
    counter_deltas,
    reconcile,
)

SETTLE_S = 3.0      # how long the after-scrape waits for counters that lag the last chunk
SETTLE_STEP_S = 0.1


def client_figures(records: list) -> tuple[dict[str, int], int]:
    """(``Reconciliation.client``, token slack) from the point's RequestRecords, warm-up included: every one
    of them reached the server. The slack is one token per request whose count is not the server's usage."""
    done = [r for r in records if r.success]
    failed = [r for r in records if not r.success and r.error_class != "not_sent"]
    not_usage = sum(1 for r in done if r.input_token_source != "usage") + \
        sum(1 for r in done if r.output_token_source != "usage")
    figures = {
        "sent": len(done) + len(failed), "completed": len(done),
        "prompt_tokens": sum(r.input_tokens if r.input_tokens is not None else r.prompt_len for r in done),
        "generation_tokens": sum(r.output_tokens or 0 for r in done),
        "failed_prompt_tokens": sum(r.input_tokens or r.prompt_len for r in failed),
        "failed_max_tokens": sum(r.requested_output_len for r in failed),
    }
    return figures, 2 * not_usage


def reconcile_point(base_url: str, api_key: str | None, before: dict | None, records: list,
                    pacing_record: Pacing | None) -> tuple[Reconciliation, dict | None]:
    """The point's reconciliation and the after-scrape it used (None when the server has no counters)."""
    client, slack = client_figures(records)
    if before is None or not any(k.split("{", 1)[0] in VLLM_COUNTERS for k in before):
        status, detail = reconcile(client, None)
        after = None if before is None else prom.fetch_metrics(base_url, api_key)
        return Reconciliation(status=status, detail=detail, client=client, token_slack=slack,
                              pacing=pacing_record), after
    deadline = time.monotonic() + SETTLE_S
    while True:
        after = prom.fetch_metrics(base_url, api_key)
        server = counter_deltas(before, after) if after is not None else None
        status, detail = reconcile(client, server, slack)
        if status != "uncounted" or time.monotonic() >= deadline:
            break
        time.sleep(SETTLE_STEP_S)
    return Reconciliation(status=status, detail=detail, client=client, server=server, token_slack=slack,
                          pacing=pacing_record), after


def pacing(records: list, concurrency: int, request_rate: float, cpu_s: float | None, wall_s: float,
           closed_loop: bool = True) -> Pacing:
    """Send lags, the client's CPU share and Little's law over the point's request rows (rounds and warm-up are
    separate batches: each is paced on its own). The intended send time of a request is its arrival time
    (open loop) or the moment its concurrency slot freed (closed loop: the completion ``concurrency`` sends
    before it), whichever is later. Without a closed loop (a multi-turn conversation waits for its answer and a
    think time on purpose) only requests with an arrival time are paced, and Little's law is not read."""
    lags, latency_sum, in_flight, spans = [], 0.0, 0.0, 0.0
    for batch in _batches(records):
        sends = sorted(batch, key=lambda r: r.send_time)
        done = sorted(r.send_time + r.latency for r in sends if r.latency is not None)
        first = sends[0].send_time
        for k, rec in enumerate(sends):
            if not closed_loop and rec.scheduled_time is None:
                continue
            intended = rec.scheduled_time if rec.scheduled_time is not None else first
            if k >= concurrency and k - concurrency < len(done):
                intended = max(intended, done[k - concurrency])
            lags.append(max(0.0, rec.send_time - intended))
        latency_sum += sum(r.latency for r in sends if r.latency is not None)
        # Little's law over the sending span: from the first send to the last one
        last = sends[-1].send_time
        if last > first and closed_loop:
            spans += last - first
            in_flight += sum(max(0.0, min(r.send_time + (r.latency or 0.0), last) - r.send_time) for r in sends)
    users = max(1, min(concurrency, len(records)))
    mean_latency = latency_sum / max(1, sum(1 for r in records if r.latency is not None))
    expected = float(users) if request_rate == float("inf") else min(float(users), request_rate * mean_latency)
    mean_in_flight = in_flight / spans if spans > 0 else None
    out = Pacing(lag_p50_ms=_ms(lags, 50), lag_p99_ms=_ms(lags, 99), lag_max_ms=_ms(lags, 100),
                 lag_share=round(sum(lags) / latency_sum, 4) if latency_sum > 0 else None,
                 client_cpu_share=None if cpu_s is None or wall_s <= 0 else round(cpu_s / wall_s, 3),
                 mean_in_flight=None if mean_in_flight is None else round(mean_in_flight, 3),
                 expected_in_flight=round(expected, 3))
    out.detail = _client_bound_detail(out)
    out.client_bound = out.detail is not None
    return out


def _client_bound_detail(p: Pacing) -> str | None:
    """Which rule calls the client the bottleneck, with the numbers; None when it kept up. Little's law is
    read only for a closed loop long enough to hold its users (its sending span covers a whole latency)."""
    why = []
    late = p.lag_p99_ms is not None and p.lag_p99_ms >= MIN_LAG_MS  # below: timer resolution, not lateness
    if late and p.lag_share is not None and p.lag_share > MAX_LAG_SHARE:
        why.append(f"requests left late: send lag p50 {p.lag_p50_ms:g} ms, p99 {p.lag_p99_ms:g} ms, "
                   f"{p.lag_share:.0%} of the requests' latency (limit {MAX_LAG_SHARE:.0%})")
    if p.client_cpu_share is not None and p.client_cpu_share > MAX_CLIENT_CPU_SHARE:
        why.append(f"the client used {p.client_cpu_share:.0%} of a core (limit {MAX_CLIENT_CPU_SHARE:.0%})")
    if (p.mean_in_flight is not None and p.expected_in_flight
            and p.mean_in_flight < MIN_IN_FLIGHT_SHARE * p.expected_in_flight
            and late and p.lag_share is not None and p.lag_share > MAX_LAG_SHARE / 5):
        why.append(f"Little's law: {p.mean_in_flight:g} requests in flight on average while sending, "
                   f"{p.expected_in_flight:g} expected")
    return "; ".join(why) or None


def _batches(records: list) -> list[list]:
    """The point's records by batch (warm-up, each round): their request ids share the prefix before the index."""
    groups: dict[str, list] = {}
    for rec in records:
        if rec.send_time:
            groups.setdefault(rec.request_id.rsplit("-", 1)[0], []).append(rec)
    return list(groups.values())


def _ms(values: list[float], pct: float) -> float | None:
    return round(percentile(sorted(values), pct) * 1000.0, 3) if values else None


def point(ctx, pt, before: dict | None, records: list, clock: tuple[float, float]) -> tuple:
    """The reconciliation of a point measured by our client (``run_benchmarks.run_tt_point``): ``clock`` holds
    the client's process time and monotonic time when the point started."""
    cpu_s, wall_s = time.process_time() - clock[0], time.monotonic() - clock[1]
    closed = getattr(pt, "workload", "") != "multi_turn"  # a conversation's turns wait on purpose
    paced = pacing(records, pt.max_concurrency, ctx.bench.request_rate, cpu_s, wall_s, closed)
    return reconcile_point(ctx.base_url, ctx.api_key, before, records, paced)


def warnings(rec: Reconciliation | None) -> list[str]:
    """The point's warning when it decides nothing (contaminated, uncounted, client-bound)."""
    why = None if rec is None else rec.why_not
    return [f"{why}: its target checks are inconclusive"] if why else []


def todo_after_quiet(ctx, points: list, tool: str, load_finished) -> list:
    """The points ``tool`` has still to measure (no finished record: ``load_finished``). When an earlier run
    of the same directory wrote some (a resume after a kill) and some are left, first wait until the server
    is idle (``wait_quiet``): the killed run's requests must not be served while this run measures."""
    todo = [p for p in points if load_finished(os.path.join(ctx.out_dir, p.stem + ".json"), p, tool) is None]
    out_dir = ctx.out_dir
    if todo and os.path.isdir(out_dir) and any(name.startswith("point_") for name in os.listdir(out_dir)):
        from benchmarking.point_run import log
        log(f"resuming: {wait_quiet(ctx.base_url, ctx.api_key)}")
    return todo


QUIET_S = 1.0         # the server is idle when its counters have not moved for this long ...
QUIET_DEADLINE_S = 60.0  # ... and a resume waits at most this long for that
_BUSY = ("vllm:num_requests_running", "vllm:num_requests_waiting")


def wait_quiet(base_url: str, api_key: str | None, quiet_s: float = QUIET_S,
               deadline_s: float = QUIET_DEADLINE_S) -> str:
    """Wait until the server is idle: its request and token counters unchanged for ``quiet_s`` and nothing
    running or waiting (where it says). Why: a rerun after a kill must not measure while requests of the killed
    run (or anyone's) are still being served. Returns the line to log: idle after how long, still busy at the
    deadline (the points' reconciliation will then say whose load it was), or no counters to tell."""
    started = time.monotonic()
    last = _activity(base_url, api_key)
    if last is None:
        return "the server exposes no request counters: whether it is idle cannot be told"
    still = time.monotonic()
    while time.monotonic() - started < deadline_s:
        time.sleep(min(0.2, quiet_s))
        now = _activity(base_url, api_key)
        if now is None:
            return "the server's counters went away: whether it is idle cannot be told"
        if now != last or any(v for k, v in now.items() if k.startswith(_BUSY)):
            last, still = now, time.monotonic()
        elif time.monotonic() - still >= quiet_s:
            return f"the server is idle (its counters still for {quiet_s:g} s) after {time.monotonic() - started:.1f} s"
    return f"the server was still busy after {deadline_s:g} s (its counters kept moving): measuring anyway"


def _activity(base_url: str, api_key: str | None) -> dict[str, float] | None:
    """The counters that move while the server works (finished requests and tokens, running and waiting)."""
    snap = prom.fetch_metrics(base_url, api_key, timeout=5.0, names=tuple(VLLM_COUNTERS) + _BUSY)
    if not snap:
        return None
    return snap
