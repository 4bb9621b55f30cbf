"""The slot loop's own Llama-family forward on a static KV cache (``TEXT_BACKEND=llama``).

Why not the transformers forward (``text_backend_hf``): profiling the loop at 8 users on a
1-thread CPU worker showed the matrix products at ~76% of a decode step and the same kernels in
``model.generate()``; what this module removes is the rest of the step:

- the KV cache is preallocated (``StaticKV``: ``[slots, kv_heads, capacity, head_dim]`` per
  layer), each decode step writes one column per row in place instead of concatenating every
  layer's cache; the capacity grows in ``GROW`` columns up to the context and shrinks back when
  the batch empties, so memory is bounded by slots x context and held only as far as used;
- each row's tokens sit at columns ``[0, length)``: no left padding, no mask rebuilt from a
  growing 0/1 tensor, positions are the row's length;
- q/k/v and gate/up are one matrix product each (weights concatenated once at load);
- the decode attention (one query per row, grouped heads) is two small batched products and
  a softmax instead of the general SDPA kernel;
- newcomers arriving together are prefilled in ONE forward (``prefill_many``), right-padded,
  instead of one forward per prompt (each forward reads every weight once).

The weights are the transformers model's own tensors (no copy but the concatenations), so the
logits equal ``model.generate``'s up to floating-point summation order; the equality of greedy
output is tested (tests/tt_media_server/test_text_model.py). Llama-family checkpoints only
(``model_type`` llama: SmolLM2, Llama 3.x — the rotary frequencies, scaling included, come from
the model's own rotary module); others are refused at load with one line.
"""
from __future__ import annotations

import dataclasses
import logging

from media_server.runners.text_backend_hf import HfSlotBackend

log = logging.getLogger("media_server.text")

SUPPORTED_MODEL_TYPES = ("llama",)
GROW = 256  # cache columns added at a time


def supports(config: dict) -> bool:
    """A Llama-family decoder without biases (what this forward implements), from config.json."""
    return (config.get("model_type") in SUPPORTED_MODEL_TYPES and not config.get("attention_bias")
            and not config.get("mlp_bias") and config.get("hidden_act", "silu") == "silu")


class UnsupportedModel(RuntimeError):
    """The checkpoint is not a Llama-family decoder this forward implements."""


@dataclasses.dataclass
class LlamaSequence:
    """A user being prefilled: its own keys/values per layer ([1, kv_heads, length, head_dim])."""

    keys: list = dataclasses.field(default_factory=list)
    values: list = dataclasses.field(default_factory=list)
    length: int = 0


