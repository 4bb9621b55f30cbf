"""Speculative decoding over one benchmark point: drafts, acceptance and acceptance per position, each with its
95% interval, from the server's spec-decode counters read before and after the point (stdlib only).

Why from counters: the server alone knows which drafted tokens its verification accepted. vLLM counts, summed
over its engines (``vllm:spec_decode_num_drafts_total``, ``..._num_draft_tokens_total``,
``..._num_accepted_tokens_total`` and ``..._num_accepted_tokens_per_pos_total{position="k"}``); a Tenstorrent
worker spells them ``tt_spec_decode_*``. The point's reading is the one the server-counter reconciliation takes
(``benchmarking.reconcile``): the same before/after snapshots, or, for an external or multi-worker server, the
snapshots of ``spec_decode_metrics_url`` summed over its workers.

Figures (vLLM's conventions, so a number here means what it means in vLLM's own log):

* acceptance rate = accepted tokens / draft tokens;
* mean accepted length = 1 + accepted tokens / drafts (the verification's own token is counted: tokens a
  decode step yields per draft);
* acceptance at position k = drafts whose first k+1 tokens were accepted / drafts (vLLM accepts a prefix of
  the draft: a token counts at its position only when every token before it was accepted).

Intervals (``METHOD``): the unit is the draft. Position k is one yes/no per draft: a Wilson score interval of
accepted_k of drafts. The acceptance rate is the mean of each draft's accepted share, a number in [0, 1] whose
variance is at most p(1 - p): the Wilson interval of that share with the drafts as trials is therefore
conservative for the correlated tokens of one draft (a Wilson interval over tokens would be too narrow by up to
the draft length). The mean accepted length is 1 + (draft tokens / drafts) x that share, its interval the same
transform. Drafts are taken as independent; drafts of one request resemble each other, so with few requests
the intervals are too narrow (the report says so beside the figures). tests/records/test_spec_decode.py
checks the coverage by simulation.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from contracts.intervals import wilson
from contracts.typed_record import TypedRecord, described

#: Metric name prefixes of the spec-decode counters: vLLM's and a Tenstorrent worker's.
PREFIXES = ("vllm:spec_decode_", "tt_spec_decode_")
#: Counter (after the prefix) -> figure.
COUNTERS = {"num_drafts_total": "drafts", "num_draft_tokens_total": "draft_tokens",
            "num_accepted_tokens_total": "accepted_tokens"}
PER_POSITION = "num_accepted_tokens_per_pos_total"
METHOD = ("Wilson score intervals with the draft as the unit: per position accepted_k of drafts; the acceptance "
          "rate as each draft's accepted share (variance at most p(1-p), so conservative for a draft's correlated "
          "tokens); mean accepted length = 1 + draft length x that share. Drafts taken as independent: with few "
          "requests the intervals are too narrow")
_POSITION = re.compile(r'position="(\d+)"')


@dataclass
class PositionAcceptance(TypedRecord):
    """How often a draft's token at one position was accepted."""

    position: int = described("Draft position, 0 = the first drafted token.")
    accepted: int = described("Drafts whose tokens up to and including this position were accepted.")
    rate: float | None = described("accepted / drafts (vLLM's per-position acceptance).", None)
    ci95: list[float] | None = described("95% Wilson interval of the rate, drafts as trials.", None)


@dataclass
class SpecDecode(TypedRecord):
    """One point's speculative decoding, from the server's counters before and after the point."""

    source: str = described("Whose counters: this run's server /metrics, or the spec_decode_metrics_url "
                            "endpoints (summed over the workers).")
    status: str = described("measured (drafts counted) | no_drafts (the counters exist and did not move: nothing "
                            "was drafted over the point) | reset (a counter went backwards: a restart; no "
                            "figures) | no_counters (the spec_decode_metrics_url endpoints named answered none).")
    drafts: int = described("Drafts verified over the point (each decode step of a request that carried a "
                            "draft).", 0)
    draft_tokens: int = described("Tokens drafted over the point.", 0)
    accepted_tokens: int = described("Drafted tokens the verification accepted.", 0)
    acceptance_rate: float | None = described("accepted_tokens / draft_tokens.", None)
    acceptance_rate_ci95: list[float] | None = described("95% interval of the acceptance rate (METHOD).", None)
    mean_accepted_length: float | None = described("1 + accepted_tokens / drafts: tokens a decode step yields per "
                                                   "draft, the verification's own token counted (vLLM's "
                                                   "convention).", None, unit="tokens")
    mean_accepted_length_ci95: list[float] | None = described("95% interval of the mean accepted length.", None)
    per_position: list[PositionAcceptance] = described("Acceptance per draft position, each with its interval.",
                                                       factory=list, record_list=PositionAcceptance)
    method: str = described("How the intervals are made.", METHOD)
    detail: str = described("The reading in words.", "")


