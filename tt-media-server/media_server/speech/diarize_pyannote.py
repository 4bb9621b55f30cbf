"""The pyannote diarization backend: pyannote.audio's speaker-diarization pipeline, where a user has it.

Why optional: the pipeline's weights live on the Hugging Face Hub behind a user agreement
(``pyannote/speaker-diarization-3.0`` and its ``segmentation-3.0``, the names the original server
documents), so it runs only with ``HF_TOKEN`` and Hub access, or from a local pipeline directory
(``PYANNOTE_PIPELINE=/path``); ``pyannote.audio`` is not in the media-server venv (install it to
use this backend). Selected by ``DIARIZATION_BACKEND=pyannote``, or by ``auto`` when ``HF_TOKEN``
is set or ``PYANNOTE_PIPELINE`` is a directory. Chosen explicitly, a pipeline that cannot load makes
the request fail with the reason; chosen by ``auto``, it gives way to the offline backend with one
warning line (``preprocessing.FallbackDiarizer``).

The pipeline gets the decoded samples as a waveform (no file round trip) and the speaker-count
options as its own ``num_speakers`` / ``min_speakers`` / ``max_speakers``; its annotation is read
through ``itertracks(yield_label=True)``, which pyannote.audio 3 returns directly and 4 returns
as ``.speaker_diarization``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from media_server.speech.chunking import SAMPLE_RATE
from media_server.speech.diarization import DiarizationError, SpeakerCount, SpeakerTurn, relabel_in_order
from media_server.speech.vad import SpeechRegion


class PyannoteDiarizer:
    """pyannote.audio's Pipeline; thread-safe (one diarization at a time)."""

    name = "pyannote"

    def __init__(self, pipeline: str, token: str = "", threads: int = 1, loaded: Any = None) -> None:
        self.pipeline_name = pipeline
        self.token = token
        self.threads = threads
        self._pipeline = loaded
        self._lock = threading.Lock()

    def load(self) -> None:
        if self._pipeline is not None:
            return
        try:
            import torch
            from pyannote.audio import Pipeline
        except ImportError as error:
            raise DiarizationError(f"DIARIZATION_BACKEND=pyannote needs the pyannote.audio package in the "
                                   f"media-server venv ({error})") from None
        torch.set_num_threads(self.threads)
        source = self.pipeline_name
        if not Path(source).is_dir() and not self.token:
            raise DiarizationError(f"pyannote pipeline {source!r} is not a local directory and HF_TOKEN is not set")
        try:
            try:
                pipeline = Pipeline.from_pretrained(source, token=self.token or None)
            except TypeError:  # pyannote.audio 3 names the argument use_auth_token
                pipeline = Pipeline.from_pretrained(source, use_auth_token=self.token or None)
        except Exception as error:  # noqa: BLE001 - any failure to load is reported with its reason
            raise DiarizationError(f"pyannote pipeline {source!r} could not be loaded: "
                                   f"{type(error).__name__}: {error}") from None
        if pipeline is None:
            raise DiarizationError(f"pyannote pipeline {source!r} could not be loaded (gated model: accept its "
                                   f"conditions with the HF_TOKEN's account)")
        self._pipeline = pipeline

    def diarize(self, samples: np.ndarray, regions: list[SpeechRegion], count: SpeakerCount) -> list[SpeakerTurn]:
        with self._lock:
            self.load()
            import torch

            waveform = torch.from_numpy(np.asarray(samples, dtype=np.float32)).unsqueeze(0)
            options = {key: value for key, value in (("num_speakers", count.num_speakers),
                                                     ("min_speakers", count.min_speakers),
                                                     ("max_speakers", count.max_speakers)) if value is not None}
            output = self._pipeline({"waveform": waveform, "sample_rate": SAMPLE_RATE}, **options)
            return annotation_turns(output)


def annotation_turns(output: Any) -> list[SpeakerTurn]:
    """SpeakerTurns from a pyannote Annotation (or an output holding one as ``speaker_diarization``)."""
    annotation = getattr(output, "speaker_diarization", output)
    if not hasattr(annotation, "itertracks"):
        raise DiarizationError(f"the pyannote pipeline returned {type(output).__name__}, not an annotation")
    turns = [SpeakerTurn(str(label), float(segment.start), float(segment.end))
             for segment, _track, label in annotation.itertracks(yield_label=True) if segment.end > segment.start]
    return relabel_in_order(turns)
