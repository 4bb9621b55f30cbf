"""A Qwen-VL chat model on CPU with transformers: the model's own chat template and image processor.

Why not ``AutoProcessor``: the Qwen-VL processors insist on their video processor, which needs
torchvision (absent from this venv). The image half is what a chat request uses, and it is done
the processor's way: the chat template renders each image part as
``<|vision_start|><|image_pad|><|vision_end|>``; the image processor (Qwen2-VL's PIL one, the
checkpoint's ``preprocessor_config.json``) turns each image into patches and a (t, h, w) grid;
each ``<|image_pad|>`` is expanded to ``t*h*w / merge_size**2`` copies, the tokens the vision
tower's merged patches fill. So ``prompt_tokens`` counts the image tokens the model really reads.

Generation runs ``model.generate`` in a thread with a streamer: tokens come out as decoded, and a
cancelled request stops the generation before its next token.
"""
from __future__ import annotations

import dataclasses
import io
import queue
import threading
from pathlib import Path
from typing import Any, Iterator

IMAGE_PAD = "<|image_pad|>"


class VisionInputError(ValueError):
    """A request the model cannot take (HTTP 400); the message names the field."""


@dataclasses.dataclass
class Prepared:
    """A rendered prompt: model inputs and what they hold."""

    inputs: dict[str, Any]
    prompt_tokens: int
    image_tokens: list[int]  # per image, in order


def _chat_template(path: Path, tokenizer) -> str:
    for name in ("chat_template.jinja", "chat_template.json"):
        file = path / name
        if file.is_file():
            text = file.read_text()
            if name.endswith(".json"):
                import json

                text = json.loads(text)["chat_template"]
            return text
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.chat_template
    raise FileNotFoundError(f"{path}: no chat template (chat_template.jinja, chat_template.json or the tokenizer's)")


class VisionChatModel:
    """Loaded model, tokenizer, image processor and chat template of one checkpoint directory."""

    def __init__(self, path: Path, threads: int = 0, device: str = "cpu"):
        import torch
        from transformers import AutoModelForImageTextToText, AutoTokenizer
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        if threads:
            torch.set_num_threads(threads)
        self.path = path
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.image_processor = Qwen2VLImageProcessorPil.from_pretrained(str(path))
        self.chat_template = _chat_template(path, self.tokenizer)
        self.device = device
        dtype = torch.float32 if device == "cpu" else torch.bfloat16
        self.model = AutoModelForImageTextToText.from_pretrained(str(path), dtype=dtype).to(device).eval()
        self.image_token_id = self.tokenizer.convert_tokens_to_ids(IMAGE_PAD)
        config = self.model.config
        text_config = getattr(config, "text_config", config)
        self.max_model_len = int(getattr(text_config, "max_position_embeddings", 4096))
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])

    def prepare(self, messages: list[dict[str, Any]], images: list[bytes]) -> Prepared:
        """Render messages whose content parts are {"type": "text"} / {"type": "image"}; images in part order."""
        from PIL import Image

        pictures = []
        for index, data in enumerate(images):
            try:
                with Image.open(io.BytesIO(data)) as opened:
                    pictures.append(opened.convert("RGB"))
            except Exception as exc:  # noqa: BLE001 - an undecodable image is the client's to fix
                raise VisionInputError(f"image {index}: not a decodable image ({type(exc).__name__})") from None
        text = self.tokenizer.apply_chat_template(messages, chat_template=self.chat_template, tokenize=False,
                                                  add_generation_prompt=True)
        if text.count(IMAGE_PAD) != len(pictures):
            raise VisionInputError(f"messages: the chat template placed {text.count(IMAGE_PAD)} image(s) "
                                   f"for {len(pictures)} image part(s)")
        inputs: dict[str, Any] = {}
        per_image: list[int] = []
        if pictures:
            processed = self.image_processor(images=pictures, return_tensors="pt")
            merge = int(self.image_processor.merge_size) ** 2
            per_image = [int(grid.prod()) // merge for grid in processed["image_grid_thw"]]
            pieces = text.split(IMAGE_PAD)
            text = pieces[0] + "".join(IMAGE_PAD * count + piece for count, piece in zip(per_image, pieces[1:]))
            inputs.update({"pixel_values": processed["pixel_values"], "image_grid_thw": processed["image_grid_thw"]})
        encoded = self.tokenizer(text, return_tensors="pt", add_special_tokens=False)
        inputs.update({"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]})
        return Prepared(inputs, int(encoded["input_ids"].shape[1]), per_image)

    def generate(self, prepared: Prepared, max_tokens: int, temperature: float, top_p: float,
                 top_k: int | None, seed: int | None, ignore_eos: bool, cancelled: threading.Event
                 ) -> Iterator[list[int]]:
        """Yields the new token ids as they come (usually one per step)."""
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList
        from transformers.generation.streamers import BaseStreamer

        tokens: queue.Queue = queue.Queue()
        done = object()

        class Streamer(BaseStreamer):
            first = True

            def put(self, value):
                if self.first:  # the prompt comes through first
                    self.first = False
                    return
                tokens.put(value.reshape(-1).tolist())

            def end(self):
                tokens.put(done)

        class StopWhenCancelled(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):
                return torch.full((input_ids.shape[0],), cancelled.is_set(), dtype=torch.bool)

        sampling = temperature > 1e-5
        kwargs: dict[str, Any] = {"max_new_tokens": max_tokens, "do_sample": sampling, "streamer": Streamer(),
                                  "stopping_criteria": StoppingCriteriaList([StopWhenCancelled()])}
        if sampling:
            kwargs.update({"temperature": temperature, "top_p": top_p, "top_k": top_k or 0})
        if ignore_eos:
            kwargs["eos_token_id"] = None
            kwargs["min_new_tokens"] = max_tokens
        failure: list[BaseException] = []

        def run() -> None:
            try:
                if seed is not None:
                    torch.manual_seed(seed)
                inputs = {k: v.to(self.device) for k, v in prepared.inputs.items()}
                if "pixel_values" in inputs:
                    inputs["pixel_values"] = inputs["pixel_values"].to(self.model.dtype)
                with torch.inference_mode():
                    self.model.generate(**inputs, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer
                failure.append(exc)
                tokens.put(done)

        thread = threading.Thread(target=run, name="vision-generate", daemon=True)
        thread.start()
        try:
            while True:
                item = tokens.get()
                if item is done:
                    break
                yield item
        finally:
            cancelled.set()
            thread.join()
        if failure:
            raise failure[0]
