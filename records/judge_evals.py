"""The judge's evals section (``records.judge``): an eval that failed or errored blocks, no eval records
at all block, every scored eval is a check decided on its interval (``eval_check``), and the served
vs in-process comparison is a check of its own (``serving_check_of``).
"""
from __future__ import annotations

from typing import Sequence

from records.judge_checks import SectionJudgement, fmt_ci
from records.report import Blocker, Check, EvalRow

#: An eval row's pass flag as a decision (no flag: none).
_FLAG_DECISIONS: dict[bool | None, str] = {True: "pass", False: "fail"}

def judge_evals(evals: Sequence[EvalRow]) -> SectionJudgement:
    """The evals section when it is judged (the step ran and the status requires evals): blockers for no
    records, an errored eval and a failed one (``_eval_detail``, in the rows' order), then each eval's
    accuracy check and serving check (an eval without a reference or published score is a note)."""
    checks: list[Check] = []
    notes: list[str] = []
    blockers = [] if evals else [Blocker("evals", "no-records", "evals ran but wrote no eval records")]
    for ev in evals:
        if ev.status == "error":
            blockers.append(Blocker("evals", ev.task, f"eval errored: {ev.error or 'no detail'}"))
        elif ev.passed is False or ev.status == "failed":
            blockers.append(Blocker("evals", ev.task, _eval_detail(ev)))
    for ev in (e for e in evals if e.status != "error"):
        check = eval_check(ev)
        if check is None:
            notes.append(f"eval {ev.task}: no reference or published score, not judged")
        else:
            checks.append(check)
        serving = serving_check_of(ev)
        if serving is not None:
            checks.append(serving)
    return SectionJudgement(checks, blockers, notes)


def eval_check(ev: EvalRow) -> Check | None:
    """An eval row as a check decided on its interval; None when there was nothing to compare it
    with. Smoke runs decide only what their samples can: an inconclusive smoke score is shown, not
    required."""
    decision = ev.decision or _FLAG_DECISIONS.get(ev.passed)
    if decision is None:
        if ev.target is None:
            return None
        decision = "inconclusive"
    detail = None
    required = True
    if decision == "inconclusive":
        if ev.mode == "smoke":
            required = False
            detail = "smoke samples cannot decide a healthy score; not required (mode=ci decides it)"
        else:
            detail = (f"the 95% interval holds the target: {ev.samples or 'these'} samples cannot decide it; a mode "
                      f"or an eval set with more items can")
    if ev.condition_differences:
        detail = "; ".join(filter(None, [detail, "this run differs from the reference score's measurement in "
                                         + ", ".join(ev.condition_differences)]))
    return Check(name=f"accuracy {ev.task}", category="evals", item=ev.task, required=required,
                 value=ev.value, ci95=ev.ci95, ci_method=ev.ci_method, n=ev.samples, target=ev.target,
                 decision=decision, detail=detail, looks=ev.looks, stopped=ev.stopped)



#: How the paired serving check's interval is made (evals.sequential_eval).
PAIRED_SERVING_METHOD = ("paired per item: the share of items whose served score differs from the in-process "
                         "engine's score of the same item, an anytime-valid without-replacement confidence sequence "
                         "(Waudby-Smith & Ramdas); fails when wholly above the allowed share")


def serving_check_of(ev: EvalRow) -> Check | None:
    """The served vs in-process comparison of an eval row as a check (None without an in-process score).

    Paired (the row has ``disagreements``): ``value`` is the share of items whose served score differs
    from the in-process one and ``ci95`` its anytime-valid interval, against ``max_disagreement``.
    Otherwise (an in-process score without per-item scores):

    ``value`` is the served score and ``ci95`` the in-process score's interval it must lie in. A fail
    is a serving bug (the row's status is then failed, which blocks). Inconclusive, when the two
    cannot be compared: required when the in-process reference is stale (the task changed) or too
    small, since the served score is then unverified; not required when this run chose other items
    (a ``limit``) or is a smoke run."""
    if ev.serving_decision is None:
        return None
    if ev.disagreements is not None and ev.samples:
        return Check(name=f"served vs in-process {ev.task}", category="evals", item=ev.task,
                     required=ev.serving_decision != "inconclusive" or ev.mode != "smoke",
                     value=round(ev.disagreements / ev.samples, 6), ci95=ev.disagreement_ci95,
                     ci_method=PAIRED_SERVING_METHOD, n=ev.samples, target=ev.max_disagreement,
                     decision=ev.serving_decision, detail=ev.serving_detail, looks=ev.looks, stopped=ev.stopped)
    required = ev.serving_decision != "inconclusive" or (
        ev.mode != "smoke" and ev.samples == ev.in_process_samples)
    return Check(name=f"served vs in-process {ev.task}", category="evals", item=ev.task, required=required,
                 value=ev.value, ci95=ev.in_process_ci95,
                 ci_method="the in-process score's 95% interval (lm-eval hf backend, its stderr): the served "
                           "value must lie inside it",
                 n=ev.in_process_samples, target=ev.in_process_score, decision=ev.serving_decision,
                 detail=ev.serving_detail)


def _eval_detail(ev: EvalRow) -> str:
    if ev.serving_decision == "fail" and ev.decision != "fail":
        return ev.serving_detail or "served score outside the in-process score's interval: a serving bug"
    if ev.ci95 and ev.target is not None:
        return (f"score {ev.value} (95% CI {fmt_ci(ev.ci95)}, n={ev.samples}) is clearly below target "
                f"{ev.target} (reference {ev.reference_score or ev.published_score}, tolerance {ev.tolerance})")
    if ev.ratio_to_reference is not None:
        return (f"score {ev.value} is {ev.ratio_to_reference:.3f} of reference "
                f"{ev.reference_score} (tolerance {ev.tolerance})")
    if ev.ratio_to_published is not None:
        return (f"score {ev.value} is {ev.ratio_to_published:.3f} of published "
                f"{ev.published_score} (tolerance {ev.tolerance})")
    return f"eval status {ev.status}, score {ev.value}"
