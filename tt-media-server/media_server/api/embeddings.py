"""`POST /v1/embeddings` (OpenAI-compatible): cached, de-duplicated, micro-batched.

A request's texts are answered from the (model, text) LRU when seen before, join a computation
already under way for the same text, or wait up to BATCH_WINDOW_MS for texts of other requests
and go to a worker in length-sorted batches of at most BATCH_WINDOW_MAX_SIZE (ENABLE_BATCHING=0:
each request's texts go alone). `encoding_format` float | base64, `dimensions` where the model
allows it, `input_type` (query | document: the model card's prompt for that role, e.g.
embeddinggemma's), `usage` counted by the model's tokenizer (special tokens included: what the model
processed). Prometheus: `embedding_cache_hits_total` and `embedding_cache_misses_total` (per
model; a miss is a text sent to the model), `embedding_batch_texts` (texts per micro-batch).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from media_server import metrics  # noqa: F401 - sets the multiprocess metrics directory first
from media_server.api.common import check_text_chars, run_request, scheduler_of
from media_server.auth import require_api_key
from media_server.embeddings.batcher import EmbeddingBatcher
from media_server.embeddings.cache import Embedding, EmbeddingCache
from media_server.embeddings.encoding import (EmbeddingInputError, EmbeddingModelInfo, check_options, parse_input,
                                              resize, response_body, response_json)
from media_server.embeddings.settings import embedding_settings
from media_server.errors import BadInput, UnknownModel
from prometheus_client import Counter, Histogram  # noqa: E402 - after media_server.metrics

KIND = "embedding"
CACHE_HITS = Counter("embedding_cache_hits", "Embedding texts answered without a forward pass (LRU or shared "
                     "in-flight work)", ["model"])
CACHE_MISSES = Counter("embedding_cache_misses", "Embedding texts sent to the model", ["model"])
BATCH_TEXTS = Histogram("embedding_batch_texts", "Texts per micro-batch sent to a worker (after the cache and "
                        "de-duplication)", ["model"], buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512))

router = APIRouter(dependencies=[Depends(require_api_key)], tags=["embeddings"])


class EmbeddingRequest(BaseModel):
    """OpenAI's embeddings request."""

    input: Any = Field(..., description="a string or a list of strings")
    model: str | None = Field(None, max_length=200, description="served embedding model; default: the first one")
    encoding_format: str = Field("float", description="float | base64 (little-endian float32)")
    dimensions: int | None = Field(None, ge=1, le=65536, description="vector length, where the model allows it")
    user: str | None = Field(None, max_length=500, description="accepted and ignored")
    input_type: Literal["query", "document"] | None = Field(
        None, description="what the texts are, for models whose card asks for a prompt per role "
                          "(embeddinggemma: 'task: search result | query: ' / 'title: none | text: '); "
                          "no effect on a model without such prompts")


def _batcher(app: FastAPI) -> EmbeddingBatcher:
    """The app's one batcher and cache (created on first use, inside the event loop)."""
    batcher = getattr(app.state, "embedding_batcher", None)
    if batcher is None:
        knobs = embedding_settings()
        scheduler = app.state.scheduler

        async def encode(model: str, texts: list[str]) -> list[Embedding]:
            BATCH_TEXTS.labels(model=model).observe(len(texts))
            result = await scheduler.submit(model, KIND, {"texts": texts})
            return [Embedding(vector=vector, tokens=int(tokens))
                    for vector, tokens in zip(result["vectors"], result["tokens"])]

        cache = EmbeddingCache(knobs.embedding_cache_size,
                               on_hit=lambda model, count: CACHE_HITS.labels(model=model).inc(count),
                               on_miss=lambda model, count: CACHE_MISSES.labels(model=model).inc(count))

        def ready_workers(model: str) -> int:
            try:
                return len(scheduler.pool(model, "").ready_workers())  # any kind: rerank shares the batcher
            except UnknownModel:  # cannot happen for a model a request resolved; one slot then
                return 1

        batcher = EmbeddingBatcher(encode, cache, knobs.batching, ready_workers)
        app.state.embedding_batcher = batcher
    return batcher


def _model_info(app: FastAPI, pool) -> EmbeddingModelInfo:
    """Dimension and normalisation of a served model, read once from its directory."""
    infos = getattr(app.state, "embedding_infos", None)
    if infos is None:
        infos = app.state.embedding_infos = {}
    if pool.model_id not in infos:
        infos[pool.model_id] = pool.runner_cls.model_info(pool.model_id)
    return infos[pool.model_id]


@router.post("/v1/embeddings")
async def embeddings(request: Request, body: EmbeddingRequest) -> Response:
    """Embed a string or a list of strings."""
    scheduler = scheduler_of(request)
    pool = scheduler.pool(body.model, KIND)
    info = _model_info(request.app, pool)
    try:
        texts = parse_input(body.input)
        check_options(info, body.encoding_format, body.dimensions, texts)
    except EmbeddingInputError as error:
        raise BadInput(str(error)) from None
    check_text_chars(request, "input", texts)
    prompt = {"query": info.query_prompt, "document": info.document_prompt}.get(body.input_type or "", "")
    if prompt:
        texts = [prompt + text for text in texts]
    results = await run_request(request, _batcher(request.app).embed(pool.model_id, texts))
    vectors = [resize(result.vector, body.dimensions, info.normalized) for result in results]
    return Response(response_json(response_body(pool.model_id, vectors, [result.tokens for result in results],
                                                body.encoding_format)), media_type="application/json")
