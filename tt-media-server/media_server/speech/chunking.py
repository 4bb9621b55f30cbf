"""Long audio split into chunks that several workers transcribe at once, and the pieces put back in order.

Why cut at quiet points: a chunk boundary in the middle of a word loses that word on both sides.
Each cut is moved back, within a short search window, to the quietest 50 ms frame before the
target length, which on speech is almost always a pause between words.

Why the chunk length depends on the worker count: with one worker, chunks only add per-call cost,
so they stay at Whisper's own 30 s window; with more workers, shorter chunks (never under
`MIN_CHUNK_SECONDS`, below which Whisper loses context) let every worker take a share.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from media_server.speech.records import Segment, Transcript, Word

SAMPLE_RATE = 16_000
MAX_CHUNK_SECONDS = 30.0
MIN_CHUNK_SECONDS = 10.0
SEARCH_SECONDS = 2.0
FRAME_SECONDS = 0.05
#: Silence put between the speech pieces of one chunk (preprocessing joins the speech the VAD found).
PIECE_GAP_SECONDS = 0.3


@dataclass(frozen=True)
class AudioChunk:
    """One piece of the audio: samples [start, end) at SAMPLE_RATE, and its place in the order.

    With `pieces` (the speech regions a VAD found, each [start, end) of the whole audio), the chunk
    is those pieces joined with PIECE_GAP_SECONDS of silence between them: the silence of the upload
    is never sent, and `to_absolute` maps a time in the chunk back to the upload's timeline.
    """

    index: int
    start: int
    end: int
    pieces: tuple[tuple[int, int], ...] = ()

    @property
    def offset_seconds(self) -> float:
        return self.start / SAMPLE_RATE

    @property
    def duration_seconds(self) -> float:
        if not self.pieces:
            return (self.end - self.start) / SAMPLE_RATE
        gap = int(PIECE_GAP_SECONDS * SAMPLE_RATE)
        return (sum(end - start for start, end in self.pieces) + gap * (len(self.pieces) - 1)) / SAMPLE_RATE

    def samples_of(self, samples: np.ndarray) -> np.ndarray:
        """The samples the worker transcribes for this chunk."""
        if not self.pieces:
            return samples[self.start:self.end]
        gap = np.zeros(int(PIECE_GAP_SECONDS * SAMPLE_RATE), dtype=samples.dtype)
        parts: list[np.ndarray] = []
        for start, end in self.pieces:
            if parts:
                parts.append(gap)
            parts.append(samples[start:end])
        return np.concatenate(parts)

    def to_absolute(self, seconds: float) -> float:
        """A time in this chunk's samples -> the same moment in the whole audio (a time in a gap
        between pieces goes to the end of the piece before it)."""
        if not self.pieces:
            return self.offset_seconds + seconds
        gap = PIECE_GAP_SECONDS
        position = 0.0
        for start, end in self.pieces:
            length = (end - start) / SAMPLE_RATE
            if seconds <= position + length:
                return start / SAMPLE_RATE + max(0.0, seconds - position)
            if seconds <= position + length + gap:
                return end / SAMPLE_RATE
            position += length + gap
        return self.pieces[-1][1] / SAMPLE_RATE


def chunk_seconds_for(duration_seconds: float, worker_count: int) -> float:
    """Target chunk length: the audio shared over the workers, between MIN and MAX_CHUNK_SECONDS."""
    share = duration_seconds / max(1, worker_count)
    return float(min(MAX_CHUNK_SECONDS, max(MIN_CHUNK_SECONDS, share)))


def _quietest_cut(samples: np.ndarray, low: int, high: int) -> int:
    """The start of the quietest FRAME_SECONDS frame in samples[low:high] (high when the range is tiny)."""
    frame = int(FRAME_SECONDS * SAMPLE_RATE)
    if high - low < 2 * frame:
        return high
    window = samples[low:high].astype(np.float32)
    count = len(window) // frame
    energies = np.square(window[: count * frame].reshape(count, frame)).mean(axis=1)
    # Prefer the latest of the quietest frames, so chunks stay close to the target length.
    quietest = int(count - 1 - np.argmin(energies[::-1]))
    return low + quietest * frame + frame // 2


def plan_chunks(samples: np.ndarray, chunk_seconds: float, search_seconds: float = SEARCH_SECONDS) -> list[AudioChunk]:
    """Consecutive chunks covering every sample once, each at most `chunk_seconds` long."""
    total = len(samples)
    target = int(chunk_seconds * SAMPLE_RATE)
    if total <= target:
        return [AudioChunk(0, 0, total)]
    search = min(int(search_seconds * SAMPLE_RATE), target // 2)
    chunks: list[AudioChunk] = []
    start = 0
    while total - start > target:
        cut = _quietest_cut(samples, start + target - search, start + target)
        chunks.append(AudioChunk(len(chunks), start, cut))
        start = cut
    chunks.append(AudioChunk(len(chunks), start, total))
    return chunks


def place_segments(chunk: AudioChunk, segments: list[Segment], first_id: int) -> list[Segment]:
    """A chunk's segments moved to their time in the whole audio, numbered from `first_id`.

    Times are clamped into the chunk so the joined transcript's timestamps never go backwards.
    """
    placed = []
    limit = chunk.duration_seconds
    for position, segment in enumerate(segments):
        start = min(max(0.0, segment.start), limit)
        end = min(max(start, segment.end), limit)
        clamped = Segment.from_dict({**segment.to_dict(), "start": start, "end": end})
        if chunk.pieces:
            placed.append(_mapped(chunk, clamped, limit, first_id + position))
        else:
            placed.append(clamped.shifted(chunk.offset_seconds, first_id + position))
    return placed


def _mapped(chunk: AudioChunk, segment: Segment, limit: float, new_id: int) -> Segment:
    """A segment of a chunk of joined pieces, its times (and its words') mapped to the whole audio."""
    def absolute(seconds: float) -> float:
        return chunk.to_absolute(min(max(0.0, seconds), limit))

    words = [Word.from_dict({**word.to_dict(), "start": absolute(word.start), "end": absolute(word.end)})
             for word in segment.words]
    data = {**segment.to_dict(), "id": new_id, "start": absolute(segment.start), "end": absolute(segment.end),
            "words": [word.to_dict() for word in words]}
    return Segment.from_dict(data)


def join_transcripts(chunks: list[AudioChunk], parts: list[Transcript], duration_seconds: float) -> Transcript:
    """One transcript from the chunks' transcripts, whatever order they finished in."""
    if len(chunks) != len(parts):
        raise ValueError(f"{len(parts)} transcripts for {len(chunks)} chunks")
    ordered = sorted(zip(chunks, parts), key=lambda pair: pair[0].index)
    segments: list[Segment] = []
    for chunk, part in ordered:
        segments.extend(place_segments(chunk, part.segments, len(segments)))
    first = ordered[0][1] if ordered else None
    return Transcript(language=first.language if first else "en", duration=duration_seconds,
                      segments=segments, task=first.task if first else "transcribe")
