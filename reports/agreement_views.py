"""The "Tools agree" table (``--workflow-args agreement=TOOL``) as every renderer shows it.

One row per point and metric: our client's value, the tool's, the ratio with its 95% interval and the
decision against the noise band (``records.agreement``). A disagreement is shown in capitals, as a
regression is in the comparison table, so it is not missed among the agreements.
"""
from __future__ import annotations

from records.agreement import DISAGREE, METHOD, AgreementMetric
from reports.views import Column

AGREEMENT_COLUMNS: list[Column] = [
    ("Point", lambda m: m.point),
    ("Metric", lambda m: m.metric),
    ("Ours", lambda m: "n/a" if m.ours is None else f"{m.ours:.4g}"),
    ("Tool", lambda m: m.tool),
    ("Tool's value", lambda m: "n/a" if m.theirs is None else f"{m.theirs:.4g}"),
    ("Ratio tool/ours [95% CI]", lambda m: "n/a" if m.ratio is None else (
        f"{m.ratio:.3f}" + (f" [{m.ci95[0]:.3f}, {m.ci95[1]:.3f}]" if m.ci95 else " (no interval)"))),
    ("Pairs", lambda m: str(m.pairs)),
    ("Band", lambda m: f"±{m.band:.0%}"),
    ("Decision", lambda m: m.decision.upper() if m.decision == DISAGREE else m.decision),
]


def agreement_rows(metrics: list[AgreementMetric]) -> list[list[str]]:
    return [[fn(m) for _, fn in AGREEMENT_COLUMNS] for m in metrics]


def header_line(metrics: list[AgreementMetric]) -> str:
    """'Our client against aiperf at 2 points: 4 agree, 1 disagree, 1 inconclusive. <method>.'"""
    tools = sorted({m.tool for m in metrics})
    points = sorted({m.point for m in metrics})
    counts = {d: sum(1 for m in metrics if m.decision == d) for d in ("agree", "disagree", "inconclusive")}
    parts = ", ".join(f"{n} {d}" for d, n in counts.items() if n)
    return (f"Our client against {', '.join(tools)} at {len(points)} point(s): {parts}. Shown, not required: "
            f"it judges the tools, not the model. Interval: {METHOD}.")
