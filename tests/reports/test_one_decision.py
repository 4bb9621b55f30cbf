"""One decision per claim in every format: report.json, report.md, report.html, summary.csv and the console.

A claim is a verdict check ('ttft_ms isl-128_osl-128_con-4 complete', 'error_rate <point>', 'accuracy <task>')
or a tier at a point ('tier <point> <tier>'). The run is edited so that two targets' point values sit on one
side of their target while their 95% intervals still hold it: the judge decides INCONCLUSIVE, and a table that
judged the point value would say PASS (150 ms vs 160) or FAIL (60 ms vs 55) beside it.
"""
from __future__ import annotations

import csv
import io
import re
from html.parser import HTMLParser

from records.report import ReportRecord
from reports import run_reports
from reports.console import print_summary

CON1, CON4 = "isl-128_osl-128_con-1", "isl-128_osl-128_con-4"
DECISIONS = ("PASS", "FAIL", "INCONCLUSIVE", "WAIVED", "NOT RUN")
METRICS = {"TTFT": "ttft_ms", "t/s/u": "tput_user", "Decode": "tput"}


def _json_claims(record: ReportRecord) -> dict[str, str]:
    claims = {c.name: c.decision.upper() for c in record.verdict.checks}
    for row in record.targets:
        for tier in row.tiers:
            claims[f"tier {row.key} {tier.tier}"] = tier.decision.replace("_", " ").upper()
            for key in ("ttft_ms", "tput_user", "tput"):
                if getattr(tier, f"{key}_decision"):
                    claims[f"{key} {row.key} {tier.tier}"] = getattr(tier, f"{key}_decision").upper()
    return claims


def _cell_decision(cell: str) -> str | None:
    """The decision a cell shows: the whole cell, its first word(s), or its ': DECISION' ending."""
    for word in DECISIONS:
        if cell == word or cell.startswith(word + " ") or cell.endswith(": " + word):
            return word
    return None


def _table_claims(checks: list[list[str]], check_headers: list[str], targets: list[list[str]],
                  target_headers: list[str], evals: list[list[str]]) -> dict[str, str]:
    """Claims of the checks table, the long targets table and the evals table (its first two columns: task,
    accuracy decision); markdown and HTML show the same columns."""
    name, decision = check_headers.index("Check"), check_headers.index("Decision")
    claims = {row[name]: row[decision] for row in checks}
    claims.update({f"accuracy {row[0]}": row[1] for row in evals})
    point, tier, result = (target_headers.index(h) for h in ("Point", "Tier", "Result"))
    for row in targets:
        claims[f"tier {row[point]} {row[tier]}"] = _cell_decision(row[result])
        for i, header in enumerate(target_headers):
            metric = METRICS.get(header.split(":")[0])
            if metric and _cell_decision(row[i]):
                claims[f"{metric} {row[point]} {row[tier]}"] = _cell_decision(row[i])
    return claims


def _markdown_claims(md: str) -> dict[str, str]:
    tables, current = [], None
    for line in md.splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if current is None:
            current = (cells, [])
            tables.append(current)
        elif not all(set(c) <= {"-"} for c in cells):
            current[1].append(cells)
    checks = next(t for t in tables if t[0][0] == "Check")
    targets = next(t for t in tables if t[0][:2] == ["Point", "Tier"])
    evals = next(t for t in tables if t[0][:2] == ["Task", "Check"])
    return _table_claims(checks[1], checks[0], targets[1], targets[0], evals[1])


