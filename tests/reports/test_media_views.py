"""The media tables of every renderer (reports/media_views.py), for the vision kind: its own headline
figures (images and image tokens per request, images/s) beside the shared columns, a point that did not
run, and the tier and target lines; the markdown section under the kind's title."""
from __future__ import annotations

from pathlib import Path

from records.media import FIGURE_LEGEND
from records.report import MediaRow, MediaTierCheck
from reports import build_report
from reports.markdown import render_markdown
from reports.media_views import KIND_FIGURES, KIND_TITLES, media_tables, target_lines, tier_text

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "benchmarks_only_run"


def _vision_rows() -> list[MediaRow]:
    functional = MediaTierCheck(tier="functional", required=True, targets={"images_per_s": 0.5},
                                ratios={"images_per_s": 3.1}, passed=True)
    ran = MediaRow(key="vision_con-2", kind="vision", max_concurrency=2, ran=True, num_requests=8, completed=7,
                   failed=1, latency_p50_ms=640.0, latency_p95_ms=910.5, latency_p99_ms=990.0,
                   figures={"images_per_request": 2.0, "prompt_tokens_per_image": 4.0,
                            "prompt_tokens_per_request": 36.25, "images_per_s": 1.5555},
                   tiers=[functional], record_file="benchmarks/media_point_vision_con-2.json",
                   core_seconds_per_unit=0.123456, cost_note="core-seconds of the local server per image")
    missing = MediaRow(key="vision_con-4", kind="vision", max_concurrency=4, ran=False,
                       tiers=[MediaTierCheck(tier="functional", required=True, targets={"images_per_s": 0.5})])
    return [ran, missing]


def test_vision_rows_show_their_own_figures_beside_the_shared_columns() -> None:
    record = build_report(FIXTURE)
    record.media = _vision_rows()
    (table,) = media_tables(record)
    assert (table.kind, table.title) == ("vision", KIND_TITLES["vision"]) == ("vision", "Vision chat (image_url parts)")
    assert table.headers == ["Point", "Concurrency", "Completed", "images/request", "prompt tokens/image",
                             "prompt tokens/request", "images/s", "server core-s/item", "J/item", "p50 ms", "p95 ms",
                             "p99 ms", "Tiers", "Record"]
    ran, missing = table.rows
    assert ran == ["vision_con-2", "2", "7/8, 1 failed", "2.0", "4.0", "36.2", "1.556", "0.1235", "n/a", "640.0",
                   "910.5", "990.0", "functional PASS (required)", "benchmarks/media_point_vision_con-2.json"]
    assert missing[:3] == ["vision_con-4", "4", "NOT RUN"] and missing[-2:] == ["NOT RUN (functional required)", ""]
    assert missing[7:9] == ["", ""]  # no cost figures for a point that did not run
    # every figure a vision row shows has its legend entry (a number on screen says what it is)
    assert all(name in FIGURE_LEGEND for _, name, _ in KIND_FIGURES["vision"])
    assert target_lines(record) == [
        "vision_con-2 functional (required): PASS; images_per_s target 0.5 (measured/target 3.10)",
        "vision_con-4 functional (required): n/a; images_per_s target 0.5"]
    assert [tier_text(row) for row in record.media] == ["functional PASS (required)", "NOT RUN (functional required)"]


def test_the_markdown_report_has_the_vision_section() -> None:
    record = build_report(FIXTURE)
    record.media = _vision_rows()
    markdown = render_markdown(record)
    section = markdown.split("## Media benchmarks: Vision chat (image_url parts)", 1)[1].split("\n## ", 1)[0]
    assert "| images/request | prompt tokens/image |" in section and "| vision_con-2 | 2 | 7/8, 1 failed |" in section
    assert "- vision_con-2 functional (required): PASS; images_per_s target 0.5 (measured/target 3.10)" in section
    assert "- vision_con-2: core-seconds of the local server per image" in section
