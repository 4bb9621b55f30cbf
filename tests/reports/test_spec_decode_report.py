"""The "Speculative decoding" section: point records carrying ``spec_decode`` and an A/B against the spec without
speculation give the acceptance per position with intervals and the speedup decisions, the same in report.json,
report.md and report.html (with the per-position plot); a run whose server does not speculate has no section."""
from __future__ import annotations

from pathlib import Path

from records.ab import ABMetric, ABRecord
from records.report import ReportRecord
from records.spec_decode import figures
from reports import build_report, write_reports

POINT = "benchmarks/point_isl-128_osl-128_con-1_n-8.json"


def _with_speculation(run) -> None:
    rec = figures("this run's server /metrics", 40, 120, 66, {0: 30, 1: 22, 2: 14})
    run.edit(POINT, lambda p: p.update(spec_decode=rec.to_dict()))
    run.edit(POINT, lambda p: p["point"].update(dataset="lookup"))


def _ab(run) -> None:
    run.edit("cli_args.json", lambda a: a.update(baseline_vllm_args='{"speculative_config": null}'))
    key = "isl-128_osl-128_con-1"
    metrics = [ABMetric(point=key, metric="mean_tpot_ms", baseline=60.0, candidate=40.0, ratio=0.667,
                        ci95=[0.62, 0.71], pairs=4, decision="improved"),
               ABMetric(point=key, metric="output_tok_s", higher_is_better=True, baseline=15.0, candidate=15.2,
                        ratio=1.013, ci95=[0.98, 1.04], pairs=4, decision="within_noise"),
               ABMetric(point=key, metric="mean_ttft_ms", baseline=500.0, candidate=505.0, ratio=1.01,
                        ci95=[0.9, 1.1], pairs=4, decision="inconclusive")]
    ABRecord(point=key, baseline='--baseline-vllm-args {"speculative_config": null}', baseline_url="http://b",
             candidate_url="http://c", metrics=metrics, stopped="decided").write(
        Path(run.path) / "benchmarks" / "point_isl-128_osl-128_con-1_n-8.ab.json")


def test_the_section_in_every_renderer(make_run) -> None:
    run = make_run("benchmarks_only_run")
    _with_speculation(run)
    _ab(run)
    record = build_report(Path(run.path))
    section = record.spec_decode
    [point] = section.points
    assert point.point == "isl-128_osl-128_con-1" and point.dataset == "lookup"
    assert point.spec_decode.acceptance_rate == 0.55 and len(point.spec_decode.per_position) == 3
    assert [(u.metric, u.decision) for u in section.speedup] == [("mean_tpot_ms", "faster"), ("output_tok_s", "same")]
    write_reports(record, Path(run.path))
    back = ReportRecord.read(Path(run.path) / "reports" / "report.json")
    assert back.spec_decode == section
    assert all(p.ci95[0] < p.rate < p.ci95[1] for p in back.spec_decode.points[0].spec_decode.per_position)
    md = (Path(run.path) / "reports" / "report.md").read_text()
    assert "## Speculative decoding" in md and "| 66 / 120 |" in md and "0: 0.75 [" in md
    assert "| mean_tpot_ms | 60 | 40 | 0.667 [0.620, 0.710] | faster |" in md
    html = (Path(run.path) / "reports" / "report.html").read_text()
    assert "<h2>Speculative decoding</h2>" in html and 'data-plot="spec-decode-positions"' in html
    assert html.count("<circle") >= 3


def test_no_section_without_speculation_and_a_note_without_an_ab(make_run) -> None:
    run = make_run("benchmarks_only_run")
    assert build_report(Path(run.path)).spec_decode is None
    _with_speculation(run)
    section = build_report(Path(run.path)).spec_decode
    assert section.speedup == [] and any("no A/B" in n for n in section.notes)
