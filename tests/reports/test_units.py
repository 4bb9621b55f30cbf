"""Numbers printed by their unit, and the benchmark table's request counts as measured.

Why: a check target printed ``5,000.0000`` and an error rate ``0.0000``; the benchmark table's "N" showed
the planned prompts (4) while the checks rested on the 8 requests an adaptive point completed.
"""
from __future__ import annotations

import pytest

from records.report import Check
from reports import units, views
from reports.builder import build_report
from reports.markdown import render_markdown

POINT1 = "benchmarks/point_isl-128_osl-128_con-1_n-8.json"


@pytest.mark.parametrize("metric, value, shown", [
    ("ttft_ms", 5000.0, "5,000"), ("ttft_ms", 507.34, "507"), ("ttft_ms", 42.46, "42.5"),
    ("tput_user", 14.1432, "14.14"), ("tput", 133.47, "133.5"), ("output_tok_s", 9.999, "10.00"),
    ("error_rate", 0.0, "0.0%"), ("error_rate", 0.324408, "32.4%"), ("latency_drift_pct", 12.345, "12.3%"),
    ("accuracy", 0.694444, "0.6944"), ("rtf", 0.12345, "0.123"), ("images_per_s", 0.2, "0.20"),
])
def test_each_number_is_formatted_by_its_unit(metric, value, shown):
    assert units.number(value, units.unit_of(metric)) == shown


def test_check_cells_read_as_their_units():
    ttft = Check(name="ttft_ms isl-128_osl-32_con-1 target", category="benchmarks", item="p", required=True,
                 value=507.3, ci95=[490.2, 526.4], target=5000.0, decision="inconclusive")
    errors = Check(name="error_rate p", category="benchmarks", item="p", required=True, value=0.0,
                   ci95=[0.0, 0.324408], target=0.0, decision="pass")
    score = Check(name="accuracy gsm8k", category="evals", item="gsm8k", required=True, value=0.694444,
                  ci95=[0.607163, 0.781726], target=0.55552, decision="pass")
    goodput = Check(name="capacity goodput concurrency 4", category="stress_tests", item="c", required=False,
                    value=1.0, ci95=[0.9542, 1.0], target=0.95, decision="pass")
    rows = {c.name.split()[0]: dict(zip([h for h, _ in views.CHECK_COLUMNS], views.cells(views.CHECK_COLUMNS, c)))
            for c in (ttft, errors, score, goodput)}
    assert (rows["ttft_ms"]["Value [95% CI]"], rows["ttft_ms"]["Target"]) == ("507 ms [490, 526]", "5,000 ms")
    assert (rows["error_rate"]["Value [95% CI]"], rows["error_rate"]["Target"]) == ("0.0% [0.0%, 32.4%]", "0.0%")
    assert (rows["accuracy"]["Value [95% CI]"], rows["accuracy"]["Target"]) == ("0.6944 [0.607, 0.782]", "0.5555")
    assert (rows["capacity"]["Value [95% CI]"], rows["capacity"]["Target"]) == ("100.0% [95.4%, 100.0%]", "95.0%")


def test_no_check_of_a_real_report_prints_four_decimals_of_a_latency(make_run):
    md = render_markdown(build_report(make_run().path))
    checks = md[md.index("Checks decided"):md.index("## Metadata")]
    assert "ttft_ms isl-128_osl-128_con-4 functional | yes | 150 ms [105, 198] | 16 | 1,000 ms | PASS" in checks
    assert ".0000" not in checks


def test_benchmark_table_shows_the_requests_measured_not_the_planned_prompts(make_run):
    """An adaptive point planned 4 prompts and completed 8: the table's counts are the 8 the checks used."""
    run = make_run()
    run.edit(POINT1, lambda r: r["point"].update(num_prompts=4))
    record = build_report(run.path)
    headers = [h for h, _ in views.BENCHMARK_COLUMNS]
    assert "N" not in headers and headers.index("Completed") < headers.index("Planned")
    row = dict(zip(headers, views.cells(views.BENCHMARK_COLUMNS, record.benchmarks[0])))
    assert (row["Completed"], row["Failed"], row["Planned"]) == ("8", "0", "4")
    error = next(c for c in record.verdict.checks if c.name == "error_rate isl-128_osl-128_con-1")
    assert error.n == int(row["Completed"]) + int(row["Failed"])
    md = render_markdown(record)
    assert "| ISL | OSL | Concurrency | Completed | Failed |" in md and "| 128 | 128 | 1 | 8 | 0 | 60.0 |" in md
    assert "- **Planned**: Requests the point sends at least" in md