class StaticKV:
    """The decode batch's cache: rows are users (row order = the engine's), columns positions."""

    def __init__(self, torch, layers: int, rows: int, kv_heads: int, head_dim: int, max_len: int):
        self._torch = torch
        self.shape = (rows, kv_heads, 0, head_dim)
        self.layers = layers
        self.max_len = max_len
        self.keys: list = []
        self.values: list = []
        self.lengths = torch.zeros(0, dtype=torch.long)   # tokens held per active row
        self.capacity = 0

    @property
    def rows(self) -> int:
        return int(self.lengths.shape[0])

    def reserve(self, columns: int) -> None:
        """Capacity for ``columns`` positions (rounded up to GROW, at most the context)."""
        if columns <= self.capacity:
            return
        torch = self._torch
        capacity = min(self.max_len, -(-columns // GROW) * GROW)
        rows, heads, _, dim = self.shape
        keep = self.capacity
        new_keys = [torch.zeros(rows, heads, capacity, dim) for _ in range(self.layers)]
        new_values = [torch.zeros(rows, heads, capacity, dim) for _ in range(self.layers)]
        for old, new in zip(self.keys + self.values, new_keys + new_values):
            new[:, :, :keep] = old[:, :, :keep]
        self.keys, self.values, self.capacity = new_keys, new_values, capacity

    def append_row(self, keys: list, values: list, length: int) -> None:
        torch = self._torch
        self.reserve(length + 1)
        row = self.rows
        for layer in range(self.layers):
            self.keys[layer][row, :, :length] = keys[layer][0]
            self.values[layer][row, :, :length] = values[layer][0]
        self.lengths = torch.cat([self.lengths, torch.tensor([length], dtype=torch.long)])

    def keep_rows(self, keep: list[int]) -> None:
        """Compact the rows in ``keep`` (in order) to the front; an empty batch frees the cache."""
        torch = self._torch
        if not keep:
            self.keys, self.values, self.capacity = [], [], 0
            self.lengths = torch.zeros(0, dtype=torch.long)
            return
        index = torch.tensor(keep, dtype=torch.long)
        used = int(self.lengths.max())
        for tensor in self.keys + self.values:
            tensor[:len(keep), :, :used] = tensor.index_select(0, index)[:, :, :used]
        self.lengths = self.lengths.index_select(0, index)


class LlamaSlotBackend(HfSlotBackend):
    """SlotBackend with the forward above; tokenizer and weights from transformers."""

    name = "llama"

    def __init__(self, model_path: str, threads: int = 0, dtype: str = "float32", max_rows: int = 8):
        super().__init__(model_path, threads=threads, dtype=dtype)
        torch = self._torch
        config = self.model.config
        if not supports(config.to_dict()):
            raise UnsupportedModel(f"TEXT_BACKEND=llama implements Llama-family decoders without biases; "
                                   f"{config.model_type} is not one (use TEXT_BACKEND=hf)")
        self.q_heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.q_heads
        self.eps = config.rms_norm_eps
        inner = self.model.model
        self.embed = inner.embed_tokens.weight
        self.lm_head = self.model.lm_head.weight
        self.final_norm = inner.norm.weight
        self.intermediate = config.intermediate_size
        self.weights = []
        for layer in inner.layers:
            attn, mlp = layer.self_attn, layer.mlp
            qkv = _fuse(torch, attn.q_proj, attn.k_proj, attn.v_proj)
            gate_up = _fuse(torch, mlp.gate_proj, mlp.up_proj)
            self.weights.append((layer.input_layernorm.weight, qkv, attn.o_proj.weight,
                                 layer.post_attention_layernorm.weight, gate_up, mlp.down_proj.weight))
        rotary = inner.rotary_emb
        with torch.inference_mode():
            positions = torch.arange(self.max_model_len, dtype=torch.float32)
            freqs = positions[:, None] * rotary.inv_freq.float()[None, :]
            angles = torch.cat([freqs, freqs], dim=-1)
            self.cos = angles.cos() * rotary.attention_scaling
            self.sin = angles.sin() * rotary.attention_scaling
        self.kv = StaticKV(torch, len(self.weights), max_rows, self.kv_heads, self.head_dim, self.max_model_len)

    # ---- prefill -----------------------------------------------------------------------------
    def start_sequence(self) -> LlamaSequence:
        return LlamaSequence()

    def prefill(self, sequence: LlamaSequence, token_ids: list[int]):
        return self.prefill_many([sequence], [token_ids])[0]

    def prefill_many(self, sequences: list[LlamaSequence], chunks: list[list[int]]) -> list:
        """Append one chunk to each sequence in one forward; each row's logits after its chunk ([V])."""
        torch = self._torch
        if len({s.length for s in sequences}) > 1 or (sequences[0].length and len(sequences) > 1):
            return [self.prefill(s, c) for s, c in zip(sequences, chunks)]  # continuing chunks: one by one
        width = max(len(c) for c in chunks)
        ids = torch.tensor([c + [0] * (width - len(c)) for c in chunks], dtype=torch.long)
        start = sequences[0].length
        positions = torch.arange(start, start + width)
        columns = torch.arange(start + width)
        mask = (columns[None, :] <= positions[:, None])[None, None]  # causal; right padding is never attended
        last = torch.tensor([len(c) - 1 for c in chunks])
        with torch.inference_mode():
            hidden = self._layers(ids, positions[None, :].expand(len(chunks), width),
                                  lambda layer, q, k, v: self._prefill_attention(sequences, layer, q, k, v, mask))
            hidden = hidden[torch.arange(len(chunks)), last]
            logits = self._logits(hidden)
        for row, (sequence, chunk) in enumerate(zip(sequences, chunks)):
            for layer in range(len(self.weights)):
                sequence.keys[layer] = sequence.keys[layer][:, :, :start + len(chunk)]
                sequence.values[layer] = sequence.values[layer][:, :, :start + len(chunk)]
            sequence.length = start + len(chunk)
        return [logits[row] for row in range(len(chunks))]

    def _prefill_attention(self, sequences, layer: int, q, k, v, mask):
        torch = self._torch
        if sequences[0].length:   # one sequence continuing: its earlier chunks first
            sequence = sequences[0]
            k = torch.cat([sequence.keys[layer], k], dim=2)
            v = torch.cat([sequence.values[layer], v], dim=2)
        for row, sequence in enumerate(sequences):
            keys, values = k[row:row + 1], v[row:row + 1]
            if layer < len(sequence.keys):
                sequence.keys[layer], sequence.values[layer] = keys, values
            else:
                sequence.keys.append(keys)
                sequence.values.append(values)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

    def join(self, sequence: LlamaSequence) -> None:
        """Make a prefilled sequence the last row of the decode batch (its cache copied in)."""
        self.kv.append_row(sequence.keys, sequence.values, sequence.length)
        sequence.keys, sequence.values = [], []

    # ---- decode ------------------------------------------------------------------------------
    def decode_step(self, last_tokens: list[int]):
        """One token for every decoding row; returns logits [B, V] in row order."""
        torch = self._torch
        kv = self.kv
        lengths = kv.lengths
        kv.reserve(int(lengths.max()) + 1)
        rows = torch.arange(len(last_tokens))
        used = int(lengths.max()) + 1
        # [B, 1, 1, used]: 0 where the row holds a token (its new one included), -inf elsewhere.
        bias = torch.zeros(len(last_tokens), used).masked_fill_(
            torch.arange(used)[None, :] > lengths[:, None], float("-inf"))[:, None, None, :]
        group = self.q_heads // self.kv_heads
        scale = self.head_dim ** -0.5

        def attend(layer, q, k, v):
            keys, values = kv.keys[layer], kv.values[layer]
            keys[rows, :, lengths] = k[:, :, 0]
            values[rows, :, lengths] = v[:, :, 0]
            batch = q.shape[0]
            q = q.reshape(batch, self.kv_heads, group, self.head_dim)
            scores = torch.matmul(q, keys[:batch, :, :used].transpose(2, 3)) * scale + bias
            out = torch.matmul(torch.softmax(scores, dim=-1), values[:batch, :, :used])
            return out.reshape(batch, self.q_heads, 1, self.head_dim)

        with torch.inference_mode():
            ids = torch.tensor(last_tokens, dtype=torch.long)[:, None]
            hidden = self._layers(ids, lengths[:, None], attend)
            logits = self._logits(hidden[:, -1])
        kv.lengths = lengths + 1
        return logits

    def remove(self, rows: list[int]) -> None:
        """Drop rows (finished or cancelled users); the others keep their order."""
        if not rows:
            return
        gone = set(rows)
        self.kv.keep_rows([i for i in range(self.kv.rows) if i not in gone])

    @property
    def rows(self) -> int:
        return self.kv.rows

    def close(self) -> None:
        self.kv.keep_rows([])

    # ---- the forward -------------------------------------------------------------------------
    def _layers(self, ids, positions, attend):
        """Embeddings through every decoder layer; ``attend(layer, q, k, v)`` stores and attends."""
        torch = self._torch
        functional = torch.nn.functional
        batch, width = ids.shape
        cos, sin = self.cos[positions][:, None], self.sin[positions][:, None]   # [B, 1, T, D]
        x = functional.embedding(ids, self.embed)
        hidden_size = x.shape[-1]
        heads = [self.q_heads, self.kv_heads, self.kv_heads]
        for layer, (w_in, w_qkv, w_out, w_post, w_gate_up, w_down) in enumerate(self.weights):
            h = functional.rms_norm(x, (hidden_size,), w_in, self.eps)
            qkv = functional.linear(h, w_qkv).view(batch, width, sum(heads), self.head_dim).transpose(1, 2)
            q, k, v = qkv.split(heads, dim=1)
            q = q * cos + _rotate_half(torch, q) * sin
            k = k * cos + _rotate_half(torch, k) * sin
            attended = attend(layer, q, k, v.contiguous())
            x = x + functional.linear(attended.transpose(1, 2).reshape(batch, width, -1), w_out)
            h = functional.rms_norm(x, (hidden_size,), w_post, self.eps)
            gate, up = functional.linear(h, w_gate_up).split(self.intermediate, dim=-1)
            x = x + functional.linear(functional.silu(gate) * up, w_down)
        return x

    def _logits(self, hidden):
        torch = self._torch
        hidden = torch.nn.functional.rms_norm(hidden, (hidden.shape[-1],), self.final_norm, self.eps)
        return torch.nn.functional.linear(hidden, self.lm_head).float()


def _fuse(torch, *linears):
    """One weight matrix for several projections of the same input; each module's weight becomes
    a view of its rows, so memory holds one copy and the transformers model still works."""
    fused = torch.cat([linear.weight.detach() for linear in linears]).contiguous()
    start = 0
    for linear in linears:
        rows = linear.weight.shape[0]
        linear.weight = torch.nn.Parameter(fused[start:start + rows], requires_grad=False)
        start += rows
    return fused


def _rotate_half(torch, x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)
