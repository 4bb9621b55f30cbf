"""The "Requirements" table: how a customer's requirements document was judged, one row per requirement.

Why one module: the markdown report (at its top), the console summary and the HTML page show the same
rows (``records.requirements.RequirementsSection``), so their columns are declared once here.
"""
from __future__ import annotations

from records.requirements import RequirementRow, RequirementsSection

COLUMNS = ("Requirement", "Level", "Metric", "Status", "Value (95% CI, n)", "Target")


def value_cell(row: RequirementRow) -> str:
    """'412 ms [390, 431] n=24', '3/3 sessions [0.44, 1] n=3' or 'not measured'."""
    if row.value is None and not row.shown_value:
        return "not measured"
    unit = " ms" if row.metric.split()[0].endswith("_ms") else ""
    text = row.shown_value or f"{row.value:.4g}{unit}"
    if row.ci95:
        text += f" [{row.ci95[0]:.4g}, {row.ci95[1]:.4g}]"
    return text + (f" n={row.n}" if row.n else "")


def rows(section: RequirementsSection) -> list[list[str]]:
    return [[r.id, r.level, r.metric, r.status, value_cell(r), r.target] for r in section.rows]


def header_line(section: RequirementsSection) -> str:
    return (f"Requirements from {section.source} (schema {section.schema_version})"
            + (f": {section.summary}" if section.summary else ""))


def notes(section: RequirementsSection) -> list[str]:
    """The detail of every row that is not met or undecided: what was missed, or what more sampling takes."""
    return [f"{r.id} ({r.status}): {r.detail}" for r in section.rows if r.status != "met" and r.detail]
