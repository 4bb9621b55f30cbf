"""The text runner: continuous batching over user slots, streaming tokens per request id.

Registry name ``text-slots`` (kind ``text``). The worker's streaming loop calls ``add`` /
``cancel`` between steps and ``step()`` in a loop (runners/base.py), so a new prompt joins
between two decode steps and a cancelled user leaves before the next one. The engine
(``text_engine.SlotEngine``) does the batching; this file maps it onto the runner protocol.

Knobs (environment, read by ``TextSettings``):
    MAX_USER_SLOTS        users decoding at once (default 8); the worker's capacity
    TEXT_BACKEND          ``llama`` (the loop's own forward on a static cache, Llama-family
                          checkpoints: text_backend_llama), ``hf`` (the transformers forward, any
                          decoder-only model), ``auto`` (default: llama when the checkpoint is one,
                          else hf) or ``mock`` (fake tokens, no model)
    TEXT_MODEL_PATH       HF model directory (default: MODEL_WEIGHTS_PATH, else the packaged
                          SmolLM2-135M-Instruct under ~/.cache/tt-inference-server/models)
    TEXT_MODEL_ID         the name /v1/models shows and clients send (default SmolLM2-135M-Instruct)
    TEXT_PREFILL_CHUNK    prompt tokens prefilled per step while others decode (default 128)
    TEXT_TORCH_THREADS    torch threads in the worker (default 1: more oversubscribes a shared CPU; 0: torch default)
    TEXT_MAX_MODEL_LEN    context limit (default: the model's)
    TEXT_MOCK_STEP_MS     mock backend: fake device time per decode step (default 0)
    TEXT_MOCK_PREFILL_MS_PER_TOKEN  mock backend: fake prefill time per prompt token
The small-model server's chat names, mapped onto these (both names with different values: refused):
    ENABLE_CHAT_BATCHING=0   one user at a time (MAX_USER_SLOTS=1)
    CHAT_BATCH_MAX_SIZE      = MAX_USER_SLOTS
    CHAT_MAX_PROMPT_TOKENS   longest prompt in tokens (400 above; 0/unset: the context bounds it)
    CHAT_MAX_NEW_TOKENS      largest max_tokens (400 above) and the cap when a request sends none
    MAX_NEW_TOKENS           max_tokens of a request that sends none (unset: up to the context)
    CHAT_BATCH_WINDOW_MS, CHAT_BATCH_ALLOW_VISION  accepted and checked; no effect: a newcomer
                             joins between two decode steps without waiting, and no vision model
                             is served here
"""
from __future__ import annotations

import json
import os
from typing import Any, ClassVar

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from media_server.runners.base import RunnerUnavailable, StreamEvent, StreamingRunner
from media_server.runners.text_params import InvalidTextRequest, TextRequest

DEFAULT_MODEL_ID = "SmolLM2-135M-Instruct"


def default_model_path() -> str:
    return os.path.join(os.path.expanduser("~"), ".cache", "tt-inference-server", "models",
                        DEFAULT_MODEL_ID)


#: max_tokens of a request that sends none, when neither MAX_NEW_TOKENS nor the model's generation_config.json
#: says: the small-model server's per-model default.
DEFAULT_GENERATION_MAX_TOKENS = 512


