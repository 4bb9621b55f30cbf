"""The A/B of two live servers as verdict checks (``--baseline-url`` / ``--baseline-vllm-args``).

One check per metric and judged point, named ``ab <metric> <point>`` (category ``ab``), with the ratio
candidate / baseline, its 95% interval and the decision of ``records.ab``: regressed -> fail (a blocker),
improved or within_noise -> pass, inconclusive -> inconclusive. Every check is required: the user asked for
the comparison, so it is a gate: a regression fails the verdict (exit 3), an undecided comparison leaves it
INCONCLUSIVE (exit 4), its detail saying how many more blocks would likely decide it, and a comparison asked
for that measured nothing is an undecided check too, never a silent PASS.
"""
from __future__ import annotations

from records.ab import IMPROVED, METHOD, REGRESSED, WITHIN_NOISE, ABSection
from records.judge_checks import SectionJudgement
from records.report import Blocker, Check

_DECISIONS = {REGRESSED: "fail", IMPROVED: "pass", WITHIN_NOISE: "pass"}


def ab_checks(section: ABSection) -> SectionJudgement:
    """Every A/B metric as a required check; a blocker per regression; a note per improvement."""
    checks: list[Check] = []
    blockers: list[Blocker] = []
    notes: list[str] = []
    for record in section.records:
        for m in record.metrics:
            target = 1 - m.tolerance if m.higher_is_better else 1 + m.tolerance
            detail = f"{m.detail()}; against {section.baseline}"
            checks.append(Check(name=m.name, category="ab", item=m.point, required=True, value=m.ratio, ci95=m.ci95,
                                ci_method=METHOD, n=m.pairs, target=round(target, 4),
                                decision=_DECISIONS.get(m.decision, "inconclusive"), detail=detail, looks=m.looks,
                                stopped=m.stopped))
            if m.decision == REGRESSED:
                blockers.append(Blocker("ab", f"{m.metric} {m.point}", detail))
            elif m.decision == IMPROVED:
                notes.append(f"A/B: {m.metric} at {m.point} improved on {section.baseline}: ratio {m.ratio} "
                             f"(95% CI {m.ci95})")
        notes += [f"A/B {record.point}: {n}" for n in record.notes]
    for ev in section.evals:
        target = 1 - ev.tolerance
        detail = f"{ev.detail()}; against {section.baseline}"
        checks.append(Check(name=ev.name, category="ab", item=ev.task, required=True, value=ev.ratio, ci95=ev.ci95,
                            ci_method=ev.method, n=ev.items, target=round(target, 4),
                            decision=_DECISIONS.get(ev.decision, "inconclusive"), detail=detail))
        if ev.decision == REGRESSED:
            blockers.append(Blocker("ab", f"accuracy {ev.task}", detail))
    missing = list(section.missing)
    if not checks and not missing:
        missing = ["no point was measured against the baseline"]
    for why in missing:
        checks.append(Check(name="ab not measured", category="ab", item="ab", required=True, decision="inconclusive",
                            detail=f"{why}; the comparison with {section.baseline} was asked for"))
    return SectionJudgement(checks, blockers, notes)
