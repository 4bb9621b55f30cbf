"""Acceptance: turn one run's measurements into a PASS/FAIL verdict with named blockers.

Every rule that turns a benchmark or eval number into a decision is listed here, in one place, so
the rules cannot drift apart. ``decide`` takes one input record (``JudgeInput``) and composes one
function per section, each giving its checks, blockers and notes (``SectionJudgement``): the run's
steps and unreadable records (``judge_steps``), the benchmarks (``records.judge_benchmarks``, with the
media points of ``records.judge_media``), the evals (``records.judge_evals``), the tests and stress
records (``judge_sections``) and the comparison with a baseline run (``judge_comparison``); then it
applies the waivers (``apply_waivers``) and settles the tier records. What the sections share (the
error-rate rule, the sample floor) is ``records.judge_checks``. Every name those modules define for
callers is importable from here too.

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
* Failed requests count: every benchmark point's error rate (failed and never-sent requests over
  all its requests) is a check against the spec's ``device_model_spec.max_error_rate`` (default 0),
  decided on its 95% Wilson interval (``error_rate_check``; an allowance of 0 is exact: one failed
  request fails, none passes). A point whose rate clearly exceeds it blocks, whatever the status,
  with a blocker naming the failure classes and counts; and every tier with targets fails at that
  point (``check_tier``), since a target met by the requests that happened to succeed is not met.
* ``check_tier`` is the only place that decides whether a tier passes; the benchmarks workflow
  calls it too for its own console table.
* A manifest step with status ``failed`` blocks (the numbers after a crash are partial), unless
  it is a section whose own records show the failure (client workflows exit 1 when their own
  checks fail): then those records are judged item by item, so waivers and tiers apply.
* Every target a tier sets is a check decided on its 95% interval (``tier_target_checks``: an
  anytime-valid confidence sequence over the point's per-request records, ``target_estimates``): a
  required tier's target blocks only when its whole interval misses it; a target whose interval
  holds it (or a point with fewer than ``MIN_DECIDING_SAMPLES`` requests) is inconclusive.
  ``check_tier`` keeps the point-value view for the benchmarks console table; in the report,
  ``settle_decisions`` then writes every check's final decision into the tier it judges, so no
  renderer shows a point value's pass/fail beside it.
* Media tier targets are decided the same way (``media_tier_checks``) on the figures' intervals from
  the point's per-request rows (``records.media_estimates``); in a smoke run an undecided media
  target is shown, not required.
* The tests and stress records' judged numbers (divergence rate, error rates, drift, capacity
  goodput: ``records.section_checks``) are checks with the decisions their records made; an
  inconclusive record without such a number is still listed as an inconclusive check.
* Numbers decided on their 95% interval (evals, benchmark targets) are listed in ``verdict.checks``: a
  ``fail`` is a blocker; an ``inconclusive`` check is required unless the run's mode is
  ``smoke`` (a smoke run only proves the path works: its samples are too few to decide a
  healthy score, but a broken one still fails). Result: FAIL when an unwaived blocker remains,
  else INCONCLUSIVE when a required check is undecided, else PASS.
* The comparison with a baseline run (``--compare-to``; a release compares with the last run of its
  spec on its host) adds one check per compared metric (category ``comparison``); a metric whose
  whole 95% interval of the ratio lies beyond the tolerance is ``regressed`` and blocks, unless the
  run says ``on_regression=warn`` (then it is a note). Noise never blocks: the interval decides. An
  undecided metric is required when the user asked for the comparison (``--compare-to``: INCONCLUSIVE,
  exit 4), advisory in a release's own comparison with the last run.
* The agreement of two load generators (``--workflow-args agreement=TOOL``) adds one check per metric and
  judged point (category ``agreement``): decided on the 95% interval of the ratio tool / ours against the
  noise band, shown and not required (it judges the tools, not the model); a disagreement is a note.
* The A/B of two live servers (``--baseline-url`` / ``--baseline-vllm-args``) adds one check per metric and
  judged point (category ``ab``, ``records.judge_ab``): the ratio candidate / baseline over paired ABBA blocks,
  decided on its 95% interval against the tolerance; required (the user asked): a regression blocks, an
  undecided comparison leaves the verdict INCONCLUSIVE.
* A customer's requirements document (``--requirements``, ``records.judge_requirements``) adds one check per
  requirement (category ``requirements``), decided on its 95% interval: a ``must`` not met blocks, a ``must``
  undecided is required (INCONCLUSIVE, exit 4, with what more sampling would take), a ``should`` is shown. The
  document is then the run's contract: the catalog's performance tiers and eval references are shown, not required
  (the error-rate rule, failed steps and unreadable records still block).
* ``known_issues`` waivers in the model spec turn a blocker into a waived item carrying the
  waiver's reason. A waiver matches on ``workflow`` == blocker category and ``task`` == the
  item (point key or eval task) or ``"*"``. A crashed step is only waived by naming it
  (``task: "step-failed"``): a blanket ``*`` for known slow points should not hide a crash.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any, Iterable, Sequence

from contracts.intervals import INCONCLUSIVE
from contracts.model_spec import read_known_issues
from records.agreement import AgreementMetric
from records.judge_agreement import agreement_checks
from records.judge_ab import ab_checks
from records.ab import ABSection
from records.judge_benchmarks import (
    BOOTSTRAP_ITERATIONS,
    TARGET_CHECKS,
    TARGET_CI_METHOD,
    BenchmarksJudgement,
    Estimate,
    benchmark_error_checks,
    check_tier,
    error_rate_detail,
    judge_benchmarks,
    judge_targets,
    measured_values,
    settle_decisions,
    target_decision,
    target_estimates,
    tier_decision,
    tier_target_checks,
)
from records.judge_checks import (
    DEFAULT_MAX_ERROR_RATE,
    ERROR_RATE_UNDECIDED,
    MIN_DECIDING_SAMPLES,
    Decided,
    SectionJudgement,
    Settled,
    error_rate_check,
    errors_within,
    fmt_ci,
    max_error_rate,
)
from records.judge_evals import PAIRED_SERVING_METHOD, eval_check, judge_evals, serving_check_of
from records.judge_media import (
    check_metric_tier,
    media_checks,
    media_error_check,
    media_target_decision,
    media_tier_checks,
)
from records.report import (
    TIERS,
    BenchmarkRow,
    Blocker,
    Check,
    Comparison,
    EvalRow,
    MediaRow,
    Section,
    StepSummary,
    TargetRow,
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


def required_tiers(status: Any, perf_tiers: str | None = None) -> list[str]:
    """The performance tiers a verdict requires: the status's, capped at ``perf_tiers``
    (``--workflow-args perf_tiers=``) when it names a tier. The benchmarks size their adaptive
    points to these, and the report requires these: one rule for both."""
    tiers = list(STATUS_TIERS.get(normalise_status(status), ()))
    if perf_tiers not in TIERS:
        return tiers
    return [t for t in tiers if TIERS.index(t) <= TIERS.index(perf_tiers)]


def evals_required(status: Any) -> bool:
    return normalise_status(status) in STATUS_TIERS and normalise_status(status) != "EXPERIMENTAL"


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


def parse_waivers(known_issues: Any, judged_on: str | None = None) -> tuple[list[Waiver], list[str]]:
    """Read ``known_issues`` from the model spec (``contracts.model_spec.read_known_issues``) as they stand on
    ``judged_on`` (the run's ISO date; today when None): an expired waiver waives nothing, and a note says so."""
    try:
        on = date.fromisoformat(judged_on[:10]) if judged_on else None
    except ValueError:  # a manifest without a readable start: judge as of today
        on = None
    issues, notes = read_known_issues(known_issues, on)
    return [Waiver(i.workflow, i.task, i.reason) for i in issues], notes


@dataclass(kw_only=True)
class JudgeInput:
    """Everything one verdict is decided from (``decide``); the report builder fills it from the run.

    ``benchmarks_judged`` / ``evals_judged``: the section's step was part of the run (a section not run
    never blocks). ``known_issues``: the spec's waivers (``parse_waivers``). ``max_error_rate``: the
    spec's allowance of failed requests. ``notes``: the caller's notes, first in the verdict's.
    ``points_chosen`` names why a ``benchmarks`` run measured only the points its user chose
    (``points=``, ``workload=``): perf-reference points it left out are then not blockers, and
    their checks stay visible as ``waived`` with that reason (a release never passes this).
    ``section_checks`` are the judged numbers of the tests and stress records
    (``records.section_checks``), each with the decision its record made; ``mode`` is the run's
    (smoke, ci, full): a smoke run does not require a media target its few requests cannot decide.
    ``perf_tiers`` (``--workflow-args perf_tiers=``) caps the performance tiers required at that one:
    the tiers above it are still measured, decided and shown, as checks that are not required.
    ``judged_on``: the run's date (ISO; the manifest's start), on which the waivers' expiry is judged, so a
    report rebuilt later decides as it did then (today when None). ``agreement``: the metrics of the run's
    agreement records (``--workflow-args agreement=``; ``records.judge_agreement``: shown, not required).
    Any iterable given for a sequence field is read once, into a list."""

    model_status: Any
    steps: Sequence[StepSummary]
    targets: Sequence[TargetRow]
    evals: Sequence[EvalRow]
    tests: Section
    stress_tests: Section
    benchmarks_judged: bool
    evals_judged: bool
    known_issues: Any
    record_problems: Sequence[str] = ()
    benchmarks: Sequence[BenchmarkRow] = ()
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    notes: Sequence[str] = ()
    media: Sequence[MediaRow] = ()
    comparison: Comparison | None = None
    points_chosen: str | None = None
    section_checks: Sequence[Check] = ()
    mode: str | None = None
    perf_tiers: str | None = None
    judged_on: str | None = None
    agreement: Sequence[AgreementMetric] = ()
    ab: ABSection | None = None  # the A/B of two live servers, when asked (records.judge_ab)
    requirements: SectionJudgement | None = None  # a customer's requirements (records.judge_requirements)

    def __post_init__(self) -> None:
        for name in ("steps", "targets", "evals", "record_problems", "benchmarks", "notes", "media",
                     "section_checks", "agreement"):
            setattr(self, name, list(getattr(self, name)))


def decide(judge_input: JudgeInput | None = None, /, **fields: Any) -> Verdict:
    """Judge every section, apply the waivers, and return the verdict: FAIL when an unwaived blocker
    remains, else INCONCLUSIVE when a required check is undecided, else PASS.

    Takes a ``JudgeInput``, or its fields as keywords (``decide(model_status=..., steps=..., ...)``).
    Sections are composed in a fixed order (steps and records, benchmarks, evals, tests and stress
    records, comparison), which is the order of the verdict's checks, blockers and notes."""
    if judge_input is None:
        judge_input = JudgeInput(**fields)
    elif fields:
        raise TypeError("decide() takes a JudgeInput or its fields as keywords, not both")
    inp = judge_input
    status = normalise_status(inp.model_status)
    tiers, perf_note, cap_note = _tiers_required(status, inp.perf_tiers)
    need_evals = evals_required(status)
    if inp.requirements is not None and (tiers or need_evals):  # the customer's document is the contract
        tiers, need_evals = [], False
        cap_note = [*cap_note, "a requirements document judges this run: the catalog's performance tiers and eval "
                    "references are shown, not required"]
    waivers, waiver_notes = parse_waivers(inp.known_issues, inp.judged_on)
    notes = [*inp.notes, *perf_note, *waiver_notes, *cap_note]
    if status not in STATUS_TIERS:
        notes.append(f"unknown model status {inp.model_status!r}: treated as EXPERIMENTAL")
    bench = judge_benchmarks(inp.benchmarks, inp.targets, inp.media, tiers, inp.max_error_rate,
                             inp.points_chosen, smoke=inp.mode == "smoke")
    explained = _explained_sections(inp.targets, inp.evals, inp.tests, inp.stress_tests)
    if bench.explains_failure:
        explained.add("benchmarks")
    sections = [judge_steps(inp.steps, explained, inp.record_problems)]
    if inp.benchmarks_judged:
        sections.append(bench.judgement)
    if inp.evals_judged and need_evals:
        sections.append(judge_evals(inp.evals))
    sections.append(judge_sections(inp.tests, inp.stress_tests, inp.section_checks))
    if inp.comparison is not None:
        sections.append(judge_comparison(inp.comparison))
    if inp.agreement:
        sections.append(agreement_checks(inp.agreement))
    if inp.ab is not None:
        sections.append(ab_checks(inp.ab))
    if inp.requirements is not None:
        sections.append(inp.requirements)
    checks = [check for section in sections for check in section.checks]
    notes.extend(note for section in sections for note in section.notes)
    blockers, waived = apply_waivers([b for section in sections for b in section.blockers], checks, waivers)
    if inp.benchmarks_judged:
        settle_decisions(bench.settled, inp.targets, inp.benchmarks, bench.error_checks)
    undecided = [c for c in checks if c.required and c.decision == "inconclusive"]
    return Verdict(
        result="FAIL" if blockers else "INCONCLUSIVE" if undecided else "PASS",
        checks=checks,
        blockers=blockers,
        waived=waived,
        model_status=status or None,
        required_tiers=list(tiers),
        evals_required=need_evals,
        notes=notes,
    )


def _tiers_required(status: str, perf_tiers: str | None) -> tuple[list[str], list[str], list[str]]:
    """The tiers the verdict requires (the status's, capped at ``perf_tiers``), a note when ``perf_tiers``
    names no tier (it is then ignored), and a note when the cap lowered what the status requires."""
    bad_cap: list[str] = []
    if perf_tiers is not None and perf_tiers not in TIERS:
        bad_cap.append(f"perf_tiers={perf_tiers!r} is not one of {', '.join(TIERS)}: ignored")
        perf_tiers = None
    tiers = required_tiers(status)
    capped = required_tiers(status, perf_tiers)
    cap_note = [f"performance tiers required: {', '.join(capped) or 'none'} (perf_tiers={perf_tiers}; "
                f"the status {status} requires {', '.join(tiers)})"] if capped != tiers else []
    return capped, bad_cap, cap_note


def judge_steps(steps: Iterable[StepSummary], explained: set[str], record_problems: Iterable[str]) -> SectionJudgement:
    """The run's steps and records: a failed step blocks unless it is a section whose own records explain
    the failure (``explained``: then they are judged item by item, and the step is a note); a record
    that could not be read blocks."""
    notes: list[str] = []
    blockers: list[Blocker] = []
    for step in steps:
        if step.name == "reports" or step.status != "failed":
            continue  # a previous reports step "failed" only because its verdict was FAIL
        if step.name in explained:
            notes.append(f"step {step.name!r} exited non-zero; its records show why and are "
                         f"judged item by item")
            continue
        detail = f"step {step.name!r} failed" + (f": {step.detail}" if step.detail else "")
        blockers.append(Blocker(step.name, STEP_FAILED, detail))
    blockers.extend(Blocker("records", "unreadable", problem) for problem in record_problems)
    return SectionJudgement([], blockers, notes)


def judge_sections(tests: Section, stress_tests: Section, section_checks: Iterable[Check]) -> SectionJudgement:
    """The tests and stress records: each section's judged numbers (``section_checks`` of its category),
    a blocker per failed record, and an inconclusive record without a number that says why as a
    required inconclusive check (shown, and the run is not a PASS)."""
    section_checks = list(section_checks)
    checks: list[Check] = []
    blockers: list[Blocker] = []
    for name, section in (("tests", tests), ("stress_tests", stress_tests)):
        numbered = [c for c in section_checks if c.category == name]
        checks.extend(numbered)
        for item in section.items:
            if item.passed is False:
                blockers.append(Blocker(name, item.name, item.detail or f"status {item.status}"))
            elif item.passed is None and (item.status or "").lower() == "inconclusive" and not any(
                    c.item == item.name and c.required and c.decision == INCONCLUSIVE for c in numbered):
                checks.append(Check(name=f"{name} {item.name}", category=name, item=item.name, required=True,
                                    decision="inconclusive", detail=item.detail))
    return SectionJudgement(checks, blockers, [])


def apply_waivers(raw: Iterable[Blocker], checks: Iterable[Check],
                  waivers: list[Waiver]) -> tuple[list[Blocker], list[Waived]]:
    """Split the blockers into those that stand and those a ``known_issues`` waiver covers (shown with the
    waiver's reason); a check that did not pass and that a waiver covers becomes ``waived``."""
    blockers: list[Blocker] = []
    waived: list[Waived] = []
    for blocker in raw:
        waiver = next((w for w in waivers if w.matches(blocker)), None)
        if waiver is None:
            blockers.append(blocker)
        else:
            waived.append(Waived(blocker.category, blocker.item, blocker.detail,
                                 waiver.reason, blocker.tier))
    for check in checks:
        as_blocker = Blocker(check.category, check.item, check.detail or "")
        if check.decision != "pass" and any(w.matches(as_blocker) for w in waivers):
            check.decision = "waived"
    return blockers, waived


def _explained_sections(targets: Sequence[TargetRow], evals: Sequence[EvalRow], tests: Section,
                        stress_tests: Section) -> set[str]:
    """Sections whose failed step is accounted for by their own records.

    Client workflows exit 1 when their own checks fail (an eval below tolerance, a missed
    target), which marks the step failed. When the records show such a failure, the verdict
    judges those records under the acceptance rules (so a waiver or a non-required tier can
    clear them); only a failure the records do not explain (a crash, a point that never ran,
    failed requests) is a blocker by itself.
    """
    out: set[str] = set()
    if any(t.passed is False for r in targets for t in r.tiers):
        out.add("benchmarks")
    if any(e.passed is False or e.status in ("failed", "error") for e in evals):
        out.add("evals")
    for name, section in (("tests", tests), ("stress_tests", stress_tests)):
        if any(i.passed is False for i in section.items):
            out.add(name)
    return out


def judge_comparison(comparison: Comparison) -> SectionJudgement:
    """The regression gate: one check per compared metric, a blocker per regression when the policy
    is ``fail`` (``on_regression=warn``: shown, not failing).

    A metric is ``regressed`` only when its whole 95% interval lies beyond the tolerance
    (``reports.comparison.decide``), so noise never fails a release. An undecided metric (its interval holds
    both no change and one beyond the tolerance, or its runs could not show either) is required when the user
    asked for the comparison (``Comparison.gate``: the verdict is then INCONCLUSIVE, exit 4, never PASS), and
    shown only in a release's own comparison with the last run (advisory: a note says so).
    """
    checks: list[Check] = []
    blockers: list[Blocker] = []
    notes: list[str] = []
    tol = comparison.tolerance
    gate = comparison.on_regression == "fail"
    advisory = 0
    for metric in comparison.metrics:
        target = 1 - tol if metric.higher_is_better else 1 + tol
        decision = {"regressed": "fail", "inconclusive": "inconclusive"}.get(metric.decision, "pass")
        detail = (f"{metric.decision}: ratio {metric.ratio} (95% CI {fmt_ci(metric.ci95)}) against baseline "
                  f"{comparison.baseline_run}; tolerance {tol:.0%}")
        if metric.run_noise_pct is not None:
            detail += f"; run-level noise {metric.run_noise_pct:g}% ({metric.noise_source})"
        required = decision == "fail" and gate
        if decision == "inconclusive":
            detail += "; not decided" + (f": about {metric.runs_to_decide} runs of each build would decide it"
                                         if metric.runs_to_decide else " (the comparison's notes say why)")
            required = comparison.gate
            advisory += not required
            detail += "" if required else "; the release's own comparison with the last run: advisory, not required"
        elif decision == "fail" and not gate:
            detail += "; on_regression=warn: shown, not failing"
        checks.append(Check(name=f"regression {metric.name}", category="comparison", item=metric.name,
                            required=required, value=metric.ratio, ci95=metric.ci95,
                            ci_method=metric.ci_method or "bootstrap over the requests of both runs", n=metric.n,
                            target=target, decision=decision, detail=detail))
        if decision == "fail":
            (blockers.append(Blocker("comparison", metric.name, detail)) if gate
             else notes.append(f"regression (warn only): {metric.name} {detail}"))
    if advisory:
        notes.append(f"comparison with {comparison.baseline_run} is advisory for {advisory} undecided metric(s): "
                     f"this release's own comparison with the last run (--compare-to makes it a gate)")
    if not comparison.same_host:
        notes.append(f"compared with {comparison.baseline_run} from a different host: "
                     + "; ".join(comparison.host_differences))
    return SectionJudgement(checks, blockers, notes)


__all__ = [
    # the verdict and its sections
    "JudgeInput", "decide", "SectionJudgement", "judge_steps", "judge_benchmarks", "BenchmarksJudgement",
    "judge_targets", "judge_evals", "judge_sections", "judge_comparison", "apply_waivers",
    # statuses, tiers and waivers
    "TIERS", "STATUS_TIERS", "SECTION_STEPS", "STEP_FAILED", "normalise_status", "required_tiers", "evals_required",
    "parse_waivers", "Waiver",
    # LLM benchmark points (records.judge_benchmarks)
    "TARGET_CHECKS", "TARGET_CI_METHOD", "BOOTSTRAP_ITERATIONS", "Estimate", "measured_values", "target_estimates",
    "target_decision", "check_tier", "tier_target_checks", "tier_decision", "settle_decisions",
    "benchmark_error_checks", "error_rate_detail",
    # media points (records.judge_media)
    "check_metric_tier", "media_target_decision", "media_tier_checks", "media_checks", "media_error_check",
    # evals (records.judge_evals)
    "eval_check", "serving_check_of", "PAIRED_SERVING_METHOD",
    # shared (records.judge_checks)
    "MIN_DECIDING_SAMPLES", "DEFAULT_MAX_ERROR_RATE", "ERROR_RATE_UNDECIDED", "Decided", "Settled", "max_error_rate",
    "errors_within", "error_rate_check", "fmt_ci",
]
