"""Speech settings: the audio limits and the CPU Whisper decoder knobs, from the environment or `.env`.

Why a settings class of its own: these knobs belong to the speech routes and runners only; they
are read the same way as the server's settings (UPPERCASE environment variables, `.env`), and an
invalid value stops the server at start-up naming the variable.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from media_server.speech.audio_input import SAMPLE_RATE, AudioLimits

# The audio routes' request bodies may exceed MAX_PAYLOAD_BYTES: they are bounded by the audio
# limit itself (base64 in the legacy JSON body is 4/3 of the audio) plus this much for the other
# form fields.
FORM_FIELDS_ALLOWANCE = 64 * 1024
AUDIO_PATHS = ("/v1/audio/transcriptions", "/v1/audio/translations", "/audio/transcriptions")


class SpeechSettings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False)

    max_audio_size_bytes: int = Field(50 * 1024 * 1024, ge=1, le=2**31,
                                      description="largest accepted upload (413 above)")
    max_audio_bytes: int = Field(0, ge=0, le=2**31, description="the small-model server's name for "
                                 "MAX_AUDIO_SIZE_BYTES (0: not given)")
    max_audio_duration_seconds: float = Field(600.0, gt=0, le=86_400,
                                              description="longest accepted audio (413 above)")
    default_sample_rate: int = Field(SAMPLE_RATE, ge=8000, le=192_000, description=(
        "the documented audio rate; every upload is decoded at its own rate and resampled to 16000 Hz, the "
        "rate every Whisper model's features are computed at, so another value (22050, 44100...) is accepted "
        "and said once at start-up, and the audio is resampled all the same"))
    # Beam 5 is faster-whisper's and openai-whisper's default. Greedy decoding (1) was measured to drop a
    # whole chunk of speech on some CPUs: the decoder ends after three words with a timestamp past the end
    # of the audio, and nothing in Whisper's fallback notices. Beam 5 kept every chunk on every compute type,
    # ISA and thread count tried, for about 17% more decoding time on tiny.en (the encoder costs the same).
    whisper_beam_size: int = Field(5, ge=1, le=10, description="beam width of the CPU Whisper decoder")
    whisper_cpu_threads: int = Field(1, ge=0, le=256, description="CTranslate2 threads per worker (0: its default "
                                     "of 4; one per worker avoids oversubscribing a shared CPU)")
    whisper_compute_type: str = Field("int8", description="CTranslate2 compute type on CPU (int8, float32, ...)")
    whisper_model_path: str = Field("", description="a CTranslate2 Whisper directory to serve instead of the default")
    allow_audio_preprocessing: bool = Field(True, description=(
        "whether a request may ask for VAD + speaker diarization (is_preprocessing_enabled, "
        "response_format=diarized_json); false: such a request is 400"))
    hf_token: str = Field("", description="Hugging Face token: with DIARIZATION_BACKEND=auto, selects pyannote's "
                          "pipeline (PYANNOTE_PIPELINE) from the Hub")
    diarization_backend: Literal["auto", "embeddings", "pyannote"] = Field("auto", description=(
        "auto: pyannote when HF_TOKEN is set or PYANNOTE_PIPELINE is a local directory (embeddings, with a "
        "warning, when it cannot load), else embeddings; "
        "embeddings: the offline voice encoder (resemblyzer wheel) + k-means; pyannote: pyannote.audio's pipeline"))
    pyannote_pipeline: str = Field("pyannote/speaker-diarization-3.0", description=(
        "pyannote pipeline: a Hub name (needs HF_TOKEN and pyannote.audio) or a local pipeline directory"))
    diarization_threads: int = Field(1, ge=1, le=256, description="torch threads of the diarization backend "
                                     "(it runs in the server process)")
    vad_threshold: float = Field(0.5, gt=0.0, lt=1.0, description="Silero VAD speech probability threshold")
    vad_min_silence_ms: int = Field(300, ge=0, le=10_000, description="a pause at least this long ends a "
                                    "speech region (shorter ones stay inside it)")

    @model_validator(mode="after")
    def _alias(self) -> "SpeechSettings":
        if "max_audio_bytes" in self.model_fields_set and self.max_audio_bytes:
            if ("max_audio_size_bytes" in self.model_fields_set
                    and self.max_audio_size_bytes != self.max_audio_bytes):
                raise ValueError(f"MAX_AUDIO_BYTES={self.max_audio_bytes} and MAX_AUDIO_SIZE_BYTES="
                                 f"{self.max_audio_size_bytes} name the same limit; set one of them")
            self.max_audio_size_bytes = self.max_audio_bytes
        return self

    def sample_rate_line(self) -> str | None:
        """The start-up line for a DEFAULT_SAMPLE_RATE other than the models' rate (None when it is that rate)."""
        if self.default_sample_rate == SAMPLE_RATE:
            return None
        return (f"DEFAULT_SAMPLE_RATE={self.default_sample_rate}: audio is resampled to {SAMPLE_RATE} Hz, the rate "
                f"every Whisper model's features use (uploads of any rate are accepted)")

    @property
    def audio_body_limit(self) -> int:
        """The most bytes an audio route's request body may hold (before its own checks)."""
        return (self.max_audio_size_bytes + 2) // 3 * 4 + FORM_FIELDS_ALLOWANCE

    def cpu_threads(self, server_settings) -> int:
        """WHISPER_CPU_THREADS when given, else the server's CPU_THREADS_PER_WORKER, else 1."""
        if "whisper_cpu_threads" in self.model_fields_set:
            return self.whisper_cpu_threads
        return getattr(server_settings, "cpu_threads_per_worker", 0) or 1

    @property
    def diarization_choice(self) -> str:
        """The backend `auto` resolves to: pyannote when the user configured it, else embeddings."""
        if self.diarization_backend != "auto":
            return self.diarization_backend
        from pathlib import Path

        return "pyannote" if self.hf_token or Path(self.pyannote_pipeline).is_dir() else "embeddings"

    @property
    def audio_limits(self) -> AudioLimits:
        return AudioLimits(self.max_audio_size_bytes, self.max_audio_duration_seconds)


@lru_cache(maxsize=1)
def speech_settings() -> SpeechSettings:
    return SpeechSettings()
