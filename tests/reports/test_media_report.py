"""The media section of the report: points read back, tiers judged with the status rules, every renderer."""
from __future__ import annotations

import json

import pytest

from records.media import MediaPoint
from reports import build_report
from reports.console import print_summary
from reports.csv_renderer import render_csv
from reports.html_renderer import render_html
from reports.markdown import render_markdown
from tests.helpers import MEDIA_SPEC_ID, write_model_spec

TIERS = {"functional": {"metrics": {"images_per_s": 0.1, "s_per_step": 2.0}},
         "complete": {"metrics": {"images_per_s": 0.5, "s_per_step": 0.4}}}


def _run_dir(tmp_path, status="FUNCTIONAL", failed=0, with_point=True):
    steps = [{"name": n, "status": "passed", "started": "2026-11-23T00:00:00+00:00",
              "ended": "2026-11-23T00:01:00+00:00", "duration_s": 60.0, "outputs": [], "detail": ""}
             for n in ("evals", "benchmarks", "tests")]
    steps.append({"name": "stress_tests", "status": "skipped", "started": None, "ended": None, "duration_s": None,
                  "outputs": [], "detail": "no stress_tests variant for image models"})
    (tmp_path / "manifest.json").write_text(json.dumps({
        "schema": "tt-run-manifest/1", "run_id": "r1", "model_id": "id_tt-media_tiny_cpu", "workflow": "release",
        "status": "passed", "started": "2026-11-23T00:00:00+00:00", "ended": "2026-11-23T00:05:00+00:00",
        "steps": steps}))
    write_model_spec(tmp_path / "model_spec.json", MEDIA_SPEC_ID, model_id="id_tt-media_tiny_cpu", model_name="tiny",
                     status=status, model_type="image", device_model_spec={"max_concurrency": 2, "perf_reference": [
                         {"isl": 0, "osl": 0, "max_concurrency": 1, "num_prompts": 4, "task_type": "image",
                          "targets": TIERS, "params": {"num_inference_steps": 4}},
                         {"isl": 0, "osl": 0, "max_concurrency": 2, "num_prompts": 4, "task_type": "image",
                          "targets": TIERS}]})
    if with_point:
        point = MediaPoint(model_id="id_tt-media_tiny_cpu", served_model_name="tiny", kind="image",
                           endpoint="/v1/images/generations", max_concurrency=1, num_requests=4,
                           completed=4 - failed, failed=failed,
                           failures_by_class={"http_5xx": failed} if failed else {},
                           error_rate=failed / 4, latency_p50_ms=1000.0, latency_p95_ms=1500.0, latency_p99_ms=1600.0,
                           figures={"images_per_s": 0.2, "s_per_step": 0.25, "latency_p50_ms": 1000.0})
        point.write(tmp_path / "benchmarks" / "media_point_image_con-1.json")
    return tmp_path


def test_media_points_are_judged_with_the_status_tiers(tmp_path):
    record = build_report(_run_dir(tmp_path))
    rows = {r.key: r for r in record.media}
    assert set(rows) == {"image_con-1", "image_con-2"}
    ran = rows["image_con-1"]
    functional, complete = ran.tiers
    # 4 requests make no interval: the verdict's checks are inconclusive, and the tiers say what the checks say
    # (never the point values' pass/fail beside an undecided check)
    assert functional.required and functional.decision == "inconclusive" and functional.passed is None
    assert functional.decisions == {"images_per_s": "inconclusive", "s_per_step": "inconclusive"}
    assert complete.required is False and complete.decision == "inconclusive" and complete.passed is None
    assert complete.failed_metrics == ["images_per_s"]                  # images/s 0.2 < 0.5 as a point value
    assert complete.ratios["s_per_step"] == pytest.approx(0.625)
    assert rows["image_con-2"].ran is False
    assert record.targets == []                                         # media refs never become LLM target rows
    # The con-2 reference point did not run and functional is required: that blocks (as do the
    # missing eval records of a FUNCTIONAL model).
    assert [(b.category, b.item, b.tier) for b in record.verdict.blockers] == [
        ("benchmarks", "image_con-2", "functional"), ("evals", "no-records", None)]


def test_experimental_media_model_passes_without_tiers_but_not_with_failed_requests(tmp_path):
    record = build_report(_run_dir(tmp_path, status="EXPERIMENTAL"))
    assert record.verdict.result == "PASS"
    record = build_report(_run_dir(tmp_path, status="EXPERIMENTAL", failed=1))
    assert record.verdict.result == "FAIL"
    assert "1 of 4 requests failed (http_5xx 1)" in record.verdict.blockers[0].detail


def test_every_renderer_shows_the_media_section(tmp_path):
    record = build_report(_run_dir(tmp_path))
    md = render_markdown(record)
    assert "image_con-2" in md and "NOT RUN" in md
    assert "## Media benchmarks: Image generation" in md and "| image_con-1 | 1 | 4/4 | 0.200 | 0.250 |" in md
    assert "images/s" in render_html(record) and 'data-plot="media-image"' in render_html(record)
    csv_text = render_csv(record)
    assert "media_image,image_con-1" in csv_text and "images_per_s=0.200000" in csv_text
    import io
    buf = io.StringIO()
    print_summary(record, file=buf)
    assert "Media benchmarks: Image generation" in buf.getvalue() and "image_con-1" in buf.getvalue()
    # The report JSON round-trips with the media rows.
    assert type(record).from_json(record.to_json()).media[0].figures["images_per_s"] == 0.2
