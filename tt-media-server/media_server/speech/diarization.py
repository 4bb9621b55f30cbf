"""Speaker diarization behind one interface: who speaks when, and the transcript cut at speaker turns.

Why one interface: two backends answer the same question. The offline default
(``diarize_embeddings.EmbeddingDiarizer``: a voice encoder whose weights ship in a wheel, plus
k-means clustering) runs anywhere; pyannote's pipeline (``diarize_pyannote``) runs where a
user has it (``HF_TOKEN`` and the Hub, or a local pipeline directory). Both take the decoded
samples and the VAD's speech regions and return ``SpeakerTurn``s; everything after that (labelling
the transcript's segments, split at speaker changes by their word timings) is shared and pure, and
tested alone.

Speaker labels are ``A``, ``B``, ``C`` ... in order of first appearance, as OpenAI's diarizing
transcription model labels anonymous speakers.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from media_server.speech.records import Segment, Word
from media_server.speech.vad import SpeechRegion

#: The most speakers a request may ask for (and the most the automatic count returns).
MAX_SPEAKERS = 16


class DiarizationError(RuntimeError):
    """The diarization backend cannot run (not installed, no access to its weights); one line."""


@dataclass(frozen=True)
class SpeakerCount:
    """What the client said about the number of speakers (None: let the backend decide)."""

    num_speakers: int | None = None
    min_speakers: int | None = None
    max_speakers: int | None = None

    def validate(self) -> "SpeakerCount":
        """The same count, or ValueError naming the field that makes it impossible."""
        for name in ("num_speakers", "min_speakers", "max_speakers"):
            value = getattr(self, name)
            if value is not None and not 1 <= value <= MAX_SPEAKERS:
                raise ValueError(f"{name}: {value} is out of range [1, {MAX_SPEAKERS}]")
        low, high = self.min_speakers, self.max_speakers
        if low is not None and high is not None and low > high:
            raise ValueError(f"min_speakers={low} is more than max_speakers={high}")
        if self.num_speakers is not None and ((low is not None and self.num_speakers < low)
                                              or (high is not None and self.num_speakers > high)):
            raise ValueError(f"num_speakers={self.num_speakers} is outside min_speakers..max_speakers")
        return self

    def bounds(self) -> tuple[int, int]:
        """(fewest, most) speakers the answer may have."""
        if self.num_speakers is not None:
            return self.num_speakers, self.num_speakers
        return self.min_speakers or 1, self.max_speakers or MAX_SPEAKERS


@dataclass(frozen=True)
class SpeakerTurn:
    """One speaker's turn: seconds [start, end) of the whole audio."""

    speaker: str
    start: float
    end: float


class Diarizer(Protocol):
    """A diarization backend. `name` says which one answered (logs, benchmark figures)."""

    name: str

    def diarize(self, samples: np.ndarray, regions: list[SpeechRegion], count: SpeakerCount) -> list[SpeakerTurn]:
        """Turns in time order covering the speech regions, labelled by `speaker_label`."""
        ...


def speaker_label(index: int) -> str:
    """A, B, ..., Z, then S26, S27 ... (never reached: at most MAX_SPEAKERS)."""
    return string.ascii_uppercase[index] if index < 26 else f"S{index}"


def relabel_in_order(turns: list[SpeakerTurn]) -> list[SpeakerTurn]:
    """Turns sorted by time, labels renamed A, B, C ... in order of first appearance."""
    names: dict[str, str] = {}
    out = []
    for turn in sorted(turns, key=lambda t: (t.start, t.end)):
        if turn.speaker not in names:
            names[turn.speaker] = speaker_label(len(names))
        out.append(SpeakerTurn(names[turn.speaker], turn.start, turn.end))
    return out


def speaker_at(turns: list[SpeakerTurn], start: float, end: float) -> str | None:
    """The speaker who talks most during [start, end) (the nearest turn's when none overlaps)."""
    if not turns:
        return None
    talk: dict[str, float] = {}
    for turn in turns:
        overlap = min(end, turn.end) - max(start, turn.start)
        if overlap > 0:
            talk[turn.speaker] = talk.get(turn.speaker, 0.0) + overlap
    if talk:
        return max(talk, key=lambda speaker: talk[speaker])
    middle = (start + end) / 2
    return min(turns, key=lambda t: min(abs(middle - t.start), abs(middle - t.end))).speaker


def _without_instant_runs(runs: list[tuple[str | None, list[Word]]]) -> list[tuple[str | None, list[Word]]]:
    """Runs that last no time (Whisper gives some words start == end) join the run before them, or
    the one after for the first: a zero-length segment names a speaker nobody heard talking."""
    kept: list[tuple[str | None, list[Word]]] = []
    pending: list[Word] = []
    for speaker, words in runs:
        if words[-1].end <= words[0].start and len(runs) > 1:
            if kept:
                kept[-1][1].extend(words)
            else:
                pending.extend(words)
            continue
        if kept and kept[-1][0] == speaker:
            kept[-1][1].extend(pending + words)
        else:
            kept.append((speaker, pending + words))
        pending = []
    if pending:  # every run was instant: keep them as they were
        return runs
    return kept


def split_by_speaker(segment: Segment, turns: list[SpeakerTurn]) -> list[Segment]:
    """The segment cut where the speaker changes, each piece labelled with its speaker.

    Whisper's segments follow the text, not the voices: one may run across a turn. Each word goes
    to the speaker who talks most during it; runs of words of one speaker become one segment (ids
    are left to the caller). A segment without word timings takes the speaker of its span whole.
    """
    if not turns:
        return [segment]
    if not segment.words:
        return [Segment.from_dict({**segment.to_dict(), "speaker": speaker_at(turns, segment.start, segment.end)})]
    runs: list[tuple[str | None, list[Word]]] = []
    for word in segment.words:
        speaker = speaker_at(turns, word.start, word.end)
        if runs and runs[-1][0] == speaker:
            runs[-1][1].append(word)
        else:
            runs.append((speaker, [word]))
    runs = _without_instant_runs(runs)
    if len(runs) == 1:
        return [Segment.from_dict({**segment.to_dict(), "speaker": runs[0][0]})]
    pieces = []
    for speaker, words in runs:
        text = "".join(word.word for word in words)
        pieces.append(Segment.from_dict({**segment.to_dict(), "start": words[0].start, "end": words[-1].end,
                                         "text": text if text.startswith(" ") else " " + text, "tokens": [],
                                         "words": [word.to_dict() for word in words], "speaker": speaker}))
    return pieces
