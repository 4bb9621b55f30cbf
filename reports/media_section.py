"""The media section of the report: media benchmark points read back and judged per tier.

Why separate from the LLM rows: a media point has no ISL/OSL/TTFT; its figures are named
metrics (images_per_s, s_per_step, rtf, items_per_s, latency_p50_ms) and so are its targets.
Points are read through their own record (``records.media.MediaPoint``) and judged by
``judge.check_metric_tier`` with the model status's required tiers, exactly as LLM points; each
figure carries its 95% interval from the point's per-request rows (``records.media_estimates``), on
which the verdict decides every target (``judge.media_tier_checks``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from contracts.model_spec import ModelSpec, PerfReference
from contracts.typed_record import RecordError
from records import judge
from records.media import MEDIA_KINDS, MediaPoint, point_key
from records.media_estimates import figure_estimates
from records.report import TIERS, MediaRow
from reports.timelines import media_timeline

POINT_GLOB = "media_point_*.json"


def media_key(kind: str, max_concurrency: int) -> str:
    return point_key(kind, max_concurrency)


def is_media_reference(ref: PerfReference) -> bool:
    """A perf-reference entry for a media kind (the LLM target rows skip these)."""
    return ref.task_type in MEDIA_KINDS


def _media_refs(spec: ModelSpec) -> list[PerfReference]:
    return [r for r in spec.device_model_spec.perf_reference if is_media_reference(r)]


def _tier_targets(ref: PerfReference, tier: str) -> dict[str, Any]:
    target = ref.targets.get(tier)
    return dict(target.metrics) if target is not None else {}


def _row(run_dir: Path, path: Path, point: MediaPoint) -> MediaRow:
    row = _point_row(run_dir, path, point)
    for name, est in figure_estimates(point).items():
        row.samples[name] = est.n
        if est.interval is not None:
            row.ci95[name] = est.interval.as_list()
            row.ci_methods[name] = est.interval.method
    return row


def _point_row(run_dir: Path, path: Path, point: MediaPoint) -> MediaRow:
    return MediaRow(key=media_key(point.kind, point.max_concurrency), kind=point.kind,
                    max_concurrency=point.max_concurrency, ran=True, num_requests=point.num_requests,
                    completed=point.completed, failed=point.failed, error_rate=point.error_rate,
                    failures_by_class=dict(point.failures_by_class), latency_p50_ms=point.latency_p50_ms,
                    latency_p95_ms=point.latency_p95_ms, latency_p99_ms=point.latency_p99_ms,
                    figures=dict(point.figures), params=dict(point.params), source=point.source,
                    record_file=path.relative_to(run_dir).as_posix(),
                    core_seconds_per_unit=point.core_seconds_per_unit, cost_unit=point.cost_unit,
                    joules_per_unit=point.joules_per_unit, cost_note=point.cost_note, sampling=point.sampling,
                    timeline=media_timeline(media_key(point.kind, point.max_concurrency), point),
                    reconciliation=point.reconciliation.status if point.reconciliation else None,
                    not_deciding=point.reconciliation.why_not if point.reconciliation else None)


def read_media(run_dir: Path, spec: ModelSpec, problems: list[str], max_error_rate: float) -> list[MediaRow]:
    """Every media point of the run plus a not-run row per perf-reference entry without a point."""
    required = judge.required_tiers(spec.status.name)
    rows: dict[str, MediaRow] = {}
    for path in sorted((run_dir / "benchmarks").glob(POINT_GLOB)):
        try:
            point = MediaPoint.read(path)
        except (RecordError, OSError, ValueError, TypeError) as exc:
            problems.append(f"{path.relative_to(run_dir).as_posix()}: {exc}")
            continue
        row = _row(run_dir, path, point)
        rows[row.key] = row
    for ref in _media_refs(spec):
        key = media_key(ref.task_type, int(ref.max_concurrency))
        row = rows.get(key) or MediaRow(key=key, kind=ref.task_type, max_concurrency=int(ref.max_concurrency),
                                        ran=False, source="perf_reference")
        rows[key] = row
        for tier in TIERS:
            targets = _tier_targets(ref, tier)
            if targets:
                row.tiers.append(judge.check_metric_tier(
                    tier, tier in required, targets, row.figures if row.ran else None, row.error_rate,
                    max_error_rate, row.num_requests))
    return sorted(rows.values(), key=lambda r: (r.kind, r.max_concurrency))
