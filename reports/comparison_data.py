"""What the comparison reads of a run: each compared metric's per-request values in the order they were sent,
and the host class's run-level noise from the run history.

Why the order: the gate's within-run noise cuts each point's requests into consecutive blocks
(``reports.run_noise.block_stats``); a block is a stretch of the run's time only if the values are in
the order the requests left. Rows carry the client's send time (``send_time_s``); rows without it keep the
file's order (the order the client wrote them).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from statistics import variance
from pathlib import Path
from typing import Any, Callable, Iterable

from reports.distributions import _output_rate, _request_values
from reports.run_noise import HOST_RUNS, MIN_HOST_DF, NoiseLevel


@dataclass(frozen=True)
class MetricSeries:
    """One compared metric of one run: its per-request values (in the order sent) and what they measure."""

    values: list[float]
    higher_is_better: bool
    concurrency: int


#: Metrics compared per LLM point: (name, a request row's value, higher is better). output_tok_s is each
#: request's output tokens over its end-to-end seconds: a per-request value of both runs, so its ratio gets the
#: same interval as the latencies (the point's aggregate throughput is one number per run).
POINT_METRICS: tuple[tuple[str, Callable[[dict], float | None], bool], ...] = (
    ("ttft_ms", lambda row: _request_values(row)[0], False),
    ("tpot_ms", lambda row: _request_values(row)[1], False),
    ("output_tok_s", _output_rate, True),
)


def metric_kind(name: str) -> str:
    """'isl-128_osl-32_con-4 tpot_ms' -> 'tpot_ms': what the host-class level is kept per."""
    return name.rsplit(" ", 1)[-1]


def concurrency_of(key: str) -> int:
    """The concurrency a point key names (``..._con-4``), 1 when it names none."""
    for part in key.replace(" ", "_").split("_"):
        if part.startswith("con-") and part[4:].isdigit():
            return max(1, int(part[4:]))
    return 1


def _send_order(rows: list[dict]) -> list[dict]:
    def when(row: dict) -> float:
        value = row.get("send_time_s")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.inf
    return sorted(rows, key=when)  # stable: rows without a send time keep the file's order


def measured_rows(path: Path | None) -> list[dict]:
    """The measured (non-warm-up) rows of a per-request file (``point_*.requests.jsonl``) in the order they were
    sent; [] when the file is absent or unreadable, a line that is not a JSON object skipped."""
    if path is None:
        return []
    rows: list[dict] = []
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    row = json.loads(line) if line.strip() else None
                except ValueError:
                    continue
                if isinstance(row, dict) and not row.get("warmup"):
                    rows.append(row)
    except OSError:
        return []
    return _send_order(rows)


def point_requests(run_dir: Path) -> dict[str, Path]:
    """Point key (isl-..._osl-..._con-...) -> its per-request file, from the run's benchmark records."""
    out: dict[str, Path] = {}
    for path in sorted((Path(run_dir) / "benchmarks").glob("point_*.requests.jsonl")):
        name = path.name.removeprefix("point_").removesuffix(".requests.jsonl")
        key = "_".join(part for part in name.split("_") if not part.startswith("n-"))
        out.setdefault(key, path)
    return out


def _media_latencies(run_dir: Path) -> dict[str, list[float]]:
    """Media point key (<kind>_con-<c>) -> end-to-end latencies (ms) of its successful requests, in send order."""
    from records.media import MediaPoint

    out: dict[str, list[float]] = {}
    for path in sorted((Path(run_dir) / "benchmarks").glob("media_point_*.json")):
        try:
            point = MediaPoint.read(path)
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            continue
        rows = _send_order([r for r in point.requests if isinstance(r, dict)])
        out[path.stem.removeprefix("media_point_")] = [
            float(r["ms"]) for r in rows if r.get("error_class") is None
            and isinstance(r.get("ms"), (int, float)) and not isinstance(r.get("ms"), bool)]
    return out


