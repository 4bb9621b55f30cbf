"""Whisper on Tenstorrent devices through tt-metal's Whisper demo pipeline, imported lazily.

Why lazily: the server and its CPU runners must work on a host without tt-metal; choosing this
runner there stops the start-up with one line (`tt-whisper needs the Tenstorrent stack ...`)
instead of failing every request.

The demo pipeline decodes a whole chunk to text without timestamps, so each chunk gives one
segment spanning the chunk; the server's chunking (and so the streaming granularity) is the same
as for the CPU runner. Payloads and results are those of `whisper_cpu.WhisperCpuRunner`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterator

import numpy as np

from media_server.runners.base import GeneratorStreamingRunner, StreamItemError
from media_server.runners.tt_common import close_mesh, open_mesh, require_module
from media_server.speech.records import Segment, TranscriptionOptions

SAMPLE_RATE = 16_000


class TTWhisperRunner(GeneratorStreamingRunner):
    name: ClassVar[str] = "tt-whisper"
    kind: ClassVar[str] = "audio"
    model_id: ClassVar[str] = "whisper-large-v3"
    MODEL_MODULE: ClassVar[str] = "models.demos.whisper.demo.demo"
    PIPELINE_FACTORY: ClassVar[str] = "create_functional_whisper_for_conditional_generation_inference_pipeline"

    @classmethod
    def preflight(cls, settings) -> None:
        require_module(cls.name, "ttnn", "ttnn from tt-metal")
        require_module(cls.name, cls.MODEL_MODULE, "tt-metal's models package on PYTHONPATH")

    def load(self) -> None:
        self.mesh = open_mesh(self.name, self.settings, self.device)
        module = require_module(self.name, self.MODEL_MODULE, "tt-metal's models package")
        factory: Any = getattr(module, self.PIPELINE_FACTORY)
        self.pipeline = factory(self.mesh, model_repo=self.settings.model_weights_path or "openai/whisper-large-v3")
        if self.settings.enable_warmup:
            self.pipeline((SAMPLE_RATE, np.zeros(SAMPLE_RATE, dtype=np.float32)))

    def start(self, payload: dict) -> Iterator[dict]:
        samples = payload.get("samples")
        if not isinstance(samples, np.ndarray) or samples.ndim != 1 or samples.size == 0:
            raise StreamItemError(400, "file: no audio samples to transcribe")
        options = TranscriptionOptions.from_dict(payload.get("options", {}))
        return self._decode(samples.astype(np.float32, copy=False), options)

    def _decode(self, samples: np.ndarray, options: TranscriptionOptions) -> Iterator[dict]:
        text = str(self.pipeline((SAMPLE_RATE, samples)))
        duration = len(samples) / SAMPLE_RATE
        if text.strip():
            yield Segment(id=0, start=0.0, end=duration, text=" " + text.strip()).to_dict()
        return {"language": options.language or "en", "duration": duration}

    def close(self) -> None:
        close_mesh(getattr(self, "mesh", None))
