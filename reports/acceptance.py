"""Acceptance: turn one run's measurements into a PASS/FAIL verdict with named blockers.

Rules (documented in the report legend too):

* The model's status decides which target tiers are enforced: EXPERIMENTAL none, FUNCTIONAL
  ``functional``, COMPLETE ``functional`` + ``complete``, TOP_PERF all three. Unknown statuses
  are treated as EXPERIMENTAL and say so in the verdict notes.
* Evals are enforced for every status but EXPERIMENTAL.
* A section is only judged when its workflow step was part of this run. A ``benchmarks``
  workflow does not fail because evals did not run, and vice versa; a step the manifest marks
  ``skipped`` is listed under ``sections_not_run`` and never blocks.
* Within a judged section: a perf-reference point that did not run, or a target check that
  fails, blocks when its tier is required; an eval with ``passed: false`` or status
  ``failed``/``error`` blocks; no eval records at all blocks; a failed test/stress record blocks.
* A manifest step with status ``failed`` blocks (the numbers after a crash are partial), unless
  it is a section whose own records show the failure (client workflows exit 1 when their own
  checks fail): then those records are judged item by item, so waivers and tiers apply.
* ``known_issues`` waivers in the model spec turn a blocker into a waived item carrying the
  waiver's reason. A waiver matches on ``workflow`` == blocker category and ``task`` == the
  item (point key or eval task) or ``"*"``. A crashed step is only waived by naming it
  (``task: "step-failed"``): a blanket ``*`` for known slow points should not hide a crash.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from reports.schema import (
    TIERS,
    Blocker,
    EvalRow,
    Section,
    StepSummary,
    TargetRow,
    TierCheck,
    Verdict,
    Waived,
)

STATUS_TIERS: dict[str, tuple[str, ...]] = {
    "EXPERIMENTAL": (),
    "FUNCTIONAL": ("functional",),
    "COMPLETE": ("functional", "complete"),
    "TOP_PERF": ("functional", "complete", "target"),
}

#: Step names that are sections of the report rather than infrastructure.
SECTION_STEPS = ("benchmarks", "evals", "tests", "stress_tests")
STEP_FAILED = "step-failed"


def normalise_status(status: Any) -> str:
    text = str(status or "").strip().upper()
    # Accept "ModelStatus.COMPLETE" or "complete" as written by other serialisers.
    return text.rsplit(".", 1)[-1]


def required_tiers(status: Any) -> list[str]:
    return list(STATUS_TIERS.get(normalise_status(status), ()))


def evals_required(status: Any) -> bool:
    return normalise_status(status) in STATUS_TIERS and normalise_status(status) != "EXPERIMENTAL"


def _ratio(measured: float | None, target: float | None) -> float | None:
    if measured is None or target is None or target == 0:
        return None
    return measured / target


def check_tier(
    tier: str,
    required: bool,
    targets: dict[str, Any] | None,
    ran: bool,
    ttft_ms: float | None,
    tput_user: float | None,
    tput: float | None,
) -> TierCheck:
    """Compare measured values with one tier's targets.

    A target that is set but has no measurement (e.g. every request failed) fails: there is
    nothing showing the target was met."""
    targets = targets or {}
    check = TierCheck(
        tier=tier,
        required=required,
        ttft_ms=_num(targets.get("ttft_ms")),
        tput_user=_num(targets.get("tput_user")),
        tput=_num(targets.get("tput")),
    )
    if not ran:
        return check
    check.ttft_ratio = _ratio(ttft_ms, check.ttft_ms)
    check.tput_user_ratio = _ratio(tput_user, check.tput_user)
    check.tput_ratio = _ratio(tput, check.tput)
    if check.ttft_ms is not None:
        check.ttft_pass = ttft_ms is not None and ttft_ms <= check.ttft_ms
    if check.tput_user is not None:
        check.tput_user_pass = tput_user is not None and tput_user >= check.tput_user
    if check.tput is not None:
        check.tput_pass = tput is not None and tput >= check.tput
    defined = [p for p in (check.ttft_pass, check.tput_user_pass, check.tput_pass) if p is not None]
    check.passed = all(defined) if defined else None
    return check


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


@dataclass
class Waiver:
    workflow: str
    task: str
    reason: str

    def matches(self, blocker: Blocker) -> bool:
        if self.workflow != blocker.category:
            return False
        if self.task == blocker.item:
            return True
        return self.task == "*" and blocker.item != STEP_FAILED


def parse_waivers(known_issues: Any) -> tuple[list[Waiver], list[str]]:
    """Read ``known_issues`` from the model spec; entries without a reason are rejected
    (returned as notes) because an unexplained waiver is exactly what the review should catch."""
    waivers: list[Waiver] = []
    notes: list[str] = []
    for entry in known_issues or []:
        if not isinstance(entry, dict):
            notes.append(f"ignored malformed known_issues entry: {entry!r}")
            continue
        workflow = str(entry.get("workflow") or entry.get("workflow_type") or "").strip()
        task = str(entry.get("task") or entry.get("task_name") or "").strip()
        reason = str(entry.get("reason") or "").strip()
        if not workflow or not task:
            notes.append(f"ignored known_issues entry without workflow/task: {entry!r}")
        elif not reason:
            notes.append(f"ignored known_issues waiver {workflow}/{task}: it gives no reason")
        else:
            waivers.append(Waiver(workflow.lower(), task, reason))
    return waivers, notes


def _tier_failure_detail(row: TargetRow, check: TierCheck) -> str:
    parts = []
    if check.ttft_pass is False:
        parts.append(f"TTFT {_fmt(row.measured_ttft_ms)} ms > target {_fmt(check.ttft_ms)} ms")
    if check.tput_user_pass is False:
        parts.append(
            f"t/s/u {_fmt(row.measured_tput_user)} < target {_fmt(check.tput_user)}"
        )
    if check.tput_pass is False:
        parts.append(f"decode tput {_fmt(row.measured_tput)} < target {_fmt(check.tput)}")
    return f"{check.tier} tier: " + "; ".join(parts)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def decide(
    *,
    model_status: Any,
    steps: Iterable[StepSummary],
    targets: list[TargetRow],
    evals: list[EvalRow],
    tests: Section,
    stress_tests: Section,
    benchmarks_judged: bool,
    evals_judged: bool,
    known_issues: Any,
    record_problems: Iterable[str] = (),
) -> Verdict:
    """Collect blockers, apply waivers, and return the verdict."""
    status = normalise_status(model_status)
    tiers = required_tiers(status)
    need_evals = evals_required(status)
    waivers, notes = parse_waivers(known_issues)
    if status not in STATUS_TIERS:
        notes.append(f"unknown model status {model_status!r}: treated as EXPERIMENTAL")
    raw: list[Blocker] = []

    explained = _explained_sections(targets, evals, tests, stress_tests)
    for step in steps:
        if step.name == "reports" or step.status != "failed":
            continue  # a previous reports step "failed" only because its verdict was FAIL
        if step.name in explained:
            notes.append(f"step {step.name!r} exited non-zero; its records show why and are "
                         f"judged item by item")
            continue
        detail = f"step {step.name!r} failed" + (f": {step.detail}" if step.detail else "")
        raw.append(Blocker(step.name, STEP_FAILED, detail))

    for problem in record_problems:
        raw.append(Blocker("records", "unreadable", problem))

    if benchmarks_judged:
        for row in targets:
            for check in row.tiers:
                if check.tier not in tiers:
                    continue
                if not row.ran:
                    raw.append(Blocker("benchmarks", row.key,
                                       "perf-reference point was not run", check.tier))
                elif check.passed is False:
                    raw.append(Blocker("benchmarks", row.key,
                                       _tier_failure_detail(row, check), check.tier))

    if evals_judged and need_evals:
        if not evals:
            raw.append(Blocker("evals", "no-records", "evals ran but wrote no eval records"))
        for ev in evals:
            if ev.status == "error":
                raw.append(Blocker("evals", ev.task, f"eval errored: {ev.error or 'no detail'}"))
            elif ev.passed is False or ev.status == "failed":
                raw.append(Blocker("evals", ev.task, _eval_detail(ev)))

    for name, section in (("tests", tests), ("stress_tests", stress_tests)):
        for item in section.items:
            if item.passed is False:
                raw.append(Blocker(name, item.name, item.detail or f"status {item.status}"))

    blockers: list[Blocker] = []
    waived: list[Waived] = []
    for blocker in raw:
        waiver = next((w for w in waivers if w.matches(blocker)), None)
        if waiver is None:
            blockers.append(blocker)
        else:
            waived.append(Waived(blocker.category, blocker.item, blocker.detail,
                                 waiver.reason, blocker.tier))
    return Verdict(
        result="FAIL" if blockers else "PASS",
        blockers=blockers,
        waived=waived,
        model_status=status or None,
        required_tiers=list(tiers),
        evals_required=need_evals,
        notes=notes,
    )


def _explained_sections(targets: list[TargetRow], evals: list[EvalRow], tests: Section,
                        stress_tests: Section) -> set[str]:
    """Sections whose failed step is accounted for by their own records.

    Client workflows exit 1 when their own checks fail (an eval below tolerance, a missed
    target), which marks the step failed. When the records show such a failure, the verdict
    judges those records under the acceptance rules (so a waiver or a non-required tier can
    clear them); only a failure the records do not explain (a crash, a point that never ran,
    failed requests) is a blocker by itself.
    """
    out = set()
    if any(t.passed is False for r in targets for t in r.tiers):
        out.add("benchmarks")
    if any(e.passed is False or e.status in ("failed", "error") for e in evals):
        out.add("evals")
    for name, section in (("tests", tests), ("stress_tests", stress_tests)):
        if any(i.passed is False for i in section.items):
            out.add(name)
    return out


def _eval_detail(ev: EvalRow) -> str:
    if ev.ratio_to_reference is not None:
        return (f"score {ev.value} is {ev.ratio_to_reference:.3f} of reference "
                f"{ev.reference_score} (tolerance {ev.tolerance})")
    if ev.ratio_to_published is not None:
        return (f"score {ev.value} is {ev.ratio_to_published:.3f} of published "
                f"{ev.published_score} (tolerance {ev.tolerance})")
    return f"eval status {ev.status}, score {ev.value}"


__all__ = ["TIERS", "STATUS_TIERS", "check_tier", "decide", "required_tiers", "evals_required",
           "parse_waivers", "Waiver"]
