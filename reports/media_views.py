"""Media points as tables, one per model kind, for every renderer (markdown, HTML, console, CSV).

Each kind shows its own headline figures (images/s and s/step; real-time factor; items/s;
images and image tokens per request) beside
the shared request counts, latency percentiles and the judged tiers.
"""
from __future__ import annotations

from dataclasses import dataclass

from reports import views
from records.report import MediaRow, ReportRecord

KIND_TITLES = {"image": "Image generation", "speech": "Speech transcription", "cnn": "Image classification (CNN)",
               "embedding": "Embeddings", "vision": "Vision chat (image_url parts)"}
#: Per kind: (column header, figure name, decimals).
KIND_FIGURES: dict[str, list[tuple[str, str, int]]] = {
    "image": [("images/s", "images_per_s", 3), ("s/step", "s_per_step", 3)],
    "speech": [("RTF", "rtf", 3), ("audio s/s", "audio_s_per_s", 2)],
    "cnn": [("items/s", "items_per_s", 2)],
    "embedding": [("items/s", "items_per_s", 2)],
    "vision": [("images/request", "images_per_request", 1), ("prompt tokens/image", "prompt_tokens_per_image", 1),
               ("prompt tokens/request", "prompt_tokens_per_request", 1), ("images/s", "images_per_s", 3)],
}


@dataclass(frozen=True)
class MediaTable:
    kind: str
    title: str
    headers: list[str]
    rows: list[list[str]]


def _decided(t) -> str:
    """The tier's decision as the verdict made it; the point figures' pass/fail only when none was made."""
    return views.decision_text(t.decision) if t.decision else views.check(t.passed)


def tier_text(row: MediaRow) -> str:
    """'functional PASS (required); complete INCONCLUSIVE' or 'no targets'."""
    if not row.tiers:
        return "no targets"
    if not row.ran:
        return "NOT RUN (" + ", ".join(t.tier for t in row.tiers if t.required) + " required)"
    return "; ".join(f"{t.tier} {_decided(t)}{' (required)' if t.required else ''}" for t in row.tiers)


def _requests(row: MediaRow) -> str:
    if not row.ran:
        return "NOT RUN"
    failed = f", {row.failed} failed" if row.failed else ""
    return f"{row.completed}/{row.num_requests}{failed}"


def _cost(value: float | None, row: MediaRow) -> str:
    """A cost figure, or n/a (the reason is in the point's cost_note, shown under the table)."""
    if not row.ran:
        return ""
    return "n/a" if value is None else f"{value:.4g}"


def cost_notes(record: ReportRecord) -> list[str]:
    """One line per distinct cost note: what the core-seconds and joules columns measured, or why n/a."""
    return sorted({f"{r.key}: {r.cost_note}" for r in record.media if r.ran and r.cost_note})


def sampling_notes(record: ReportRecord) -> list[str]:
    """One line per adaptive point: the requests it sent over how many rounds, from which minimum, and
    why it stopped (``records.bench.STOP_REASONS``), with the stop rule's own words."""
    out = []
    for r in record.media:
        s = r.sampling
        if not r.ran or s is None:
            continue
        rounds = f"{s.rounds} round{'s' if s.rounds != 1 else ''}"
        out.append(f"{r.key}: {s.requests} requests in {rounds} (minimum {s.min_requests}; precision goal "
                   f"{s.precision:.0%}, sampling budget {s.budget_s:g} s); stopped: {s.stop_reason}"
                   + (f" ({s.detail})" if s.detail else ""))
    return out


def media_tables(record: ReportRecord) -> list[MediaTable]:
    tables = []
    for kind in sorted({r.kind for r in record.media}):
        figures = KIND_FIGURES.get(kind, [])
        unit = "audio s" if kind == "speech" else "item"
        headers = ["Point", "Concurrency", "Completed", *[h for h, _, _ in figures],
                   f"server core-s/{unit}", f"J/{unit}", "p50 ms", "p95 ms", "p99 ms", "Tiers", "Record"]
        rows = []
        for r in (r for r in record.media if r.kind == kind):
            rows.append([r.key, str(r.max_concurrency), _requests(r),
                         *[views.num(r.figures.get(name), digits) for _, name, digits in figures],
                         _cost(r.core_seconds_per_unit, r), _cost(r.joules_per_unit, r),
                         views.num(r.latency_p50_ms), views.num(r.latency_p95_ms), views.num(r.latency_p99_ms),
                         tier_text(r), r.record_file or ""])
        tables.append(MediaTable(kind, KIND_TITLES.get(kind, kind), headers, rows))
    return tables


def target_lines(record: ReportRecord) -> list[str]:
    """One line per judged tier: the tier's decision, then each target with the measured ratio and the
    verdict's decision of that target (its check '<metric> <point> <tier>')."""
    out = []
    for r in record.media:
        for t in r.tiers:
            parts = [f"{m} target {v:g}" + (f" (measured/target {t.ratios[m]:.2f})" if m in t.ratios else "")
                     + (f": {views.decision_text(t.decisions[m])}" if m in t.decisions else "")
                     for m, v in t.targets.items()]
            out.append(f"{r.key} {t.tier}{' (required)' if t.required else ''}: {_decided(t)}; "
                       + "; ".join(parts))
    return out
