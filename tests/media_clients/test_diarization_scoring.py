"""The diarization error rate: each part (missed, false alarm, confusion) on hand-computed cases."""
from __future__ import annotations

import pytest

from media_clients.diarization_scoring import Span, best_mapping, boundary_errors, score, speaker_changes

REFERENCE = [Span("A", 0.0, 10.0), Span("B", 10.0, 20.0)]


def test_a_perfect_hypothesis_with_other_labels_scores_zero():
    result = score(REFERENCE, [Span("x", 0.0, 10.0), Span("y", 10.0, 20.0)], collar=0.0)
    assert result.der == 0.0 and result.mapping == {"x": "A", "y": "B"}
    assert result.reference_seconds == pytest.approx(20.0)


def test_each_error_kind_is_counted_once():
    hypothesis = [Span("x", 0.0, 8.0),       # A's last 2 s missed
                  Span("y", 10.0, 16.0),     # B right for 6 s
                  Span("x", 16.0, 20.0),     # B's last 4 s given to A: confusion
                  Span("y", 20.0, 23.0)]     # 3 s of speech where there is none: false alarm
    result = score(REFERENCE, hypothesis, collar=0.0)
    assert result.missed_seconds == pytest.approx(2.0)
    assert result.confusion_seconds == pytest.approx(4.0)
    assert result.false_alarm_seconds == pytest.approx(3.0)
    assert result.der == pytest.approx(9.0 / 20.0)


def test_overlapped_speech_counts_per_speaker():
    reference = [Span("A", 0.0, 6.0), Span("B", 4.0, 10.0)]  # 2 s of overlap: 12 s of speaker time
    result = score(reference, [Span("x", 0.0, 5.0), Span("y", 5.0, 10.0)], collar=0.0)
    assert result.reference_seconds == pytest.approx(12.0)
    # 4..5 B missed, 5..6 A missed: one speaker found where two talk
    assert result.missed_seconds == pytest.approx(2.0)
    assert result.confusion_seconds == pytest.approx(0.0)


def test_the_collar_forgives_boundary_shifts_only():
    shifted = [Span("x", 0.0, 10.2), Span("y", 10.2, 20.0)]
    assert score(REFERENCE, shifted, collar=0.0).confusion_seconds == pytest.approx(0.2)
    assert score(REFERENCE, shifted, collar=0.25).der == 0.0
    swapped = [Span("x", 0.0, 20.0)]
    assert score(REFERENCE, swapped, collar=0.25).der > 0.4


def test_extra_hypothesis_speakers_are_confusion_not_matches():
    result = score(REFERENCE, [Span("x", 0.0, 5.0), Span("z", 5.0, 10.0), Span("y", 10.0, 20.0)], collar=0.0)
    assert result.confusion_seconds == pytest.approx(5.0)
    assert set(result.mapping.values()) <= {"A", "B"} and len(result.mapping) == 2


def test_mapping_is_optimal_not_greedy():
    reference = {"A": set(range(0, 10)), "B": set(range(10, 16))}
    hypothesis = {"x": set(range(0, 6)) | set(range(10, 16)), "y": set(range(6, 10))}
    assert best_mapping(reference, hypothesis) == {"x": "B", "y": "A"}
    # x->B, y->A covers 10 frames; the greedy first pick x->A (6 frames) would leave y nothing
    mapping = best_mapping(reference, hypothesis)
    covered = sum(len(hypothesis[h] & reference[r]) for h, r in mapping.items())
    assert covered == 10


def test_turn_boundaries():
    assert speaker_changes([Span("A", 0, 1), Span("A", 1.5, 2), Span("B", 2.2, 3), Span("A", 3.5, 4)]) == [2.2, 3.5]
    assert boundary_errors([2.2, 3.5], [2.3, 3.0], tolerance=0.25) == (1, 1)


def test_one_conversation_leaves_the_der_check_undecided():
    from contracts.intervals import INCONCLUSIVE, decide
    from media_clients.diarization_eval import _accuracy_interval

    one = _accuracy_interval([1.0], [9.8])  # 1 - DER = 0.898, the smoke set's single two-speaker conversation
    assert (one.low, one.high) == (0.0, 1.0) and decide(one, 0.9, higher_is_better=True) == INCONCLUSIVE
    several = _accuracy_interval([0.1, 0.2, 0.15, 0.3], [10.0, 11.0, 9.5, 12.0])
    assert 0.95 < several.low <= several.high <= 1.0
