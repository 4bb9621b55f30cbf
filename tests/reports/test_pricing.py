"""What a token costs: --workflow-args hourly_cost= (currency=) prices every benchmark point and the SLO capacity
in the report, from the output throughput the run measured there; no client takes part."""
from __future__ import annotations

import csv
import io
import json

import pytest

from contracts.workflow_args import WorkflowType, passthrough_targets, validate_workflow_args
from contracts.workflow_keys import COST_ARGS
from records.stress import CapacityLevel, CapacityRecord
from reports import run_reports
from reports.builder import build_report
from reports.markdown import render_markdown
from reports.pricing import cost_per_1m, parse_price
from workflows.clients import args_for


def _cost(hourly: float, tok_s: float) -> float:
    return hourly / (tok_s * 3600) * 1e6


def _priced_run(make_run, args: str = "hourly_cost=2.50 currency=EUR"):
    run = make_run()
    run.path = run.path.rename(run.path.with_name(f"priced-{len(list(run.path.parent.iterdir()))}"))
    run.edit("cli_args.json", lambda c: c.update(workflow_args=args))
    run.set_step("stress_tests", "passed")
    CapacityRecord(model_id="m", metric="concurrency", slos=["ttft_p99:2000"], isl=128, osl=128, start=1, ceiling=8,
                   capacity=4, levels=[CapacityLevel(level=2, holds=True, goodput=1.0, sent=40, duration_s=20.0),
                                       CapacityLevel(level=4, holds=True, goodput=1.0, sent=80, failed=0,
                                                     duration_s=25.0),
                                       CapacityLevel(level=8, holds=False, goodput=0.5, sent=80, failed=40,
                                                     duration_s=40.0)],
                   status="passed", passed=True, detail="capacity 4").write(
        run.path / "stress_tests" / "capacity_record.json")
    return run


def test_every_point_and_the_capacity_get_a_cost_per_million_output_tokens(make_run):
    run = _priced_run(make_run)
    record = build_report(run.path)
    assert record.pricing is not None and (record.pricing.hourly_cost, record.pricing.currency) == (2.5, "EUR")
    for row in record.benchmarks:
        assert row.cost_per_1m_output_tokens == pytest.approx(_cost(2.5, row.output_throughput), rel=1e-6)
    # capacity 4: 80 requests of 128 output tokens in 25 s
    assert record.pricing.capacity_output_tok_s == pytest.approx(409.6)
    assert record.pricing.capacity_cost_per_1m_output_tokens == pytest.approx(_cost(2.5, 409.6), rel=1e-6)
    md = render_markdown(record)
    assert "| Server core-s / 1k out tok | EUR / 1M out tok | J / 1k out tok |" in md  # beside core-seconds
    assert f"| {_cost(2.5, 33.859):.2f} |" in md
    assert "Price 2.50 EUR per hour: a million output tokens cost 1.70 EUR at the SLO capacity (concurrency 4" in md
    capacity = next(t for t in record.stress_tests.tables if t.kind == "capacity")
    assert capacity.headers[-1] == "Cost / 1M out tok (EUR)"
    assert [row[-1] for row in capacity.rows] == [f"{_cost(2.5, 40 * 128 / 20):,.2f}", "1.70",
                                                  f"{_cost(2.5, 40 * 128 / 40):,.2f}"]
    assert type(record).from_json(record.to_json()) == record


def test_the_reports_step_prices_again_and_every_format_shows_it(make_run):
    """A rebuild with another price (the reports step's own --workflow-args) prices the same run anew."""
    run = _priced_run(make_run)
    assert run_reports.main(["--run-dir", str(run.path), "--ignore-verdict",
                             "--workflow-args-json", json.dumps({"hourly_cost": "5"})]) == 0
    doc = json.loads((run.path / "reports" / "report.json").read_text())
    assert doc["pricing"]["hourly_cost"] == 5.0 and doc["pricing"]["currency"] == "EUR"
    con1 = doc["benchmarks"][0]
    assert con1["cost_per_1m_output_tokens"] == pytest.approx(_cost(5, con1["output_throughput"]), rel=1e-6)
    rows = list(csv.DictReader(io.StringIO((run.path / "reports" / "summary.csv").read_text())))
    bench = next(r for r in rows if r["section"] == "benchmark")
    assert float(bench["cost_per_1m_output_tokens"]) == pytest.approx(con1["cost_per_1m_output_tokens"], abs=1e-4)
    assert bench["currency"] == "EUR"
    priced = next(r for r in rows if r["section"] == "pricing")
    assert float(priced["value"]) == pytest.approx(_cost(5, 409.6), abs=1e-4)
    html = (run.path / "reports" / "report.html").read_text()
    assert "EUR / 1M out tok" in html and 'id="pricing"' in html


def test_no_price_no_cost_and_a_bad_price_is_a_note(make_run):
    bad = build_report(_priced_run(make_run, "hourly_cost=cheap").path)
    record = build_report(make_run().path)
    assert record.pricing is None and all(r.cost_per_1m_output_tokens is None for r in record.benchmarks)
    assert "1M out tok" not in render_markdown(record)
    assert bad.pricing is None and any("ignored hourly_cost='cheap'" in n for n in bad.verdict.notes)
    assert parse_price({"hourly_cost": "-1"})[0] is None and parse_price({"hourly_cost": "3"}) == (3.0, "USD", None)
    assert cost_per_1m(2.5, 0.0) is None and cost_per_1m(2.5, None) is None


@pytest.mark.parametrize("workflow", [WorkflowType.BENCHMARKS, WorkflowType.RELEASE, WorkflowType.STRESS_TESTS])
def test_the_price_is_a_report_key_never_a_request_field(workflow):
    """Declared once (COST_ARGS): every workflow with a report takes it, and only its reports step gets it."""
    args = {"hourly_cost": "2.50", "currency": "EUR"}
    validate_workflow_args(workflow, args)
    assert passthrough_targets(workflow, args) == {}
    assert args_for(WorkflowType.BENCHMARKS, args) == {} and args_for(WorkflowType.REPORTS, args) == args
    assert "per hour" in COST_ARGS["hourly_cost"] and "USD" in COST_ARGS["currency"]