def run_metrics(run_dir: Path) -> dict[str, MetricSeries]:
    """Every compared metric of a run: name ('<point key> <metric>') -> its series."""
    out: dict[str, MetricSeries] = {}
    for key, latencies in _media_latencies(run_dir).items():
        out[f"{key} latency_ms"] = MetricSeries(latencies, False, concurrency_of(key))
    for key, path in point_requests(run_dir).items():
        rows = measured_rows(path)
        for name, value_of, higher in POINT_METRICS:
            values = [v for v in map(value_of, rows) if v is not None]
            out[f"{key} {name}"] = MetricSeries(values, higher, concurrency_of(key))
    return out


#: The run history's headline metrics (``history.store.headline_metrics``) that tell the run-level noise of a
#: compared kind: an LLM point's mean TTFT, TPOT and output throughput, a media point's median latency (for its
#: mean latency).
HOST_KINDS = {"ttft_ms": "ttft_ms", "tpot_ms": "tpot_ms", "output_tok_s": "output_tok_s",
              "latency_p50_ms": "latency_ms"}


def undecidable_points(run_dir: Path) -> dict[str, str]:
    """Point key -> why the point decides nothing (``records.reconciliation``: the server's counters saw other
    traffic or fewer requests than the client, or the client fell behind its schedule), for every LLM and media
    point of the run whose record says so; a point without a reconciliation (another tool's, an older file)
    is not listed."""
    from records.bench import BenchPoint
    from records.media import MediaPoint

    out: dict[str, str] = {}
    found = [(p, BenchPoint, p.name.removeprefix("point_").removesuffix(".json"))
             for p in sorted((Path(run_dir) / "benchmarks").glob("point_*.json")) if p.name.count(".") == 1]
    found += [(p, MediaPoint, p.stem.removeprefix("media_point_"))
              for p in sorted((Path(run_dir) / "benchmarks").glob("media_point_*.json"))]
    for path, kind, name in found:
        try:
            reconciliation = kind.read(path).reconciliation
        except Exception:  # noqa: BLE001 - an unreadable point is the report's problem; here it just says nothing
            continue
        why = None if reconciliation is None else reconciliation.why_not
        if why is not None:
            out["_".join(part for part in name.split("_") if not part.startswith("n-"))] = why
    return out


def host_levels(entries: Iterable[Any], setup_of: Callable[[Path], str | None]) -> dict[str, NoiseLevel]:
    """The host class's run-level noise per metric kind, from accepted runs of one host (history entries with
    ``spec_key``, ``run_dir`` and the indexed headline ``metrics``), newest first: runs grouped by spec and
    setup; in each group every metric's spread of log per-run values, averaged over the group's metrics of a
    kind (its points: they share each run's state, so a group counts its runs - 1 degrees of freedom once);
    the groups pooled by their degrees of freedom."""
    groups: dict[tuple[str, str], list[dict[str, float]]] = {}
    for entry in list(entries)[:HOST_RUNS]:
        setup = setup_of(Path(entry.run_dir)) or "?"
        groups.setdefault((entry.spec_key, setup), []).append(dict(entry.metrics))
    pooled: dict[str, list[float]] = {}  # kind -> [sum of df x variance, df, runs, groups]
    for runs in groups.values():
        series: dict[str, list[float]] = {}
        for metrics in runs:
            for name, value in metrics.items():
                if " " in name and metric_kind(name) in HOST_KINDS and value > 0:
                    series.setdefault(name, []).append(math.log(value))
        for kind in sorted({HOST_KINDS[metric_kind(name)] for name in series}):
            spread = [(variance(logs), len(logs)) for name, logs in series.items()
                      if HOST_KINDS[metric_kind(name)] == kind and len(logs) >= 2]
            if not spread:
                continue
            df = min(k for _, k in spread) - 1
            total = pooled.setdefault(kind, [0.0, 0.0, 0.0, 0.0])
            total[0] += df * sum(v for v, _ in spread) / len(spread)
            total[1] += df
            total[2] += df + 1
            total[3] += 1
    return {kind: NoiseLevel("host class", math.sqrt(squares / df), int(df),
                             f"{int(runs)} accepted runs in {int(count)} setups on this host", int(runs))
            for kind, (squares, df, runs, count) in pooled.items() if df >= MIN_HOST_DF}


__all__ = ["MetricSeries", "POINT_METRICS", "HOST_KINDS", "metric_kind", "concurrency_of", "point_requests",
           "run_metrics", "measured_rows", "undecidable_points", "host_levels"]
