"""The unpadded layout of the embedding ONNX graph: a micro-batch's texts as one column of tokens.

Why: on the 2-core host a session call costs about 2.5 ms whatever it holds (every weight matrix
streams through the cache once per call), and in a padded call a pad token costs what a real one
does; so a padded micro-batch of 9 mixed-length texts is either mostly padding or split into about
4 calls (`onnx_backend.padded_groups`). Here every weight MatMul, LayerNorm and GELU runs on the
real tokens only, concatenated (tokens x hidden). Only attention, which mixes the tokens of one
text, gathers them into a padded (texts x longest) block and scatters the result back; the pooling
is one (texts x tokens) matrix product. Measured at micro-batches of 9 of the benchmark's
sentences, one thread, int8: 1.15x the texts/s of the padded layout (168 against 145, 8
alternating rounds), with the same vectors (fp32: cosine 0.9999998 to sentence-transformers;
int8: a text alone and in a batch differ by 6e-8).

BERT-family encoders only (config.model_type "bert", absolute positions): the graph is rebuilt
from the model's own submodules, so `onnx_backend` checks it against the model's own forward on
sample texts before exporting it and refuses the export when they differ. Other directories are
exported padded.

Graph inputs (T tokens of k texts, the longest L tokens):
    input_ids, position_ids   (T,)   int64: the texts' tokens one after another; positions restart at 0
    gather_index              (k, L) int64: row i holds text i's token positions in T, then T (a zero row)
    key_bias                  (k, L) float: 0 for a text's tokens, -1e30 for its padding
    scatter_index             (T,)   int64: each token's place in the (k * L) attention block
    pooling                   (k, T) float: text i's weights over the tokens (1/len for mean, 1 on its first for CLS)
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from media_server.embeddings.call_split import cheapest_split

INPUTS = ("input_ids", "position_ids", "gather_index", "key_bias", "scatter_index", "pooling")
MASKED = -1e30  # a padded key's bias: exp() of it is exactly 0 in float32
BATCH_TOKENS = 4096  # most tokens in one session call
MAX_TEXTS = 256  # most texts in one session call (bounds the grouping's search)
CALL_COST_TOKENS = 8  # a session call's fixed cost, in tokens' worth of weight MatMuls
# Attention per text costs layers * 2 * L^2 * hidden multiply-adds, a token's weight MatMuls
# layers * (4 * hidden^2 + 2 * hidden * intermediate): for MiniLM (384, 1536) one token's worth is
# an L^2 of about 1150, and fp32 attention runs at about half the int8 speed: 576. Measured against
# never splitting for attention (micro-batches of 9 and 16, 10 alternating rounds): 172 against 168
# and 168 against 154 texts/s.
ATTENTION_SQUARE_PER_TOKEN = 576


def supported(model_dir: Path) -> bool:
    """Whether the directory's transformer is one this module can rebuild (BERT, absolute positions)."""
    config = json.loads((model_dir / "config.json").read_text())
    return (config.get("model_type") == "bert" and config.get("position_embedding_type", "absolute") == "absolute"
            and not config.get("is_decoder", False))


def graph(model, mode: str, normalise: bool):
    """A torch module over `model`'s own weights with the INPUTS above, returning sentence vectors."""
    import torch

    config = model.config
    hidden, heads = config.hidden_size, config.num_attention_heads
    head_size = hidden // heads

    class UnpaddedSentenceGraph(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, position_ids, gather_index, key_bias, scatter_index, pooling):
            embeddings = self.model.embeddings
            x = (embeddings.word_embeddings(input_ids) + embeddings.position_embeddings(position_ids)
                 + embeddings.token_type_embeddings.weight[0])
            x = embeddings.LayerNorm(x)  # (T, hidden)
            texts, longest = gather_index.shape
            bias = key_bias[:, None, None, :]

            def per_text(tokens):  # (T, hidden) -> (texts, heads, longest, head_size); padding rows zero
                block = torch.cat([tokens, torch.zeros_like(tokens[:1])], 0)[gather_index]
                return block.view(texts, longest, heads, head_size).transpose(1, 2)

            for layer in self.model.encoder.layer:
                attention = layer.attention
                query = per_text(attention.self.query(x))
                key = per_text(attention.self.key(x))
                value = per_text(attention.self.value(x))
                probs = torch.softmax(query @ key.transpose(-1, -2) / math.sqrt(head_size) + bias, dim=-1)
                context = (probs @ value).transpose(1, 2).reshape(texts * longest, hidden)[scatter_index]
                x = attention.output.LayerNorm(attention.output.dense(context) + x)
                x = layer.output.LayerNorm(layer.output.dense(layer.intermediate.intermediate_act_fn(
                    layer.intermediate.dense(x))) + x)
            vectors = pooling @ x
            return torch.nn.functional.normalize(vectors, p=2, dim=1) if normalise else vectors

    return UnpaddedSentenceGraph()


def feeds(token_ids: list[list[int]], mode: str) -> dict[str, np.ndarray]:
    """The graph's inputs for these texts' token ids (one session call)."""
    lengths = [len(ids) for ids in token_ids]
    total, longest, count = sum(lengths), max(lengths), len(lengths)
    gather_index = np.full((count, longest), total, dtype=np.int64)
    key_bias = np.full((count, longest), MASKED, dtype=np.float32)
    scatter_index = np.empty(total, dtype=np.int64)
    pooling = np.zeros((count, total), dtype=np.float32)
    position_ids = np.empty(total, dtype=np.int64)
    start = 0
    for row, length in enumerate(lengths):
        gather_index[row, :length] = np.arange(start, start + length)
        key_bias[row, :length] = 0.0
        scatter_index[start:start + length] = row * longest + np.arange(length)
        position_ids[start:start + length] = np.arange(length)
        if mode == "cls":
            pooling[row, start] = 1.0
        else:
            pooling[row, start:start + length] = 1.0 / length
        start += length
    input_ids = np.fromiter((token for ids in token_ids for token in ids), dtype=np.int64, count=total)
    return {"input_ids": input_ids, "position_ids": position_ids, "gather_index": gather_index,
            "key_bias": key_bias, "scatter_index": scatter_index, "pooling": pooling}


def groups(lengths: list[int]) -> list[tuple[int, int]]:
    """The cheapest split of ascending token counts into session calls, as (start, end).

    Cost of a call: CALL_COST_TOKENS + its real tokens + its attention block (texts x longest^2,
    in tokens' worth). Padding no longer costs weight MatMuls, so a micro-batch of short texts is
    one call; a long text among short ones goes alone when its attention block would cost more
    than a call. Exact over contiguous groups of the sorted lengths; at most BATCH_TOKENS tokens and
    MAX_TEXTS texts a call (a single longer text still goes, alone).
    """
    prefix = [0]
    for length in lengths:
        prefix.append(prefix[-1] + length)

    def call_cost(start: int, end: int) -> float | None:
        texts, tokens = end - start, prefix[end] - prefix[start]
        if texts > 1 and (tokens > BATCH_TOKENS or texts > MAX_TEXTS):
            return None
        return CALL_COST_TOKENS + tokens + texts * lengths[end - 1] ** 2 / ATTENTION_SQUARE_PER_TOKEN

    return cheapest_split(len(lengths), call_cost)
