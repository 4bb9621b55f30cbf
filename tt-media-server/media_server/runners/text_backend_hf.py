"""The transformers backend of the slot loop: one batched KV cache for the decoding users.

Layout: the decoding users share one ``DynamicCache`` whose rows are users, left-padded to a
common length, with a 0/1 attention mask over the cache columns and each row's own next
position id. So one forward pass of batch B advances every user by one token.

- A newcomer is prefilled alone (batch 1, its own cache), in chunks the engine sizes, so the
  running users' decode steps are not stalled behind a long prompt; when its prompt is done it
  ``join``s: the shorter of (batch cache, its cache) is left-padded and the rows concatenated.
- A user that finishes or is cancelled is ``remove``d at once (its row dropped), and columns
  that are padding for every remaining row are trimmed, so the cache never carries a departed
  user's length.

Padding is masked out of attention and gets no position id, so each user's logits equal those
of an unbatched run up to floating-point summation order.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

log = logging.getLogger("media_server.text")


@dataclasses.dataclass
class HfSequence:
    """A user being prefilled: its own batch-1 cache and how many prompt tokens it holds."""

    cache: Any
    length: int = 0


class HfSlotBackend:
    """SmolLM2-class causal LMs on CPU (any transformers decoder-only model with a KV cache)."""

    name = "hf"

    def __init__(self, model_path: str, threads: int = 0, dtype: str = "float32"):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads > 0:
            torch.set_num_threads(threads)
        self._torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model = AutoModelForCausalLM.from_pretrained(
            model_path, dtype=getattr(torch, dtype), attn_implementation="sdpa").eval()
        config = self.model.config
        self.max_model_len = int(getattr(config, "max_position_embeddings", 2048))
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = config.eos_token_id
        self.eos_token_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        self._cache: Any = None       # DynamicCache of the decoding rows
        self._mask = None             # [B, L] long: 1 = real token column, 0 = padding
        self._positions = None        # [B] long: next position id of each row
        log.info("text backend hf: %s (%s, %d threads)", os.path.basename(model_path), dtype,
                 torch.get_num_threads())

    # ---- tokenizer -------------------------------------------------------------------------
    def encode_prompt(self, prompt: str) -> list[int]:
        return list(self.tokenizer(prompt, add_special_tokens=True)["input_ids"])

    def encode_chat(self, messages: list[dict]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return list(ids)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    # ---- prefill -----------------------------------------------------------------------------
    def start_sequence(self) -> HfSequence:
        from transformers import DynamicCache

        return HfSequence(cache=DynamicCache(config=self.model.config))

    def prefill(self, sequence: HfSequence, token_ids: list[int]):
        """Append a chunk of prompt tokens; returns the logits after its last token ([V])."""
        torch = self._torch
        ids = torch.tensor([token_ids], dtype=torch.long)
        positions = torch.arange(sequence.length, sequence.length + len(token_ids)).unsqueeze(0)
        with torch.inference_mode():
            out = self.model(input_ids=ids, position_ids=positions, past_key_values=sequence.cache,
                             use_cache=True, logits_to_keep=1)
        sequence.length += len(token_ids)
        return out.logits[0, -1].float()

    def join(self, sequence: HfSequence) -> None:
        """Make a prefilled sequence the last row of the decode batch."""
        torch = self._torch
        new_layers = [(layer.keys, layer.values) for layer in sequence.cache.layers]
        new_mask = torch.ones(1, sequence.length, dtype=torch.long)
        new_pos = torch.tensor([sequence.length], dtype=torch.long)
        if self._cache is None:
            self._set_batch(new_layers, new_mask, new_pos)
            return
        old_layers = [(layer.keys, layer.values) for layer in self._cache.layers]
        old_len, new_len = self._mask.shape[1], new_mask.shape[1]
        width = max(old_len, new_len)
        layers = []
        for (ok, ov), (nk, nv) in zip(old_layers, new_layers):
            layers.append((torch.cat([_left_pad(ok, width), _left_pad(nk, width)], dim=0),
                           torch.cat([_left_pad(ov, width), _left_pad(nv, width)], dim=0)))
        mask = torch.cat([_left_pad_2d(self._mask, width), _left_pad_2d(new_mask, width)], dim=0)
        self._set_batch(layers, mask, torch.cat([self._positions, new_pos]))

    # ---- decode ------------------------------------------------------------------------------
    def decode_step(self, last_tokens: list[int]):
        """One token for every decoding row; returns logits [B, V] in row order."""
        torch = self._torch
        ids = torch.tensor(last_tokens, dtype=torch.long).unsqueeze(1)
        mask = torch.cat([self._mask, torch.ones(len(last_tokens), 1, dtype=torch.long)], dim=1)
        with torch.inference_mode():
            out = self.model(input_ids=ids, attention_mask=mask,
                             position_ids=self._positions.unsqueeze(1),
                             past_key_values=self._cache, use_cache=True)
        self._mask = mask
        self._positions = self._positions + 1
        return out.logits[:, -1].float()

    def remove(self, rows: list[int]) -> None:
        """Drop rows (finished or cancelled users) and trim all-padding columns."""
        if not rows or self._cache is None:
            return
        torch = self._torch
        gone = set(rows)
        keep = [i for i in range(self._mask.shape[0]) if i not in gone]
        if not keep:
            self._cache = self._mask = self._positions = None
            return
        index = torch.tensor(keep, dtype=torch.long)
        mask = self._mask.index_select(0, index)
        real_columns = mask.any(dim=0).nonzero()
        start = int(real_columns[0]) if len(real_columns) else 0
        layers = [(layer.keys.index_select(0, index)[:, :, start:],
                   layer.values.index_select(0, index)[:, :, start:]) for layer in self._cache.layers]
        self._set_batch(layers, mask[:, start:], self._positions.index_select(0, index))

    def _set_batch(self, layers, mask, positions) -> None:
        from transformers import DynamicCache

        self._cache = DynamicCache(ddp_cache_data=[(k.contiguous(), v.contiguous()) for k, v in layers],
                                   config=self.model.config)
        self._mask = mask
        self._positions = positions

    @property
    def rows(self) -> int:
        return 0 if self._mask is None else int(self._mask.shape[0])

    def close(self) -> None:
        self._cache = self._mask = self._positions = None


def _left_pad(tensor, width: int):
    """[B, H, L, D] -> [B, H, width, D] with zeros on the left."""
    import torch

    missing = width - tensor.shape[2]
    if missing <= 0:
        return tensor
    pad = torch.zeros(tensor.shape[0], tensor.shape[1], missing, tensor.shape[3], dtype=tensor.dtype)
    return torch.cat([pad, tensor], dim=2)


def _left_pad_2d(mask, width: int):
    import torch

    missing = width - mask.shape[1]
    if missing <= 0:
        return mask
    return torch.cat([torch.zeros(mask.shape[0], missing, dtype=mask.dtype), mask], dim=1)
