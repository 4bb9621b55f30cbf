"""``PointTimeline``: a load point over its own seconds, as the report carries it (stdlib only).

Why a record of its own: the report plots each point's client latency above the server's state
on one time axis, and a replayed trace's offered vs achieved rate; those series come from the
point record (``BenchPoint.server_state``, ``BenchPoint.workload``) and its request rows, and are
copied here once by the report builder so every renderer draws the same numbers. Media benchmark
points and stress load points carry the same two things (request send times, server samples) and
become the same record. ``lines`` says
in words what the workload measured (lateness, TTFT per turn, prefix-cache hit rate):
``workload_lines`` writes them, for the report and for the benchmark's own console alike.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.typed_record import TypedRecord, described


@dataclass
class PointTimeline(TypedRecord):
    """One point over time: when each request left and how long it took, and the server's samples."""

    name: str = described("The point: a benchmark point's file stem (point_<workload>_isl-..._n-...), a media "
                          "point's key (<kind>_con-N) or a stress load point's name.")
    workload: str | None = described("trace, multi_turn, shared_prefix, agentic, or null for independent prompts.",
                                     None)
    requests: list[Any] = described(
        "[t_s, ttft_ms, e2el_ms] per measured request: seconds since the point started at which it was "
        "sent, its TTFT and end-to-end latency (null when it failed; TTFT null for media requests, whose "
        "answer comes whole).", factory=list)
    state_t_s: list[Any] = described("Seconds since the point started of each server sample.", factory=list)
    state_series: dict[str, Any] = described(
        "Server state per sample (see BenchPoint.server_state, MediaPoint.server_state, "
        "StressPointRecord.server_state): running, waiting, kv_cache_usage_pct, "
        "prefix_cache_hit_rate, queue_depth, mean_batch_size, whichever the server exposes.", factory=dict)
    rates: dict[str, Any] | None = described(
        "workload=trace: offered (the trace), sent and completed requests per second per time bin "
        "(BenchPoint.workload.rate_over_time).", None)
    lines: list[Any] = described("What the workload measured, in words, with n and intervals where judged.",
                            factory=list)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def workload_lines(w: dict[str, Any] | None) -> list[str]:
    """The workload's own figures in words (what a reader checks first)."""
    if not w:
        return []
    kind = w.get("kind")
    if kind == "trace":
        late = w.get("lateness_ms") or {}
        rate = w.get("offered_rate_rps")
        return [f"trace {w.get('trace_file')} ({w.get('shape')}): {w.get('requests')} requests over "
                f"{w.get('span_s')} s" + (f" ({rate:.2f} req/s offered)" if rate else "")
                + f", time_scale {w.get('time_scale')}",
                f"lateness behind the trace (n={late.get('n')}): p50 {_ms(late.get('p50'))}, "
                f"p99 {_ms(late.get('p99'))}, "
                f"max {_ms(late.get('max'))}; {late.get('over_limit')} over {w.get('max_lateness_ms')} ms: "
                + ("the client kept up" if w.get("kept_up") else "THE CLIENT DID NOT KEEP UP")]
    if kind == "multi_turn":
        out = [f"multi_turn: {w.get('conversations')} conversations x {w.get('turns')} turns, think time "
               f"{w.get('think_time_s')} s, {w.get('endpoint')}"]
        for t in w.get("per_turn") or []:
            ttft = t.get("ttft") or {}
            ci = ttft.get("mean_ci95_ms")
            out.append(f"turn {t.get('turn')}: mean TTFT {_ms(ttft.get('mean_ms'))}"
                       + (f" [95% {ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")
                       + f" (n={ttft.get('n')}), mean input {t.get('mean_input_tokens')} tokens, "
                         f"failed {t.get('failed')}")
        out += _prefix_line(w.get("prefix_cache"))
        return out
    if kind == "agentic":
        return _agentic_lines(w)
    if kind == "shared_prefix":
        shared, unshared = (w.get(k) or {} for k in ("shared", "unshared"))
        out = [f"shared_prefix: {w.get('prefixes')} prefixes of {w.get('prefix_tokens')} tokens"]
        out += _prefix_line(w.get("prefix_cache"))
        for name, part in (("shared", shared), ("unshared", unshared)):
            ttft = part.get("ttft") or {}
            ci = ttft.get("mean_ci95_ms")
            out.append(f"{name}: mean TTFT {_ms(ttft.get('mean_ms'))}"
                       + (f" [95% {ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")
                       + f" (n={ttft.get('n')})")
        if w.get("ttft_ratio_shared_to_unshared") is not None:
            ci = w.get("ttft_ratio_ci95")
            out.append(f"TTFT shared / unshared: {w['ttft_ratio_shared_to_unshared']:.3f}"
                       + (f" [95% {ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""))
        return out
    return [f"workload {kind}"]


def _agentic_lines(w: dict[str, Any]) -> list[str]:
    """Agent sessions: sessions passed, tool calls, tokens per session, TTFT per turn and per session."""
    out = [f"agentic {w.get('name')}: {w.get('sessions_passed')} sessions passed, {w.get('tool_calls')} tool calls, "
           f"{w.get('tokens_per_session')} tokens per session, {w.get('endpoint')}"]
    for t in w.get("per_turn") or []:
        ttft = t.get("ttft") or {}
        out.append(f"turn {t.get('turn')}: mean TTFT {_ms(ttft.get('mean_ms'))} (n={ttft.get('n')}), mean input "
                   f"{t.get('mean_input_tokens')} tokens, failed {t.get('failed')}")
    for s in w.get("per_session") or []:
        out.append(f"session {s.get('session')}: {s.get('turns')}/{s.get('planned')} turns, mean TTFT "
                   f"{_ms(s.get('mean_ttft_ms'))}, max {_ms(s.get('max_ttft_ms'))}, last prompt "
                   f"{s.get('last_prompt_tokens')} tokens, {s.get('tokens')} tokens")
    return out + _prefix_line(w.get("prefix_cache"))


def _prefix_line(pc: dict[str, Any] | None) -> list[str]:
    if not pc:
        return ["prefix cache: the server exposes no prefix-cache counters"]
    rate = pc.get("hit_rate")
    return [f"server prefix-cache hit rate {'-' if rate is None else f'{rate:.1%}'} "
            f"({pc.get('hit_tokens'):.0f} of {pc.get('queried_tokens'):.0f} prompt tokens found)"]
