"""Uploaded audio -> 16 kHz mono float32 samples, with the size and duration limits enforced.

Why here and not in the runner: limits and undecodable input are the client's fault and must come
back as 413/400 before any worker is busy; decoding in the server process also gives the samples
that long-audio chunking splits. PyAV (FFmpeg bundled in its wheel) reads WAV, MP3, FLAC, OGG, M4A
and more; decoding stops as soon as the duration limit is passed, so an oversized upload is never
decoded whole.
"""

from __future__ import annotations

import base64
import binascii
import io
from dataclasses import dataclass

import numpy as np

SAMPLE_RATE = 16_000


class AudioInputError(ValueError):
    """Bad or oversized audio; `status_code` is the HTTP status, the message names the field."""

    def __init__(self, status_code: int, message: str):
        super().__init__(message)
        self.status_code = status_code
        self.message = message


@dataclass(frozen=True)
class AudioLimits:
    """The server's limits on one uploaded audio."""

    max_size_bytes: int
    max_duration_seconds: float


@dataclass(frozen=True)
class DecodedAudio:
    """Samples ready for a speech runner."""

    samples: np.ndarray
    duration_seconds: float


def check_size(size_bytes: int, limits: AudioLimits, field: str) -> None:
    if size_bytes > limits.max_size_bytes:
        raise AudioInputError(413, f"{field}: {size_bytes} bytes is over MAX_AUDIO_SIZE_BYTES="
                                   f"{limits.max_size_bytes}")
    if size_bytes == 0:
        raise AudioInputError(400, f"{field}: the uploaded audio is empty")


def decode_base64(text: str, field: str, limits: AudioLimits) -> bytes:
    """Base64 text (optionally a data: URL) -> bytes, refusing oversized payloads before decoding."""
    if not isinstance(text, str) or not text:
        raise AudioInputError(400, f"{field}: expected base64-encoded audio")
    if text.startswith("data:"):
        text = text.partition(",")[2]
    if len(text) * 3 // 4 > limits.max_size_bytes + 3:
        raise AudioInputError(413, f"{field}: about {len(text) * 3 // 4} bytes is over MAX_AUDIO_SIZE_BYTES="
                                   f"{limits.max_size_bytes}")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise AudioInputError(400, f"{field}: not valid base64 ({error})") from None


def decode_audio(data: bytes, field: str, limits: AudioLimits) -> DecodedAudio:
    """Decode any container/codec FFmpeg knows into 16 kHz mono float32 samples."""
    import av  # imported here so the pure parts of this module load without PyAV

    check_size(len(data), limits, field)
    max_samples = int(limits.max_duration_seconds * SAMPLE_RATE)
    pieces: list[np.ndarray] = []
    total = 0
    try:
        with av.open(io.BytesIO(data), mode="r", metadata_errors="ignore") as container:
            if not container.streams.audio:
                raise AudioInputError(400, f"{field}: the upload holds no audio stream")
            resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
            for frame in container.decode(audio=0):
                for out in resampler.resample(frame):
                    total += _append(pieces, out)
                if total > max_samples:
                    raise AudioInputError(413, f"{field}: the audio is longer than MAX_AUDIO_DURATION_SECONDS="
                                               f"{limits.max_duration_seconds:g}")
            for out in resampler.resample(None):
                total += _append(pieces, out)
    except AudioInputError:
        raise
    except (av.FFmpegError, ValueError, IndexError, EOFError) as error:
        raise AudioInputError(400, f"{field}: could not decode the audio ({type(error).__name__}: {error})") from None
    if total == 0:
        raise AudioInputError(400, f"{field}: the audio decodes to no samples")
    if total > max_samples:
        raise AudioInputError(413, f"{field}: the audio is longer than MAX_AUDIO_DURATION_SECONDS="
                                   f"{limits.max_duration_seconds:g}")
    samples = np.concatenate(pieces).astype(np.float32) / 32768.0
    return DecodedAudio(samples=samples, duration_seconds=len(samples) / SAMPLE_RATE)


def _append(pieces: list[np.ndarray], frame) -> int:
    array = frame.to_ndarray().reshape(-1)
    pieces.append(array)
    return len(array)
