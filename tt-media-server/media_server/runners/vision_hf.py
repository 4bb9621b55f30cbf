"""Vision chat (kind ``text``): Qwen3-VL / Qwen2.5-VL checkpoints with transformers on CPU.

Served by ``/v1/chat/completions`` like the text runner; a request may carry images (``image_url``
parts, decoded or fetched by the route, sent here as bytes). One request runs at a time per worker
(``capacity() == 1``): generation streams token by token, but vision requests are not batched
together, as the documented server's ``CHAT_BATCH_ALLOW_VISION=0``.

Runners: ``vision-hf`` (the checkpoint in ``VISION_MODEL_PATH`` / ``MODEL_WEIGHTS_PATH``),
``tiny-random-qwen3-vl`` (the FAKE built by ``vision/tiny_model.py``: random weights, real
architecture; ``MODEL_WEIGHTS_PATH=tiny-random`` builds it into the project cache on first use),
and the documented Qwen3-VL models (``qwen3-vl-2b`` ...), found in the HF cache or downloaded.

Payload: ``TextRequest.to_dict()`` plus ``vision_messages`` (content parts ``{"type": "text"}`` /
``{"type": "image"}``) and ``images`` (bytes, in part order). Done data: ``finish_reason``,
``prompt_tokens`` (image tokens included), ``completion_tokens``, ``image_tokens``, ``images``.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, ClassVar, Iterator

from media_server.devices import model_device
from media_server.runners.base import GeneratorStreamingRunner, RunnerUnavailable, StreamItemError
from media_server.runners.model_files import ModelSource, resolve_model_dir
from media_server.runners.text_params import InvalidTextRequest, TextRequest
from media_server.vision.settings import vision_settings

TINY_RANDOM = "tiny-random"
QWEN_VL_FILES = ("config.json", "*.safetensors", "tokenizer*", "preprocessor_config.json")
DEFAULT_MAX_TOKENS = 256


def tiny_model_dir() -> Path:
    import os

    root = os.environ.get("TT_INFERENCE_CACHE") or os.path.expanduser("~/.cache/tt-inference-server")
    return Path(root) / "models" / "tiny-random-qwen3-vl"


class VisionHfRunner(GeneratorStreamingRunner):
    """A Qwen-VL checkpoint directory given by VISION_MODEL_PATH or MODEL_WEIGHTS_PATH."""

    uses_model_device = True

    name: ClassVar[str] = "vision-hf"
    kind: ClassVar[str] = "text"
    model_id: ClassVar[str] = "vision-model"
    takes_images: ClassVar[bool] = True
    source: ClassVar[ModelSource | None] = None

    @classmethod
    def served_id(cls) -> str:
        return vision_settings().vision_model_id or cls.model_id

    @classmethod
    def checkpoint_dir(cls, settings) -> Path:
        given = vision_settings().vision_model_path or settings.model_weights_path
        if given == TINY_RANDOM:
            return cls._tiny_random()
        if cls.source is not None:
            return resolve_model_dir(cls.source, given)
        if not given:
            raise RunnerUnavailable(f"{cls.name}: set VISION_MODEL_PATH (or MODEL_WEIGHTS_PATH) to a Qwen-VL "
                                    "checkpoint directory")
        return resolve_model_dir(ModelSource(cls.served_id(), given, "local", QWEN_VL_FILES), given)

    @classmethod
    def _tiny_random(cls) -> Path:
        path = tiny_model_dir()
        if not (path / "tt_fake_model.json").is_file():
            from media_server.vision.tiny_model import build

            build(path)
        return path

    @classmethod
    def preflight(cls, settings) -> None:
        import importlib.util

        if importlib.util.find_spec("transformers") is None:
            raise RunnerUnavailable(f"{cls.name}: transformers is not installed in this venv")
        given = vision_settings().vision_model_path or settings.model_weights_path
        if given != TINY_RANDOM:  # the fake is built by the worker on first load
            cls.checkpoint_dir(settings)

    @classmethod
    def model_card(cls, model_id: str) -> dict[str, Any]:
        card: dict[str, Any] = {"modalities": ["text", "image"], "device": model_device().label}
        if cls.source is not None:
            card.update({"hf_repo": cls.source.repo, "revision": cls.source.revision})
        return card

    def capacity(self) -> int:
        return 1

    def load(self) -> None:
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from media_server.vision.chat_model import VisionChatModel

        threads = vision_settings().vision_torch_threads or self.settings.cpu_threads_per_worker
        self.chat = VisionChatModel(self.checkpoint_dir(self.settings), threads=threads,
                                    device=model_device().label)
        if self.settings.enable_warmup:
            warm = self.chat.prepare([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], [])
            for _ in self.chat.generate(warm, 2, 0.0, 1.0, None, 0, False, threading.Event()):
                pass

    def start(self, payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Chunks {"text", "tokens"}; returns the summary (see the module docstring)."""
        try:
            request = TextRequest.from_dict(payload)
            messages = payload.get("vision_messages") or [
                {"role": m["role"], "content": [{"type": "text", "text": m["content"]}]}
                for m in request.messages or []]
            images = list(payload.get("images") or [])
            from media_server.vision.chat_model import VisionInputError

            prepared = self.chat.prepare(messages, images)
        except (InvalidTextRequest, VisionInputError) as exc:
            raise StreamItemError(400, str(exc)) from None
        room = self.chat.max_model_len - prepared.prompt_tokens
        max_tokens = request.max_tokens or min(DEFAULT_MAX_TOKENS, room)
        if room < 1 or max_tokens > room:
            raise StreamItemError(400, f"messages: the prompt is {prepared.prompt_tokens} tokens (images included)"
                                       f" and max_tokens {max_tokens}; the context is {self.chat.max_model_len}")
        cancelled = threading.Event()
        ids: list[int] = []
        sent = ""
        finish = "length"
        try:
            for new in self.chat.generate(prepared, max_tokens, request.temperature, request.top_p, request.top_k,
                                          request.seed, request.ignore_eos, cancelled):
                if not request.ignore_eos and any(t in self.chat.eos_ids for t in new):
                    new = new[:next(i for i, t in enumerate(new) if t in self.chat.eos_ids)]
                    finish = "stop"
                ids.extend(new)
                text = self.chat.tokenizer.decode(ids, skip_special_tokens=True)
                cut = min((text.find(s) for s in request.stop if s in text), default=-1)
                if cut >= 0:
                    text, finish = text[:cut], "stop"
                delta = text[len(sent):] if not text.endswith("\ufffd") else ""
                if delta:
                    sent += delta
                    yield {"text": delta, "tokens": len(new)}
                if finish == "stop":
                    cancelled.set()
                    break
        finally:
            cancelled.set()
        return {"finish_reason": finish, "prompt_tokens": prepared.prompt_tokens, "completion_tokens": len(ids),
                "image_tokens": sum(prepared.image_tokens), "images": len(images), "text": ""}


class TinyRandomQwen3VlRunner(VisionHfRunner):
    """FAKE: random-weight Qwen3-VL (vision/tiny_model.py), built on first use; for plumbing tests only."""

    name: ClassVar[str] = "tiny-random-qwen3-vl"
    model_id: ClassVar[str] = "tiny-random-qwen3-vl"

    @classmethod
    def checkpoint_dir(cls, settings) -> Path:
        given = vision_settings().vision_model_path or settings.model_weights_path
        if given and given != TINY_RANDOM:
            return resolve_model_dir(ModelSource(cls.served_id(), given, "local", QWEN_VL_FILES), given)
        return cls._tiny_random()

    @classmethod
    def preflight(cls, settings) -> None:
        import importlib.util

        if importlib.util.find_spec("transformers") is None:
            raise RunnerUnavailable(f"{cls.name}: transformers is not installed in this venv")

    @classmethod
    def model_card(cls, model_id: str) -> dict[str, Any]:
        return {"modalities": ["text", "image"], "device": model_device().label,
                "fake": "random weights (tiny Qwen3-VL)"}