def counter_deltas(before: dict[str, float], after: dict[str, float]) -> tuple[dict[str, float], dict[int, float]]:
    """(figure -> delta, position -> accepted delta) of the spec-decode counters, summed over label sets (engines,
    workers) and both spellings; empty when the server exposes none."""
    totals: dict[str, float] = {}
    positions: dict[int, float] = {}
    for sample, value in after.items():
        family = sample.split("{", 1)[0]
        prefix = next((p for p in PREFIXES if family.startswith(p)), None)
        if prefix is None:
            continue
        name, change = family[len(prefix):], value - before.get(sample, 0.0)
        if name in COUNTERS:
            totals[COUNTERS[name]] = totals.get(COUNTERS[name], 0.0) + change
        elif name == PER_POSITION:
            found = _POSITION.search(sample)
            if found:
                k = int(found.group(1))
                positions[k] = positions.get(k, 0.0) + change
    return totals, positions


def has_counters(snapshot: dict[str, float] | None) -> bool:
    """Whether a /metrics snapshot carries spec-decode counters (the server speculates)."""
    return snapshot is not None and any(k.split("{", 1)[0].startswith(PREFIXES) for k in snapshot)


def from_snapshots(before: dict[str, float] | None, after: dict[str, float] | None,
                   source: str) -> SpecDecode | None:
    """The point's record from two snapshots; None when neither carries spec-decode counters (no speculation:
    the point record then says nothing about it)."""
    if not has_counters(after) or before is None or after is None:
        return None
    totals, positions = counter_deltas(before, after)
    if any(v < 0 for v in [*totals.values(), *positions.values()]):
        return SpecDecode(source=source, status="reset",
                          detail="a spec-decode counter went backwards over the point (the server restarted?): "
                                 "no figures")
    return figures(source, int(round(totals.get("drafts", 0))), int(round(totals.get("draft_tokens", 0))),
                   int(round(totals.get("accepted_tokens", 0))),
                   {k: int(round(v)) for k, v in sorted(positions.items())})


def figures(source: str, drafts: int, draft_tokens: int, accepted: int, positions: dict[int, int]) -> SpecDecode:
    """Rates and intervals (module docstring) from the counts."""
    if drafts <= 0 or draft_tokens <= 0:
        return SpecDecode(source=source, status="no_drafts", detail="the server drafted nothing over the point "
                          "(no n-gram match, or speculation off for these requests)")
    share = accepted / draft_tokens
    rate_ci = wilson(share * drafts, drafts)
    per_draft = draft_tokens / drafts
    per_pos = [PositionAcceptance(position=k, accepted=n, rate=round(n / drafts, 6),
                                  ci95=wilson(n, drafts).as_list()) for k, n in sorted(positions.items())]
    out = SpecDecode(source=source, status="measured", drafts=drafts, draft_tokens=draft_tokens,
                     accepted_tokens=accepted, acceptance_rate=round(share, 6), acceptance_rate_ci95=rate_ci.as_list(),
                     mean_accepted_length=round(1 + accepted / drafts, 6),
                     mean_accepted_length_ci95=[round(1 + per_draft * rate_ci.low, 6),
                                                round(1 + per_draft * rate_ci.high, 6)],
                     per_position=per_pos)
    out.detail = (f"{accepted} of {draft_tokens} drafted tokens accepted over {drafts} drafts: acceptance "
                  f"{share:.1%} [{rate_ci.low:.1%}, {rate_ci.high:.1%}], mean accepted length "
                  f"{out.mean_accepted_length:.2f}; per position " +
                  ", ".join(f"{p.position}: {p.rate:.0%}" for p in per_pos))
    return out