def generation_default_max_tokens(model_dir) -> int:
    """The model's own ``max_new_tokens`` (its generation_config.json) when it names one, else 512."""
    import json
    from pathlib import Path

    try:
        config = json.loads((Path(model_dir) / "generation_config.json").read_text()) if model_dir else {}
    except (OSError, ValueError, TypeError):
        config = {}
    value = config.get("max_new_tokens") if isinstance(config, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else \
        DEFAULT_GENERATION_MAX_TOKENS


class TextSettings(BaseSettings):
    """The text runner's knobs (environment variables, upper-cased field names)."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False,
                                      protected_namespaces=())

    max_user_slots: int = Field(8, ge=1, le=256, description="Users decoding at once")
    text_backend: str = Field("auto", pattern="^(auto|llama|hf|mock)$", description="auto | llama | hf | mock")
    text_model_path: str = Field("", description="HF model directory")
    text_model_id: str = Field(DEFAULT_MODEL_ID, description="Served model name")
    text_prefill_chunk: int = Field(128, ge=1, le=65536)
    text_torch_threads: int = Field(1, ge=0, le=256)
    text_max_model_len: int = Field(0, ge=0, le=1_000_000)
    text_mock_step_ms: float = Field(0.0, ge=0, le=60_000)
    text_mock_prefill_ms_per_token: float = Field(0.0, ge=0, le=60_000)
    model_weights_path: str = ""
    # The small-model server's names (see the module docstring); 0 = not given.
    enable_chat_batching: bool = Field(True, description="0: one user at a time (MAX_USER_SLOTS=1)")
    chat_batch_max_size: int = Field(0, ge=0, le=256, description="= MAX_USER_SLOTS (0: not given)")
    chat_batch_window_ms: float = Field(10.0, ge=0, le=10_000, description="accepted; newcomers never wait")
    chat_batch_allow_vision: bool = Field(False, description="accepted; no vision model is served")
    chat_max_prompt_tokens: int = Field(0, ge=0, le=10_000_000, description="longest prompt in tokens (0: context)")
    chat_max_new_tokens: int = Field(0, ge=0, le=10_000_000, description="largest max_tokens (0: context)")
    max_new_tokens: int = Field(0, ge=0, le=10_000_000, description="max_tokens when a request sends none "
                                "(0: the model's generation_config.json max_new_tokens, else 512)")

    @model_validator(mode="after")
    def _aliases(self) -> "TextSettings":
        given = self.model_fields_set
        slots = self.max_user_slots
        if "chat_batch_max_size" in given and self.chat_batch_max_size:
            if "max_user_slots" in given and slots != self.chat_batch_max_size:
                raise ValueError(f"CHAT_BATCH_MAX_SIZE={self.chat_batch_max_size} and MAX_USER_SLOTS={slots} "
                                 "name the same limit; set one of them")
            slots = self.chat_batch_max_size
        if not self.enable_chat_batching:
            if slots > 1 and ("max_user_slots" in given or "chat_batch_max_size" in given):
                raise ValueError(f"ENABLE_CHAT_BATCHING=0 means one user at a time, but {slots} slots "
                                 "are asked (MAX_USER_SLOTS / CHAT_BATCH_MAX_SIZE); set one of them")
            slots = 1
        self.max_user_slots = slots
        if self.chat_max_new_tokens and self.max_new_tokens > self.chat_max_new_tokens:
            raise ValueError(f"MAX_NEW_TOKENS={self.max_new_tokens} exceeds CHAT_MAX_NEW_TOKENS="
                             f"{self.chat_max_new_tokens}")
        return self

    def model_path(self) -> str:
        return self.text_model_path or self.model_weights_path or default_model_path()


def _is_llama(model_path: str) -> bool:
    """Whether the checkpoint is one TEXT_BACKEND=llama implements (config.json, no model load)."""
    from media_server.runners.text_backend_llama import supports

    try:
        with open(os.path.join(model_path, "config.json"), encoding="utf-8") as handle:
            return supports(json.load(handle))
    except (OSError, ValueError):
        return False


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
        if text.text_backend != "mock":
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
        elif text.text_backend == "hf" or (text.text_backend == "auto" and not _is_llama(text.model_path())):
            from media_server.runners.text_backend_hf import HfSlotBackend

            backend = HfSlotBackend(text.model_path(), threads=text.text_torch_threads)
        else:
            from media_server.runners.text_backend_llama import LlamaSlotBackend

            backend = LlamaSlotBackend(text.model_path(), threads=text.text_torch_threads,
                                       max_rows=text.max_user_slots)
        if text.text_max_model_len:
            backend.max_model_len = min(backend.max_model_len, text.text_max_model_len)
        self.engine = SlotEngine(backend, max_slots=text.max_user_slots,
                                 prefill_chunk=text.text_prefill_chunk,
                                 max_prompt_tokens=text.chat_max_prompt_tokens,
                                 max_new_tokens=text.chat_max_new_tokens,
                                 default_max_tokens=text.max_new_tokens or generation_default_max_tokens(
                                     None if text.text_backend == "mock" else text.model_path()))
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
