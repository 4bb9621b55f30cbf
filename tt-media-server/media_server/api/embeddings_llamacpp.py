"""llama.cpp-style ``POST /embedding`` and ``POST /embeddings`` (its non-OpenAI embedding routes).

Request: ``content`` (a string or a list of strings; ``input`` accepted too), ``embd_normalize``
(-1 none, 0 max-absolute scaled to int16 range, 1 taxicab, 2 Euclidean (default), >2 p-norm),
``model``. Response: ``[{"index": i, "embedding": [[...]]}]``, one item per input, each embedding
the pooled vector inside a one-element list, as llama.cpp answers for pooled models. The texts go
through the same cache and micro-batcher as ``/v1/embeddings``; a model whose vectors are already
unit length (a Normalize module) gives the same vector for 2 and -1.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from media_server.api.common import check_text_chars, one_of, run_request, scheduler_of
from media_server.api.embeddings import KIND, _batcher
from media_server.auth import require_api_key
from media_server.embeddings.encoding import EmbeddingInputError, parse_input
from media_server.errors import BadInput

router = APIRouter(dependencies=[Depends(require_api_key)], tags=["embeddings"])


class LlamaCppEmbeddingRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: Any = Field(None, description="a string or a list of strings")
    input: Any = Field(None, description="the same as content")
    embd_normalize: int = Field(2, ge=-1, le=64, description="-1 none, 0 max-abs int16, 1 taxicab, 2 L2, >2 p-norm")
    model: str | None = Field(None, max_length=200)


def normalize(vector: np.ndarray, mode: int) -> list[float]:
    """llama.cpp's embd_normalize applied to one vector."""
    vector = np.asarray(vector, dtype=np.float64)
    if mode < 0:
        scale = 1.0
    elif mode == 0:
        peak = float(np.max(np.abs(vector)))
        scale = 32760.0 / peak if peak else 1.0
    else:
        norm = float(np.sum(np.abs(vector) ** mode) ** (1.0 / mode))
        scale = 1.0 / norm if norm else 1.0
    return (vector * scale).astype(np.float32).tolist()


@router.post("/embedding")
@router.post("/embeddings")
async def llamacpp_embedding(request: Request, body: LlamaCppEmbeddingRequest) -> JSONResponse:
    """Embed ``content``; llama.cpp's response shape."""
    try:
        texts = parse_input(one_of("content", body.content, "input", body.input))
    except EmbeddingInputError as error:
        raise BadInput(str(error).replace("input", "content", 1)) from None
    check_text_chars(request, "content", texts)
    pool = scheduler_of(request).pool(body.model, KIND)
    results = await run_request(request, _batcher(request.app).embed(pool.model_id, texts))
    return JSONResponse([{"index": index, "embedding": [normalize(result.vector, body.embd_normalize)]}
                         for index, result in enumerate(results)])
