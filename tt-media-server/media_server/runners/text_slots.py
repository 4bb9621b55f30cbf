"""The text runner: continuous batching over user slots, streaming tokens per request id.

Registry name ``text-slots`` (kind ``text``). The worker's streaming loop calls ``add`` /
``cancel`` between steps and ``step()`` in a loop (runners/base.py), so a new prompt joins
between two decode steps and a cancelled user leaves before the next one. The engine
(``text_engine.SlotEngine``) does the batching; this file maps it onto the runner protocol.

Knobs (environment, read by ``TextSettings``):
    MAX_USER_SLOTS        users decoding at once (default 8); the worker's capacity
    TEXT_BACKEND          ``hf`` (transformers on CPU) or ``mock`` (fake tokens, no model)
    TEXT_MODEL_PATH       HF model directory (default: MODEL_WEIGHTS_PATH, else the packaged
                          SmolLM2-135M-Instruct under ~/.cache/tt-inference-server/models)
    TEXT_MODEL_ID         the name /v1/models shows and clients send (default SmolLM2-135M-Instruct)
    TEXT_PREFILL_CHUNK    prompt tokens prefilled per step while others decode (default 128)
    TEXT_TORCH_THREADS    torch threads in the worker (default 1: more oversubscribes a shared CPU; 0: torch default)
    TEXT_MAX_MODEL_LEN    context limit (default: the model's)
    TEXT_MOCK_STEP_MS     mock backend: fake device time per decode step (default 0)
    TEXT_MOCK_PREFILL_MS_PER_TOKEN  mock backend: fake prefill time per prompt token
"""
from __future__ import annotations

import os
from typing import Any, ClassVar

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from media_server.runners.base import RunnerUnavailable, StreamEvent, StreamingRunner
from media_server.runners.text_params import InvalidTextRequest, TextRequest

DEFAULT_MODEL_ID = "SmolLM2-135M-Instruct"


def default_model_path() -> str:
    return os.path.join(os.path.expanduser("~"), ".cache", "tt-inference-server", "models",
                        DEFAULT_MODEL_ID)


class TextSettings(BaseSettings):
    """The text runner's knobs (environment variables, upper-cased field names)."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False,
                                      protected_namespaces=())

    max_user_slots: int = Field(8, ge=1, le=256, description="Users decoding at once")
    text_backend: str = Field("hf", pattern="^(hf|mock)$", description="hf | mock")
    text_model_path: str = Field("", description="HF model directory")
    text_model_id: str = Field(DEFAULT_MODEL_ID, description="Served model name")
    text_prefill_chunk: int = Field(128, ge=1, le=65536)
    text_torch_threads: int = Field(1, ge=0, le=256)
    text_max_model_len: int = Field(0, ge=0, le=1_000_000)
    text_mock_step_ms: float = Field(0.0, ge=0, le=60_000)
    text_mock_prefill_ms_per_token: float = Field(0.0, ge=0, le=60_000)
    model_weights_path: str = ""

    def model_path(self) -> str:
        return self.text_model_path or self.model_weights_path or default_model_path()


def _text_model_id() -> str:
    try:
        return TextSettings().text_model_id
    except Exception:  # noqa: BLE001 - invalid settings are reported by preflight
        return DEFAULT_MODEL_ID


class TextSlotsRunner(StreamingRunner):
    """Token streaming with continuous batching (transformers on CPU, or the mock backend)."""

    name: ClassVar[str] = "text-slots"
    kind: ClassVar[str] = "text"
    model_id: ClassVar[str] = _text_model_id()

    def __init__(self, settings, device):
        super().__init__(settings, device)
        self.text_settings = TextSettings()
        self.engine = None

    @classmethod
    def preflight(cls, settings) -> None:
        try:
            text = TextSettings()
        except Exception as exc:  # noqa: BLE001 - one line naming the variable
            raise RunnerUnavailable(f"text-slots: invalid settings: {exc}".replace("\n", " ")) from None
        if text.text_backend == "hf":
            path = text.model_path()
            if not os.path.isfile(os.path.join(path, "config.json")):
                raise RunnerUnavailable(
                    f"text-slots: no model at {path} (set TEXT_MODEL_PATH to a Hugging Face model "
                    "directory, or TEXT_BACKEND=mock)")

    def capacity(self) -> int:
        return self.text_settings.max_user_slots

    def load(self) -> None:
        from media_server.runners.text_engine import SlotEngine

        text = self.text_settings
        if text.text_backend == "mock":
            from media_server.runners.text_backend_mock import MockSlotBackend

            backend = MockSlotBackend(step_ms=text.text_mock_step_ms,
                                      prefill_ms_per_token=text.text_mock_prefill_ms_per_token)
        else:
            from media_server.runners.text_backend_hf import HfSlotBackend

            backend = HfSlotBackend(text.model_path(), threads=text.text_torch_threads)
        if text.text_max_model_len:
            backend.max_model_len = min(backend.max_model_len, text.text_max_model_len)
        self.engine = SlotEngine(backend, max_slots=text.max_user_slots,
                                 prefill_chunk=text.text_prefill_chunk)
        self._warm_up()

    def _warm_up(self) -> None:
        """One short greedy request so the first user does not pay for lazy initialisation."""
        self.engine.submit("warm-up", TextRequest(prompt="Hello", max_tokens=2, temperature=0.0,
                                                  ignore_eos=True))
        while self.engine.has_work():
            self.engine.step()

    def add(self, request_id: str, payload: Any) -> None:
        try:
            request = TextRequest.from_dict(payload)
        except TypeError as exc:
            raise InvalidTextRequest(f"bad text payload: {exc}") from None
        self.engine.submit(request_id, request)

    def cancel(self, request_id: str) -> None:
        self.engine.cancel(request_id)

    def has_work(self) -> bool:
        return self.engine.has_work()

    def step(self) -> list[StreamEvent]:
        return [StreamEvent(e.request_id, e.type, e.data) for e in self.engine.step()]

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
