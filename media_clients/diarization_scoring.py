"""Diarization error rate (DER) and its parts, computed on a 10 ms frame grid (stdlib only).

Why our own and not a library: the clients' venvs stay small and the definition is short. It is
the NIST one that pyannote.metrics also implements: over every frame, with ``R`` reference and
``H`` hypothesis speakers active and ``C`` of the hypothesis speakers correct under the best
one-to-one mapping of hypothesis labels onto reference labels,

    missed      = max(0, R - H)
    false alarm = max(0, H - R)
    confusion   = min(R, H) - C
    DER         = (missed + false alarm + confusion) / sum(R)

Overlapped speech counts once per speaker (two reference speakers in a frame are two seconds of
speech per second). The mapping maximises the total time a hypothesis label and its reference
label are both active. ``collar`` seconds on each side of every reference turn boundary are not
scored (NIST's 0.25 s forgives the ±one-word imprecision of where a turn starts); 0 scores all.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterable, Sequence

FRAME_SECONDS = 0.01
#: Beyond this many assignments the mapping is found greedily (never reached by 2-3 speaker sets).
_MAX_EXACT_ASSIGNMENTS = 200_000


@dataclass(frozen=True)
class Span:
    """A speaker's active time: [start, end) in seconds."""

    speaker: str
    start: float
    end: float


@dataclass(frozen=True)
class DiarizationScore:
    """DER parts in seconds of speaker time, and the rates over the scored reference speech."""

    reference_seconds: float
    missed_seconds: float
    false_alarm_seconds: float
    confusion_seconds: float
    mapping: dict[str, str]

    @property
    def errors_seconds(self) -> float:
        return self.missed_seconds + self.false_alarm_seconds + self.confusion_seconds

    @property
    def der(self) -> float:
        return self.errors_seconds / self.reference_seconds if self.reference_seconds else 0.0

    def as_dict(self) -> dict:
        return {"der": round(self.der, 6), "reference_seconds": round(self.reference_seconds, 3),
                "missed_seconds": round(self.missed_seconds, 3),
                "false_alarm_seconds": round(self.false_alarm_seconds, 3),
                "confusion_seconds": round(self.confusion_seconds, 3), "mapping": dict(self.mapping)}


def _frame(seconds: float) -> int:
    return int(round(seconds / FRAME_SECONDS))


def _activity(spans: Iterable[Span]) -> dict[str, set[int]]:
    active: dict[str, set[int]] = {}
    for span in spans:
        if span.end > span.start:
            active.setdefault(span.speaker, set()).update(range(_frame(span.start), _frame(span.end)))
    return active


def _scored_frames(reference: Sequence[Span], hypothesis: Sequence[Span], collar: float) -> set[int]:
    """Every frame any span touches, less `collar` seconds around each reference boundary."""
    last = max([_frame(s.end) for s in (*reference, *hypothesis)] or [0])
    frames = set(range(last + 1))
    if collar > 0:
        width = _frame(collar)
        for span in reference:
            for edge in (_frame(span.start), _frame(span.end)):
                frames.difference_update(range(edge - width, edge + width))
    return frames


def best_mapping(reference: dict[str, set[int]], hypothesis: dict[str, set[int]]) -> dict[str, str]:
    """Hypothesis label -> reference label, one-to-one, maximising the frames both are active."""
    ref_labels, hyp_labels = sorted(reference), sorted(hypothesis)
    overlap = {(h, r): len(hypothesis[h] & reference[r]) for h in hyp_labels for r in ref_labels}
    size = min(len(ref_labels), len(hyp_labels))
    assignments = 1
    for k in range(size):
        assignments *= max(len(ref_labels), len(hyp_labels)) - k
    if assignments <= _MAX_EXACT_ASSIGNMENTS:
        best: tuple[int, dict[str, str]] = (-1, {})
        if len(hyp_labels) <= len(ref_labels):
            for refs in itertools.permutations(ref_labels, size):
                pairs = dict(zip(hyp_labels, refs))
                total = sum(overlap[h, r] for h, r in pairs.items())
                if total > best[0]:
                    best = (total, pairs)
        else:
            for hyps in itertools.permutations(hyp_labels, size):
                pairs = dict(zip(hyps, ref_labels))
                total = sum(overlap[h, r] for h, r in pairs.items())
                if total > best[0]:
                    best = (total, pairs)
        return best[1]
    mapping: dict[str, str] = {}
    for (h, r), _ in sorted(overlap.items(), key=lambda item: -item[1]):
        if h not in mapping and r not in mapping.values():
            mapping[h] = r
    return mapping


def score(reference: Sequence[Span], hypothesis: Sequence[Span], collar: float = 0.25) -> DiarizationScore:
    """The DER parts of `hypothesis` against `reference` (labels need not match: they are mapped)."""
    ref, hyp = _activity(reference), _activity(hypothesis)
    mapping = best_mapping(ref, hyp)
    frames = _scored_frames(reference, hypothesis, collar)
    total = missed = false_alarm = confusion = 0
    for frame in frames:
        ref_active = {label for label, active in ref.items() if frame in active}
        hyp_active = {label for label, active in hyp.items() if frame in active}
        if not ref_active and not hyp_active:
            continue
        correct = sum(1 for label in hyp_active if mapping.get(label) in ref_active)
        total += len(ref_active)
        missed += max(0, len(ref_active) - len(hyp_active))
        false_alarm += max(0, len(hyp_active) - len(ref_active))
        confusion += min(len(ref_active), len(hyp_active)) - correct
    return DiarizationScore(total * FRAME_SECONDS, missed * FRAME_SECONDS, false_alarm * FRAME_SECONDS,
                            confusion * FRAME_SECONDS, mapping)


def boundary_errors(reference_changes: Sequence[float], hypothesis_changes: Sequence[float],
                    tolerance: float) -> tuple[int, int]:
    """(reference speaker changes with no hypothesis change within `tolerance` s, hypothesis changes
    with no reference change within it): missed and spurious turn boundaries."""
    missed = sum(1 for t in reference_changes if not any(abs(t - h) <= tolerance for h in hypothesis_changes))
    spurious = sum(1 for h in hypothesis_changes if not any(abs(t - h) <= tolerance for t in reference_changes))
    return missed, spurious


def speaker_changes(spans: Sequence[Span]) -> list[float]:
    """Times where the speaker changes from one span to the next (spans in start order)."""
    ordered = sorted(spans, key=lambda s: (s.start, s.end))
    return [b.start for a, b in zip(ordered, ordered[1:]) if a.speaker != b.speaker]
