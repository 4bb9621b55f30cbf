"""The OpenAI embeddings response: input validation, `dimensions`, `encoding_format`, usage.

Why `dimensions` is refused for most models: cutting a vector short only keeps its meaning for
models trained for it (Matryoshka representation learning). A model declares the sizes it can be
cut to; any other size is a 400, never a silently degraded vector. A cut vector is re-normalised
when the model's vectors are normalised.

`encoding_format=base64` is the little-endian float32 bytes of the vector, base64-encoded, as
OpenAI's SDKs decode it (`numpy.frombuffer(base64.b64decode(s), dtype="<f4")`).

The body is rendered with orjson straight from the float32 vectors (`response_json`): each number is
the shortest text that reads back as the same float32, so the client gets the very vector the model
made in about half the bytes of Python's float64 repr, and the API process spends 0.02 ms per
384-float vector instead of 0.45 ms (`json.dumps` of `tolist()`), a quarter of its cost per
single-text request (benchmarks/embeddings_served_vs_direct.py).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

ENCODING_FORMATS = ("float", "base64")
MAX_INPUTS = 2048


class EmbeddingInputError(ValueError):
    """A request the client must fix (HTTP 400); the message names the field."""


@dataclass(frozen=True)
class EmbeddingModelInfo:
    """What the server knows of a loaded embedding model."""

    name: str
    dimension: int
    normalized: bool = True
    truncatable_to: tuple[int, ...] = ()
    max_input_chars: int = 100_000
    query_prompt: str = ""      # the model card's prefix for a search query (rerank's query)
    document_prompt: str = ""   # the model card's prefix for a searched document (rerank's documents)
    max_tokens: int = 0         # the model's context in tokens (longer inputs are truncated); 0: unknown


def parse_input(value: Any) -> list[str]:
    """OpenAI's `input`: a string or a list of strings (token-id lists are refused: no shared tokenizer)."""
    if isinstance(value, str):
        texts = [value]
    elif isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        texts = list(value)
    elif isinstance(value, list) and not value:
        raise EmbeddingInputError("input: must not be an empty list")
    else:
        raise EmbeddingInputError("input: must be a string or a list of strings")
    if len(texts) > MAX_INPUTS:
        raise EmbeddingInputError(f"input: at most {MAX_INPUTS} strings per request, got {len(texts)}")
    for index, text in enumerate(texts):
        if not text:
            raise EmbeddingInputError(f"input[{index}]: must not be empty")
    return texts


def check_options(model: EmbeddingModelInfo, encoding_format: str, dimensions: int | None,
                  texts: list[str]) -> None:
    if encoding_format not in ENCODING_FORMATS:
        raise EmbeddingInputError(f"encoding_format: must be one of {', '.join(ENCODING_FORMATS)}, "
                                  f"got {encoding_format!r}")
    if dimensions is not None and dimensions != model.dimension and dimensions not in model.truncatable_to:
        allowed = sorted({model.dimension, *model.truncatable_to})
        raise EmbeddingInputError(f"dimensions: model {model.name} gives {model.dimension}-dimensional vectors "
                                  f"and can be cut only to {allowed}; got {dimensions}")
    for index, text in enumerate(texts):
        if len(text) > model.max_input_chars:
            raise EmbeddingInputError(f"input[{index}]: {len(text)} characters is over the limit "
                                      f"{model.max_input_chars}")


def resize(vector: np.ndarray, dimensions: int | None, normalized: bool) -> np.ndarray:
    """The vector cut to `dimensions` (re-normalised when the model's vectors are unit length)."""
    if dimensions is None or dimensions >= len(vector):
        return vector
    cut = vector[:dimensions]
    if normalized:
        norm = float(np.linalg.norm(cut))
        if norm > 0:
            cut = cut / norm
    return cut.astype(np.float32)


def encode_vector(vector: np.ndarray, encoding_format: str) -> np.ndarray | str:
    """The vector as the response carries it: base64 text, or a contiguous float32 array (orjson
    writes it as JSON numbers in `response_json`)."""
    if encoding_format == "base64":
        return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return np.ascontiguousarray(vector, dtype=np.float32)


def decode_base64_vector(text: str) -> np.ndarray:
    """The inverse of `encode_vector(..., "base64")` (for clients and tests)."""
    return np.frombuffer(base64.b64decode(text), dtype="<f4")


def response_body(model: str, vectors: list[np.ndarray], token_counts: list[int], encoding_format: str) -> dict:
    """OpenAI's embeddings response; usage counts the tokens the model's tokenizer produced per input."""
    tokens = int(sum(token_counts))
    return {"object": "list", "model": model,
            "data": [{"object": "embedding", "index": index, "embedding": encode_vector(vector, encoding_format)}
                     for index, vector in enumerate(vectors)],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def response_json(body: dict) -> bytes:
    """`response_body` as JSON bytes: float32 arrays as the shortest numbers that read back exactly."""
    return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
