"""Audio preprocessing before transcription: VAD (chunks of speech only), then speaker diarization.

The chunks sent to Whisper hold only speech (long silences are never transcribed) and keep their
absolute offsets; the speaker turns label the transcript afterwards (``diarization.split_by_speaker``
cuts segments at speaker changes by their word timings), so Whisper is called no more often than
without diarization.

Why in the server process and not in a worker: it needs the whole decoded audio (which the server
holds already, to cut chunks), it runs once per upload before any chunk is queued, and its models
are small (Silero's ONNX VAD; a 17 MB voice encoder) and CPU-bound for a fraction of the audio's
duration. It runs in a thread (``asyncio.to_thread``) so the event loop keeps serving; one
diarization at a time per backend (their locks), on ``DIARIZATION_THREADS`` torch threads.

The backend is chosen once per process from SpeechSettings (``diarization_choice``) and loaded on
the first request that asks for preprocessing (the offline encoder: about 3 s with its warm-up).
A pyannote backend picked by ``auto`` (``HF_TOKEN`` set) that cannot load gives way to the offline
one with a warning (``FallbackDiarizer``); one named in ``DIARIZATION_BACKEND`` does not.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from media_server.speech.chunking import AudioChunk
from media_server.speech.diarization import DiarizationError, Diarizer, SpeakerCount, SpeakerTurn
from media_server.speech.settings import SpeechSettings
from media_server.speech.vad import (SpeechRegion, VadParameters, detect_speech, plan_speech_chunks,
                                     speech_seconds)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Preprocessed:
    """What preprocessing found, and what it cost."""

    regions: list[SpeechRegion]
    turns: list[SpeakerTurn]
    chunks: list[AudioChunk]
    vad_seconds: float
    diarization_seconds: float
    backend: str

    @property
    def speech_seconds(self) -> float:
        return speech_seconds(self.regions)

    @property
    def speakers(self) -> list[str]:
        return sorted({turn.speaker for turn in self.turns})


class FallbackDiarizer:
    """The backend ``auto`` picked, or the offline one when that cannot load (one warning line).

    Why: the documented ``HF_TOKEN`` makes ``auto`` pick pyannote, which needs pyannote.audio (not in the
    media-server venv) and the Hub's gated weights; a host without them must still diarize, not answer 503
    to every preprocessing request. Only ``auto`` falls back: an explicit ``DIARIZATION_BACKEND=pyannote``
    is a choice, so a pipeline that cannot load stays an error naming the reason. Thread-safe.
    """

    def __init__(self, primary: Diarizer, threads: int) -> None:
        self._primary = primary
        self._threads = threads
        self._active: Diarizer | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return (self._active or self._primary).name

    def load(self) -> None:
        with self._lock:
            if self._active is None:
                self._active = self._choose()
        getattr(self._active, "load", lambda: None)()

    def _choose(self) -> Diarizer:
        """The primary when it loads, else the offline backend (saying why, once)."""
        try:
            self._primary.load()
            return self._primary
        except DiarizationError as error:
            from media_server.speech.diarize_embeddings import EmbeddingDiarizer

            log.warning("diarization: %s; using the offline embeddings backend instead "
                        "(DIARIZATION_BACKEND=pyannote makes this an error)", error)
            return EmbeddingDiarizer(threads=self._threads)

    def diarize(self, samples: np.ndarray, regions: list[SpeechRegion], count: SpeakerCount) -> list[SpeakerTurn]:
        self.load()
        return self._active.diarize(samples, regions, count)


@lru_cache(maxsize=1)
def diarizer_for(backend: str, pipeline: str, token: str, threads: int, explicit: bool = True) -> Diarizer:
    """The process's diarizer for these settings (loaded lazily by its first diarize call); a pyannote
    that ``auto`` chose (``explicit`` false) falls back to the offline backend when it cannot load."""
    if backend == "pyannote":
        from media_server.speech.diarize_pyannote import PyannoteDiarizer

        chosen = PyannoteDiarizer(pipeline, token, threads)
        return chosen if explicit else FallbackDiarizer(chosen, threads)
    from media_server.speech.diarize_embeddings import EmbeddingDiarizer

    return EmbeddingDiarizer(threads=threads)


def diarizer(settings: SpeechSettings) -> Diarizer:
    return diarizer_for(settings.diarization_choice, settings.pyannote_pipeline, settings.hf_token,
                        settings.diarization_threads, settings.diarization_backend != "auto")


def warm_up(settings: SpeechSettings) -> None:
    """Load the VAD model and the diarization backend now (at start-up, in a background thread)."""
    detect_speech(np.zeros(16_000, dtype=np.float32))
    loader = getattr(diarizer(settings), "load", None)
    if loader is not None:
        loader()


def preprocess(samples: np.ndarray, count: SpeakerCount, chunk_seconds: float,
               settings: SpeechSettings) -> Preprocessed:
    """VAD + diarization of decoded audio: chunks of speech only (absolute offsets) and speaker turns.

    Raises DiarizationError when the configured backend cannot run."""
    started = time.perf_counter()
    regions = detect_speech(samples, VadParameters(threshold=settings.vad_threshold,
                                                   min_silence_ms=settings.vad_min_silence_ms))
    vad_done = time.perf_counter()
    backend = diarizer(settings)
    turns = backend.diarize(samples, regions, count) if regions else []
    diarized = time.perf_counter()
    chunks = plan_speech_chunks(samples, regions, chunk_seconds)
    return Preprocessed(regions, turns, chunks, vad_done - started, diarized - vad_done, backend.name)
