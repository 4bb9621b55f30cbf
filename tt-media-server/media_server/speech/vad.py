"""Voice activity detection: where the speech is, and the audio cut into chunks of speech only.

Why: Whisper spends a full encoder pass on every 30 s window, silent or not, and on silence it
is prone to inventing text. Silero VAD (the ONNX model faster-whisper ships in its wheel, run by
onnxruntime) finds the speech; only the speech is sent to the workers, packed into chunks of up
to 30 s, and long speech is split at its pauses rather than at a fixed length.

Every chunk knows where its pieces sit in the original audio (``AudioChunk.pieces``), so segment
and word timestamps stay absolute: the joined transcript says when a word was spoken in the
upload, not in the trimmed audio. The planning (``plan_speech_chunks``) is pure and tested alone; only
``detect_speech`` needs the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from media_server.speech.chunking import PIECE_GAP_SECONDS, SAMPLE_RATE, AudioChunk, plan_chunks


@dataclass(frozen=True)
class SpeechRegion:
    """Samples [start, end) at SAMPLE_RATE that hold speech."""

    start: int
    end: int

    @property
    def start_seconds(self) -> float:
        return self.start / SAMPLE_RATE

    @property
    def end_seconds(self) -> float:
        return self.end / SAMPLE_RATE


@dataclass(frozen=True)
class VadParameters:
    """Silero's knobs as this server uses them (see SpeechSettings for the variables)."""

    threshold: float = 0.5
    min_silence_ms: int = 300
    speech_pad_ms: int = 100
    min_speech_ms: int = 200


def detect_speech(samples: np.ndarray, parameters: VadParameters = VadParameters()) -> list[SpeechRegion]:
    """Speech regions of 16 kHz mono float32 audio, in order, not overlapping."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps  # the model loads once per process

    options = VadOptions(threshold=parameters.threshold, min_silence_duration_ms=parameters.min_silence_ms,
                         speech_pad_ms=parameters.speech_pad_ms, min_speech_duration_ms=parameters.min_speech_ms)
    stamps = get_speech_timestamps(np.asarray(samples, dtype=np.float32), options, sampling_rate=SAMPLE_RATE)
    regions: list[SpeechRegion] = []
    for stamp in stamps:
        start, end = max(0, int(stamp["start"])), min(len(samples), int(stamp["end"]))
        if regions and start <= regions[-1].end:  # padding can make neighbours touch: merge them
            regions[-1] = SpeechRegion(regions[-1].start, max(end, regions[-1].end))
        elif end > start:
            regions.append(SpeechRegion(start, end))
    return regions


def plan_speech_chunks(samples: np.ndarray, regions: list[SpeechRegion], chunk_seconds: float) -> list[AudioChunk]:
    """Chunks of speech only, each at most `chunk_seconds` of samples sent.

    Consecutive speech regions are packed into one chunk, joined with PIECE_GAP_SECONDS of silence
    (whatever the pause between them was), until the next would make it longer than
    `chunk_seconds`: Whisper pads every call to 30 s, so five short sentences cost one call, not
    five, and an hour of silence costs nothing. A region longer than `chunk_seconds` on its own is
    cut at its quietest points into contiguous chunks like any long audio.
    """
    target = int(chunk_seconds * SAMPLE_RATE)
    gap = int(PIECE_GAP_SECONDS * SAMPLE_RATE)
    chunks: list[AudioChunk] = []
    pending: list[tuple[int, int]] = []
    pending_length = 0

    def flush() -> None:
        nonlocal pending, pending_length
        if pending:
            chunks.append(AudioChunk(len(chunks), pending[0][0], pending[-1][1], pieces=tuple(pending)))
        pending, pending_length = [], 0

    for region in regions:
        length = region.end - region.start
        if length > target:
            flush()
            for piece in plan_chunks(samples[region.start:region.end], chunk_seconds):
                chunks.append(AudioChunk(len(chunks), region.start + piece.start, region.start + piece.end))
            continue
        if pending and pending_length + gap + length > target:
            flush()
        pending_length += (gap if pending else 0) + length
        pending.append((region.start, region.end))
    flush()
    return chunks


def speech_seconds(regions: list[SpeechRegion]) -> float:
    return sum(region.end - region.start for region in regions) / SAMPLE_RATE
