"""One load point: requests of a kind, at most C in flight, timed and classified; in rounds when adaptive.

Why this loop and ``stress_tests.media_driver`` are two: this one is the media benchmark point (a
request count, figures of the whole point); the stress twin adds what a watched load needs
(durations, open-loop arrivals, windows, the over-saturation stop, memory samples) and lives in the
stress package, above the clients, with the LLM stress loop whose windows and detector it shares.
Both send the same requests (``media_clients.workloads``) through the same transport.

Adaptive sample size: a point given a ``SampleGoal`` (a perf-reference point; its required target
checks) sends its minimum, then further rounds, in whole multiples of its concurrency, while
``records.sampling.sampling_stop`` says a check is undecided on the report's own estimate of the point
(``records.media_estimates.figure_estimates`` of the point built so far, decided by
``records.judge.media_target_decision``), within its sampling budget and cap; ``MediaPoint.sampling``
says why it stopped. The figures sum the rounds' durations (the pause while the rule is evaluated is not
measured). ``run.stop`` ends dispatch inside a round and starts no further one; the partial point is
returned as one.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from contracts.cpu_cost import probe_for_run
from contracts.intervals import percentile
from media_clients.common import ClientRun, log, now_iso
from media_clients.workloads import Sent, Workload
from records.judge import media_target_decision
from records.media import MediaPoint, point_key
from records.media_estimates import figure_estimates
from records.sampling import SampleGoal, SampleState, sampling_stop


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _send_round(run: ClientRun, workload: Workload, concurrency: int, first: int, count: int, sent: list[Sent],
                send_times: list[float]) -> float:
    """Send requests ``first`` .. ``first + count - 1`` with ``concurrency`` threads, appending each
    outcome and its send time (on time.perf_counter) to ``sent`` / ``send_times``; returns the round's
    wall seconds. Stops dispatching when ``run.stop`` is set."""
    lock = threading.Lock()
    counter = iter(range(first, first + count))

    def worker() -> None:
        while not run.stop.is_set():
            with lock:
                index = next(counter, None)
            if index is None:
                return
            at = time.perf_counter()  # the server-state sampler's clock: the report lines both up
            result = workload.send(run.http, run.served_model_name, index)
            with lock:
                sent.append(result)
                send_times.append(at)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"{workload.kind}-load") as pool:
        for future in [pool.submit(worker) for _ in range(concurrency)]:
            future.result()
    return time.monotonic() - started


def _units(workload: Workload, sent: list[Sent]) -> float:
    """Work the completed requests carried: seconds of audio (speech), else items."""
    done = [s for s in sent if s.ok]
    return sum(s.audio_seconds for s in done) if workload.kind == "speech" else sum(s.items for s in done)


def _point(run: ClientRun, workload: Workload, concurrency: int, planned: int, sent: list[Sent],
           send_times: list[float], duration: float, source: str, started_iso: str) -> MediaPoint:
    """The point record of what was sent so far (``planned`` requests over the rounds started)."""
    done = [s for s in sent if s.ok]
    audio = workload.kind == "speech"
    units = _units(workload, sent)
    failed = [s for s in sent if not s.ok]
    latencies = [s.answer.elapsed_s * 1000 for s in done]
    classes: dict[str, int] = {}
    for s in failed:
        classes[s.error_class or "unknown"] = classes.get(s.error_class or "unknown", 0) + 1
    not_sent = planned - len(sent)
    figures = workload.figures(sent, duration, latencies)
    figures.update({"latency_p50_ms": _r(percentile(latencies, 50)), "latency_p95_ms": _r(percentile(latencies, 95))})
    return MediaPoint(
        model_id=run.model_id, served_model_name=run.served_model_name, kind=workload.kind,
        endpoint=workload.endpoint, max_concurrency=concurrency, num_requests=planned,
        items_per_request=max((s.items for s in sent), default=1), params=dict(workload.params), source=source,
        started=started_iso, ended=now_iso(), duration_s=round(duration, 3), completed=len(done),
        failed=len(failed), not_sent=not_sent, failures_by_class=classes,
        error_rate=round((len(failed) + not_sent) / planned, 6) if planned else None,
        latency_mean_ms=_r(sum(latencies) / len(latencies)) if latencies else None,
        latency_p50_ms=_r(percentile(latencies, 50)), latency_p95_ms=_r(percentile(latencies, 95)),
        latency_p99_ms=_r(percentile(latencies, 99)), figures=figures,
        first_error=failed[0].error if failed else None,
        requests=[{"request_id": s.answer.request_id, "ms": round(s.answer.elapsed_s * 1000, 3),
                   "status": s.answer.status, "error_class": s.error_class, "send_time_s": round(at, 6),
                   "units": round(s.audio_seconds, 3) if audio else s.items}
                  for s, at in zip(sent, send_times)],
        work_units=_r(units), cost_unit="audio_s" if audio else "item")


def media_stop(goal: SampleGoal, point: MediaPoint, elapsed_s: float, cut_short: bool) -> SampleState:
    """The shared stop rule on a media point so far: its figures' estimates as the report makes them."""
    estimates = figure_estimates(point, only={key for _, key, _ in goal.checks})
    return sampling_stop(goal, estimates, media_target_decision, sent=point.num_requests - point.not_sent,
                         failed=point.failed, elapsed_s=elapsed_s, cut_short=cut_short)


def run_point(run: ClientRun, workload: Workload, concurrency: int, num_requests: int, source: str,
              goal: SampleGoal | None = None) -> MediaPoint:
    """Send ``num_requests`` with ``concurrency`` threads; with a ``goal``, further rounds while the
    stop rule asks for them (see the module docstring). Stops dispatching when ``run.stop`` is set."""
    sent: list[Sent] = []
    send_times: list[float] = []  # of sent[i], on time.perf_counter
    probe, watched = probe_for_run(run.run_dir)
    probe.start()
    started_iso = now_iso()
    planned, rounds = num_requests, 1
    duration = _send_round(run, workload, concurrency, 0, num_requests, sent, send_times)
    point = _point(run, workload, concurrency, planned, sent, send_times, duration, source, started_iso)
    state = None
    while goal is not None:
        state = media_stop(goal, point, duration, cut_short=run.stop.is_set() or point.not_sent > 0)
        if state.stop_reason is not None:
            break
        log(f"{point_key(workload.kind, concurrency)}: round {rounds + 1}: {state.detail}")
        duration += _send_round(run, workload, concurrency, planned, state.next_round, sent, send_times)
        planned, rounds = planned + state.next_round, rounds + 1
        point = _point(run, workload, concurrency, planned, sent, send_times, duration, source, started_iso)
    cost = probe.stop()
    if state is not None:
        point.sampling = state.record(goal, len(sent), rounds)
    cut = point.not_sent or (state is not None and state.stop_reason == "cut_short")
    point.interrupted = "signal" if run.stop.is_set() and cut else None
    units = _units(workload, sent)
    point.server_core_seconds, point.core_seconds_per_unit = _r(cost.core_seconds), _r(cost.per(units), 6)
    point.energy_joules, point.joules_per_unit = _r(cost.energy_joules), _r(cost.energy_per(units), 6)
    point.cost_note = "; ".join(filter(None, [f"CPU: {watched}" if cost.core_seconds is not None else
                                              f"CPU n/a: {cost.cpu_note}",
                                              f"energy n/a: {cost.energy_note}" if cost.energy_note else ""]))
    return point
