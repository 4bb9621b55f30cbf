"""The agreement records of a run (--workflow-args agreement=TOOL) in its report: verdict checks named
'agreement <metric> <point> <tool>', shown and not required, a note per disagreement, and one "Tools agree"
table in report.json, report.md and report.html with the same decisions."""
from __future__ import annotations

import json
import random
from pathlib import Path

from benchmarking.agreement import run_abba
from records.agreement import AgreementBlock, AgreementRecord
from records.report import ReportRecord
from reports import build_report, write_reports


def _record(point: str, truths: dict[str, float], seed: int) -> AgreementRecord:
    """An agreement record measured by the real ABBA loop from simulated blocks: the tool reads each metric
    ``truths[metric]`` times ours, with 1% block noise."""
    rng = random.Random(seed)

    def measure(side: str, index: int) -> AgreementBlock:
        base = {"mean_ttft_ms": 500.0, "mean_tpot_ms": 60.0, "output_tok_s": 15.0}
        values = {k: v * (truths[k] if side == "B" else 1.0) * (1 + rng.gauss(0, 0.01)) for k, v in base.items()}
        return AgreementBlock(index=index, side=side, tool="tt-bench" if side == "A" else "aiperf", requests=4,
                              completed=4, duration_s=8.0, values=values)
    return run_abba(AgreementRecord(point=point, tool="aiperf", max_cycles=3), measure)


def test_agreement_checks_table_and_notes_in_every_renderer(make_run) -> None:
    run = make_run("benchmarks_only_run")
    bench = Path(run.path) / "benchmarks"
    _record("isl-128_osl-128_con-1", {"mean_ttft_ms": 1.0, "mean_tpot_ms": 1.01, "output_tok_s": 0.7}, 1).write(
        bench / "point_isl-128_osl-128_con-1_n-8.agreement.json")
    before = build_report(Path(run.path)).verdict.result
    record = build_report(Path(run.path))
    checks = {c.name: c for c in record.verdict.checks if c.category == "agreement"}
    assert set(checks) == {f"agreement {m} isl-128_osl-128_con-1 aiperf"
                           for m in ("mean_ttft_ms", "mean_tpot_ms", "output_tok_s")}
    assert checks["agreement mean_ttft_ms isl-128_osl-128_con-1 aiperf"].decision == "pass"
    tput = checks["agreement output_tok_s isl-128_osl-128_con-1 aiperf"]
    assert tput.decision == "fail" and not tput.required and tput.n >= 4 and tput.ci95[1] < 1 / 1.1
    assert all(not c.required for c in checks.values())
    assert record.verdict.result == before  # the tools' agreement never changes the model's verdict
    [note] = [n for n in record.verdict.notes if n.startswith("tools disagree")]
    assert note.startswith("tools disagree on output_tok_s at isl-128_osl-128_con-1: ours 1") and ", aiperf " in note
    write_reports(record, Path(run.path))
    back = ReportRecord.read(Path(run.path) / "reports" / "report.json")
    assert [m.decision for m in back.agreement] == ["agree", "agree", "disagree"]
    md = (Path(run.path) / "reports" / "report.md").read_text()
    assert "## Tools agree" in md and "| DISAGREE |" in md and md.count("| agree |") == 2
    html = (Path(run.path) / "reports" / "report.html").read_text()
    assert 'id="agreement"' in html and ">DISAGREE<" in html


def test_an_unreadable_agreement_record_is_a_record_problem(make_run) -> None:
    run = make_run("benchmarks_only_run")
    path = Path(run.path) / "benchmarks" / "point_isl-128_osl-128_con-1_n-8.agreement.json"
    path.write_text(json.dumps({"schema": "tt-agreement/1", "point": 3}))
    record = build_report(Path(run.path))
    assert record.verdict.result == "FAIL"
    assert any("agreement.json" in b.detail or "agreement.json" in b.item for b in record.verdict.blockers)
