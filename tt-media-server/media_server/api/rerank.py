"""``POST /v1/rerank`` (Cohere / Jina / TEI shape) and its aliases ``/rerank``, ``/reranking``, ``/v1/reranking``.

Request: ``query``, ``documents`` (strings or ``{"text"}`` objects; TEI's ``texts`` is accepted
too), ``top_n``, ``return_documents`` (TEI: ``return_text``), ``model``. Which model scores: the
named one, else the first cross-encoder served (kind ``rerank``), else the first embedding model
as a bi-encoder (cosine of the query's and documents' vectors, through the embeddings cache and
micro-batcher). See ``embeddings/rerank.py`` for the response.
"""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from media_server.api.common import check_text_chars, one_of, run_request, scheduler_of
from media_server.api.embeddings import KIND as EMBEDDING_KIND
from media_server.api.embeddings import _batcher, _model_info
from media_server.auth import require_api_key
from media_server.embeddings.rerank import (BI_ENCODER, CROSS_ENCODER, RerankInputError, cosine_scores,
                                            document_texts, response_body)
from media_server.errors import BadInput, UnknownModel

KIND = "rerank"
router = APIRouter(dependencies=[Depends(require_api_key)], tags=["rerank"])


class RerankRequest(BaseModel):
    """Cohere's / Jina's rerank request (TEI's field names accepted as aliases)."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(..., min_length=1, description="the search query")
    documents: list[Any] | None = Field(None, description="strings or {\"text\": string} objects")
    texts: list[Any] | None = Field(None, description="TEI's name for documents")
    top_n: int | None = Field(None, ge=1, description="return only the best N results")
    return_documents: bool | None = Field(None, description="include each document's text")
    return_text: bool | None = Field(None, description="TEI's name for return_documents")
    model: str | None = Field(None, max_length=200, description="cross-encoder or embedding model served here")
    raw_scores: bool = Field(False, description="TEI: accepted; scores are always as described by 'scoring'")
    truncate: bool = Field(True, description="TEI: accepted; inputs are truncated to the model's context")
    max_chunks_per_doc: int | None = Field(None, ge=1, description="Cohere: accepted; documents are not chunked")


def _scoring_pool(request: Request, model: str | None):
    """The named model (rerank or embedding kind), else the first cross-encoder, else the first embedding."""
    scheduler = scheduler_of(request)
    pools = list(scheduler.pools.values())
    if model:
        pool = scheduler.pools.get(model)
        if pool is None or pool.kind not in (KIND, EMBEDDING_KIND):
            usable = ", ".join(p.model_id for p in pools if p.kind in (KIND, EMBEDDING_KIND)) or "none"
            raise UnknownModel(f"model {model!r} cannot rerank here; models that can: {usable}")
        return pool
    for kind in (KIND, EMBEDDING_KIND):
        for pool in pools:
            if pool.kind == kind:
                return pool
    raise UnknownModel("no model here can rerank: serve a cross-encoder (rerank-cpu) or an embedding model")


@router.post("/v1/rerank")
@router.post("/rerank")
@router.post("/reranking")
@router.post("/v1/reranking")
async def rerank(request: Request, body: RerankRequest) -> JSONResponse:
    """Rank ``documents`` by relevance to ``query``, best first."""
    try:
        texts = document_texts(one_of("documents", body.documents, "TEI's texts", body.texts))
    except RerankInputError as error:
        raise BadInput(str(error)) from None
    check_text_chars(request, "query", [body.query])
    check_text_chars(request, "documents", texts)
    return_documents = bool(body.return_documents if body.return_documents is not None else body.return_text)
    pool = _scoring_pool(request, body.model)
    if pool.kind == KIND:
        result = await run_request(request, scheduler_of(request).submit(
            pool.model_id, KIND, {"query": body.query, "documents": texts}))
        scores, tokens, scoring = list(result["scores"]), int(result["tokens"]), CROSS_ENCODER
    else:
        info = _model_info(request.app, pool)
        inputs = [info.query_prompt + body.query] + [info.document_prompt + text for text in texts]
        embedded = await run_request(request, _batcher(request.app).embed(pool.model_id, inputs))
        vectors = [item.vector for item in embedded]
        scores = cosine_scores(vectors[0], vectors[1:])
        tokens, scoring = sum(item.tokens for item in embedded), BI_ENCODER
    return JSONResponse(response_body(pool.model_id, scoring, texts, scores, body.top_n, return_documents, tokens))