class _Tables(HTMLParser):
    """Every <table id=...> of the page as rows of cell texts (the first row is the header)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table: list[list[str]] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._table = self.tables.setdefault(dict(attrs).get("id") or f"t{len(self.tables)}", [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self._table[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _html_claims(html: str) -> dict[str, str]:
    parser = _Tables()
    parser.feed(html)
    checks, targets = parser.tables["checks"], parser.tables["targets"]
    return _table_claims(checks[1:], checks[0], targets[1:], targets[0], parser.tables["evals"][1:])


def _csv_claims(text: str) -> dict[str, str]:
    claims = {}
    for row in csv.DictReader(io.StringIO(text)):
        if row["section"] == "check":
            claims[row["item"]] = row["result"]
        elif row["section"] == "eval":
            claims[f"accuracy {row['item']}"] = row["result"]
        elif row["section"] == "benchmark":
            for tier in ("functional", "complete", "target"):
                if row[f"{tier}_result"]:
                    claims[f"tier {row['item']} {tier}"] = row[f"{tier}_result"]
    return claims


def _console_claims(record: ReportRecord) -> dict[str, str]:
    """The console's checks table and its compact targets table ('INCONCLUSIVE (req) 0.94/...' per tier),
    read by column: rich left-aligns each cell under its header, so a cell runs from its header's start to
    the next header's."""
    buf = io.StringIO()
    print_summary(record, file=buf, width=1000)
    lines = buf.getvalue().splitlines()
    claims: dict[str, str] = {}
    for title, columns in (("Checks decided on their 95% interval", [("Check", "Required"), ("Decision", "Detail")]),
                           ("Accuracy (evals)", [("Task", "Check"), ("Check", "Metric")]),
                           ("Performance targets", [("Point", "Ran"), ("Functional", "Complete"),
                                                    ("Complete", "Target"), ("Target", None)])):
        at = next(i for i, line in enumerate(lines) if line.strip() == title)
        header = lines[at + 2]
        spans = [(header.index(a + " "), header.index(b + " ") if b else None) for a, b in columns]
        for line in lines[at + 4:]:
            if not line.strip():
                break
            row = [line[a:b].strip() for a, b in spans]
            if title.startswith("Checks"):
                claims[row[0]] = row[1]
            elif title.startswith("Accuracy"):
                claims[f"accuracy {row[0]}"] = row[1]
            else:
                for tier, cell in zip(("functional", "complete", "target"), row[1:]):
                    claims[f"tier {row[0]} {tier}"] = _cell_decision(cell)
    return claims


def test_every_format_shows_the_judges_one_decision_per_claim(make_run):
    run = make_run()

    def targets(spec: dict) -> None:
        con1, con4 = spec["device_model_spec"]["perf_reference"]
        con4["targets"]["complete"]["ttft_ms"] = 160.0  # 150 ms [105, 198]: the value passes, the interval holds it
        con1["targets"]["complete"]["ttft_ms"] = 55.0  # 60 ms [44, 78]: the value misses, the interval holds it
    run.edit("model_spec.json", targets)
    run.add_waiver("benchmarks", CON1, "a waived claim is WAIVED everywhere")
    # an eval the verdict waives: the evals table shows WAIVED, not the record's own INCONCLUSIVE beside it
    run.edit("evals/gsm8k_tiny/eval_record.json", lambda r: r.update(decision="inconclusive", passed=None,
                                                                      target=0.29, ci95=[0.2, 0.4]))
    run.add_waiver("evals", "gsm8k_tiny", "a waived eval is WAIVED everywhere")
    assert run_reports.main(["--run-dir", str(run.path), "--ignore-verdict"]) == 0
    out = run.path / "reports"
    record = ReportRecord.read(out / "report.json")

    expected = _json_claims(record)
    assert expected[f"ttft_ms {CON4} complete"] == "INCONCLUSIVE" == expected[f"tier {CON4} complete"]
    assert expected[f"ttft_ms {CON1} complete"] == "WAIVED" == expected[f"tier {CON1} complete"]
    assert expected["accuracy gsm8k_tiny"] == "WAIVED" and expected["accuracy arc_easy_tiny"] == "PASS"
    con4 = next(t for t in next(r for r in record.targets if r.key == CON4).tiers if t.tier == "complete")
    assert con4.ttft_ratio < 1 and con4.passed is None and con4.ttft_pass is None  # the value alone passes
    assert record.verdict.result == "INCONCLUSIVE"

    formats = {"markdown": _markdown_claims((out / "report.md").read_text()),
               "html": _html_claims((out / "report.html").read_text()),
               "csv": _csv_claims((out / "summary.csv").read_text()),
               "console": _console_claims(record)}
    for name, claims in formats.items():
        differ = {claim: (expected.get(claim), shown) for claim, shown in claims.items()
                  if expected.get(claim) != shown}
        assert not differ, f"{name} contradicts report.json: {differ}"
        missing = {c for c in expected if not c.startswith(("ttft_ms", "tput"))} - set(claims)
        if name != "csv":  # the CSV's tiers are per benchmark row; all others show every claim
            missing |= {c for c in expected if c.startswith(("ttft_ms", "tput"))} - set(claims)
        assert not missing, f"{name} does not show {sorted(missing)}"