def sum_snapshots(snapshots: list[dict[str, float] | None]) -> dict[str, float] | None:
    """One snapshot of several workers' /metrics: the same sample summed (each worker counts its own drafts);
    None when no worker answered. Why sum before the delta: the delta of the sum is the sum of the deltas."""
    found = [s for s in snapshots if s is not None]
    if not found:
        return None
    out: dict[str, float] = {}
    for snap in found:
        for k, v in snap.items():
            out[k] = out.get(k, 0.0) + v
    return out


def summary_line(rec: SpecDecode | dict[str, Any] | None) -> str | None:
    """The point's log line; None when it carries no speculation."""
    if rec is None:
        return None
    if isinstance(rec, dict):
        rec = SpecDecode.from_dict(rec)
    return f"speculative decoding ({rec.source}): {rec.detail}"


@dataclass
class SpecDecodePoint(TypedRecord):
    """One benchmark point's speculative decoding, as the report lists it."""

    point: str = described("Point key (isl-128_osl-32_con-4).")
    dataset: str = described("The prompts the point sent (random: free generation; lookup: quoting, code edits, "
                             "repeating structure; a workload's name).")
    spec_decode: SpecDecode = described("The point's reading.", record=SpecDecode)


@dataclass
class Speedup(TypedRecord):
    """Whether speculation made one metric of one point faster, from the A/B of the speculating server
    (candidate) against the same spec without speculation (baseline)."""

    point: str = described("Point key.")
    dataset: str = described("The prompts of the point (the run's dataset).")
    metric: str = described("mean_tpot_ms or output_tok_s.")
    without: float | None = described("Baseline (no speculation) block mean.", None)
    with_speculation: float | None = described("Candidate (speculating) block mean.", None)
    ratio: float | None = described("with / without (geometric mean over the ABBA pairs).", None)
    ci95: list[float] | None = described("95% interval of the ratio (the A/B's).", None)
    tolerance: float = described("The band [1 - tolerance, 1 + tolerance] called the same speed.", 0.05)
    decision: str = described("faster | slower | same | inconclusive (SPEEDUP_RULE).", "inconclusive")


SPEEDUP_RULE = ("faster: the A/B decided improved (the ratio's whole 95% interval beyond the tolerance, the better "
                "way); slower: regressed; same: the whole interval within [1 - tolerance, 1 + tolerance]; "
                "inconclusive: anything else (more ABBA cycles: ab_cycles)")
SPEEDUP_METRICS = ("mean_tpot_ms", "output_tok_s")


def speedup_decision(ab_decision: str, ci95: list[float] | None, tolerance: float) -> str:
    """SPEEDUP_RULE on one A/B metric (``records.ab.ABMetric``: its decision and interval)."""
    if ab_decision == "improved":
        return "faster"
    if ab_decision == "regressed":
        return "slower"
    if ci95 is not None and 1 - tolerance <= ci95[0] and ci95[1] <= 1 + tolerance:
        return "same"
    return "inconclusive"


@dataclass
class SpecDecodeSection(TypedRecord):
    """The report's "Speculative decoding" section."""

    points: list[SpecDecodePoint] = described("Every point whose server speculated, point order.", factory=list,
                                              record_list=SpecDecodePoint)
    speedup: list[Speedup] = described("Per A/B point and metric: faster / slower / same / inconclusive with "
                                       "speculation (empty without --baseline-url / --baseline-vllm-args).",
                                       factory=list, record_list=Speedup)
    method: str = described("How the acceptance intervals are made.", METHOD)
    rule: str = described("How the speedup is decided.", SPEEDUP_RULE)
    notes: list[str] = described("What the reader must know (a reset counter, no drafts, an A/B missing).",
                                 factory=list)


__all__ = ["COUNTERS", "METHOD", "PER_POSITION", "PREFIXES", "PositionAcceptance", "SPEEDUP_METRICS",
           "SPEEDUP_RULE", "SpecDecode", "SpecDecodePoint", "SpecDecodeSection", "Speedup", "counter_deltas",
           "figures", "from_snapshots", "has_counters", "speedup_decision", "sum_snapshots", "summary_line"]
