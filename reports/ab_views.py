"""The "A/B" section (``--baseline-url`` / ``--baseline-vllm-args``) as every renderer shows it, and its reading.

One row per judged point and metric: the baseline's and the candidate's block means, the ratio candidate /
baseline with its 95% interval, the decision against the tolerance, the blocks used and, for an undecided
metric, how many more blocks would likely decide it (``records.ab``). A regression is shown in capitals, as
in the comparison table, so it is not missed. The HTML adds a plot of each point's paired blocks.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from contracts.typed_record import RecordError
from records.ab import INCONCLUSIVE, METHOD, REGRESSED, ABMetric, ABRecord, ABSection
from records.ab_evals import METHOD_BINARY, EvalAB
from reports.views import Column

AB_COLUMNS: list[Column] = [
    ("Point", lambda m: m.point),
    ("Metric", lambda m: m.metric),
    ("Baseline", lambda m: "n/a" if m.baseline is None else f"{m.baseline:.4g}"),
    ("Candidate", lambda m: "n/a" if m.candidate is None else f"{m.candidate:.4g}"),
    ("Ratio cand/base [95% CI]", lambda m: "n/a" if m.ratio is None else (
        f"{m.ratio:.3f}" + (f" [{m.ci95[0]:.3f}, {m.ci95[1]:.3f}]" if m.ci95 else " (no interval)"))),
    ("Tolerance", lambda m: f"±{m.tolerance:.0%}"),
    ("Decision", lambda m: m.decision.upper() if m.decision == REGRESSED else m.decision),
    ("Blocks (evals: items)", lambda m: str(2 * m.pairs)),
    ("More blocks (items) to decide", lambda m: "" if m.decision != INCONCLUSIVE else (
        "n/a" if m.blocks_to_decide is None else f"~{m.blocks_to_decide}")),
]


def metrics_of(section: ABSection) -> list[ABMetric]:
    return [m for record in section.records for m in record.metrics]


def eval_row(ev: EvalAB) -> list[str]:
    """An eval task's paired items in the table's columns (Blocks: the items scored on both servers)."""
    score = lambda v: "n/a" if v is None else f"{v:.4g}"  # noqa: E731
    return [ev.task, f"accuracy {ev.metric}", score(ev.baseline_score), score(ev.candidate_score),
            "n/a" if ev.ratio is None else f"{ev.ratio:.3f}" + (
                f" [{ev.ci95[0]:.3f}, {ev.ci95[1]:.3f}]" if ev.ci95 else " (no interval)"),
            f"±{ev.tolerance:.0%}", ev.decision.upper() if ev.decision == REGRESSED else ev.decision,
            f"{ev.items} items ({ev.gains} won, {ev.losses} lost)",
            ev.note or (f"~{ev.items_to_decide} items" if ev.items_to_decide else "")]


def ab_rows(section: ABSection) -> list[list[str]]:
    return [[fn(m) for _, fn in AB_COLUMNS] for m in metrics_of(section)] + [eval_row(e) for e in section.evals]


def header_line(section: ABSection) -> str:
    """'This run's server against --baseline-url URL at 2 point(s): 3 regressed, 3 within_noise. <method>.'"""
    decisions = [m.decision for m in metrics_of(section)] + [e.decision for e in section.evals]
    counts = {d: decisions.count(d) for d in ("regressed", "improved", "within_noise", "inconclusive")}
    parts = ", ".join(f"{n} {d}" for d, n in counts.items() if n) or "nothing measured"
    evals = f" and {len(section.evals)} eval task(s)" if section.evals else ""
    return (f"This run's server (candidate) against {section.baseline} (baseline) at {len(section.records)} "
            f"point(s){evals}: {parts}. Required: a regression fails the verdict, an undecided metric leaves it "
            f"INCONCLUSIVE. Interval: {METHOD}" + (f"; evals: {METHOD_BINARY}" if section.evals else "") + ".")


def notes(section: ABSection) -> list[str]:
    """What the reader must know: why nothing was measured, a failed block, a budget that ended early."""
    return list(section.missing) + [f"{r.point}: {n}" for r in section.records for n in r.notes]


def read_ab_section(run_dir: Path, cli_args: dict[str, Any], judged: bool, problems: list[str],
                    evals_judged: bool = False) -> ABSection | None:
    """The A/B when the run asked for one: every ``benchmarks/*.ab.json`` and ``evals/*/ab.json``; None when not
    asked. Asked but neither step was judged, or the evals were and compared no task: the section says why (its
    checks are then undecided: ``records.judge_ab``)."""
    if cli_args.get("baseline_url"):
        asked = f"--baseline-url {cli_args['baseline_url']}"
    elif cli_args.get("baseline_vllm_args"):
        asked = f"--baseline-vllm-args {cli_args['baseline_vllm_args']}"
    else:
        return None
    section = ABSection(baseline=asked)
    for path in sorted((run_dir / "benchmarks").glob("point_*.ab.json")):
        try:
            section.records.append(ABRecord.read(path))
        except (RecordError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            problems.append(f"{path.relative_to(run_dir).as_posix()}: {exc}")
    for path in sorted((run_dir / "evals").glob("*/ab.json")):
        try:
            section.evals.append(EvalAB.read(path))
        except (RecordError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            problems.append(f"{path.relative_to(run_dir).as_posix()}: {exc}")
    if section.records:
        section.baseline = section.records[0].baseline
    elif not judged and not section.evals:
        section.missing.append("neither the benchmarks nor the evals step was judged (not run or no records)")
    if evals_judged and not section.evals:
        section.missing.append("the evals step compared no task on the baseline")
    return section
