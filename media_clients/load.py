"""One load point: N requests of a kind, at most C in flight, timed and classified.

Why this loop and ``stress_tests.media_driver`` are two: this one is the media benchmark point (a
fixed request count, figures of the whole point); the stress twin adds what a watched load needs
(durations, open-loop arrivals, windows, the over-saturation stop, memory samples) and lives in the
stress package, above the clients, with the LLM stress loop whose windows and detector it shares.
Both send the same requests (``media_clients.workloads``) through the same transport.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from contracts.cpu_cost import probe_for_run
from contracts.intervals import percentile
from media_clients.common import ClientRun, now_iso
from media_clients.workloads import Sent, Workload
from records.media import MediaPoint


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def run_point(run: ClientRun, workload: Workload, concurrency: int, num_requests: int, source: str) -> MediaPoint:
    """Send ``num_requests`` with ``concurrency`` threads; stop dispatching when ``run.stop`` is set."""
    sent: list[Sent] = []
    send_times: list[float] = []  # of sent[i], on time.perf_counter
    lock = threading.Lock()
    counter = iter(range(num_requests))

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

    probe, watched = probe_for_run(run.run_dir)
    probe.start()
    started_iso, started = now_iso(), time.monotonic()
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"{workload.kind}-load") as pool:
        for future in [pool.submit(worker) for _ in range(concurrency)]:
            future.result()
    duration = time.monotonic() - started
    cost = probe.stop()
    done = [s for s in sent if s.ok]
    audio = workload.kind == "speech"
    units = sum(s.audio_seconds for s in done) if audio else sum(s.items for s in done)
    failed = [s for s in sent if not s.ok]
    latencies = [s.answer.elapsed_s * 1000 for s in done]
    classes: dict[str, int] = {}
    for s in failed:
        classes[s.error_class or "unknown"] = classes.get(s.error_class or "unknown", 0) + 1
    not_sent = num_requests - len(sent)
    total = num_requests
    figures = workload.figures(sent, duration, latencies)
    figures.update({"latency_p50_ms": _r(percentile(latencies, 50)), "latency_p95_ms": _r(percentile(latencies, 95))})
    return MediaPoint(
        model_id=run.model_id, served_model_name=run.served_model_name, kind=workload.kind,
        endpoint=workload.endpoint, max_concurrency=concurrency, num_requests=num_requests,
        items_per_request=max((s.items for s in sent), default=1), params=dict(workload.params), source=source,
        started=started_iso, ended=now_iso(), duration_s=round(duration, 3), completed=len(done),
        failed=len(failed), not_sent=not_sent, failures_by_class=classes,
        error_rate=round((len(failed) + not_sent) / total, 6) if total else None,
        latency_mean_ms=_r(sum(latencies) / len(latencies)) if latencies else None,
        latency_p50_ms=_r(percentile(latencies, 50)), latency_p95_ms=_r(percentile(latencies, 95)),
        latency_p99_ms=_r(percentile(latencies, 99)), figures=figures,
        first_error=failed[0].error if failed else None,
        requests=[{"request_id": s.answer.request_id, "ms": round(s.answer.elapsed_s * 1000, 3),
                   "status": s.answer.status, "error_class": s.error_class, "send_time_s": round(at, 6),
                   "units": round(s.audio_seconds, 3) if audio else s.items}
                  for s, at in zip(sent, send_times)],
        interrupted="signal" if run.stop.is_set() and not_sent else None,
        work_units=_r(units), cost_unit="audio_s" if audio else "item",
        server_core_seconds=_r(cost.core_seconds), core_seconds_per_unit=_r(cost.per(units), 6),
        energy_joules=_r(cost.energy_joules), joules_per_unit=_r(cost.energy_per(units), 6),
        cost_note="; ".join(filter(None, [f"CPU: {watched}" if cost.core_seconds is not None else
                                          f"CPU n/a: {cost.cpu_note}",
                                          f"energy n/a: {cost.energy_note}" if cost.energy_note else ""])))
