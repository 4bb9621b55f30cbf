"""The agreement of two load generators as verdict checks (``--workflow-args agreement=TOOL``).

One check per metric and point, named ``agreement <metric> <point> <tool>`` (category ``agreement``), with
the ratio tool / ours, its 95% interval and the decision of ``records.agreement``: agree -> pass,
disagree -> fail, inconclusive -> inconclusive. The checks are shown and decided but not required: they
judge the measuring tools, not the model, so a tool that times differently (its duration spans its own
start-up, its TTFT its own client overhead) never fails a model's release. A disagreement is named in the
verdict's notes with the metric and both values, so it is never silent.
"""
from __future__ import annotations

from typing import Sequence

from records.agreement import AGREE, DISAGREE, METHOD, AgreementMetric
from records.judge_checks import SectionJudgement
from records.report import Check

_DECISIONS = {AGREE: "pass", DISAGREE: "fail"}


def agreement_checks(metrics: Sequence[AgreementMetric]) -> SectionJudgement:
    """Every agreement metric as a check; a note per disagreement."""
    checks = [Check(name=m.name, category="agreement", item=m.point, required=False, value=m.ratio, ci95=m.ci95,
                    ci_method=METHOD, n=m.pairs, target=1.0 + m.band,
                    decision=_DECISIONS.get(m.decision, "inconclusive"),
                    detail=m.detail() + "; shown, not required (it judges the tools, not the model)",
                    looks=m.looks, stopped=m.stopped)
              for m in metrics]
    notes = [f"tools disagree on {m.metric} at {m.point}: ours {m.ours:.4g}, {m.tool} {m.theirs:.4g} "
             f"(ratio {m.ratio}, 95% CI {m.ci95}, band ±{m.band:.0%})"
             for m in metrics if m.decision == DISAGREE and m.ours is not None and m.theirs is not None]
    return SectionJudgement(checks, [], notes)
