"""Reranking without a web framework: the request's documents, scores, the sorted response.

Two ways to score a (query, document) pair:

- a cross-encoder (runner kind ``rerank``) reads query and document together and returns one
  relevance score per pair (squashed to 0..1 by a sigmoid);
- any embedding model scores as a bi-encoder: query and documents are embedded separately (with
  the model card's query / document prompts, e.g. embeddinggemma's ``task: search result |
  query: ``) and the score is their cosine similarity (-1..1).

The response names the model that scored and how (``scoring``), so a client never mistakes a
cosine for a cross-encoder's probability. Shape: Cohere / Jina / TEI's ``results: [{index,
relevance_score, document?}]``, best first, cut to ``top_n``.
"""
from __future__ import annotations

import uuid
from typing import Any

import numpy as np

MAX_DOCUMENTS = 1000
BI_ENCODER, CROSS_ENCODER = "bi-encoder-cosine", "cross-encoder"


class RerankInputError(ValueError):
    """A request the client must fix (400); the message names the field."""


def document_texts(documents: Any) -> list[str]:
    """``documents``: strings, or objects with a ``text`` string (Cohere's and Jina's other form)."""
    if not isinstance(documents, list) or not documents:
        raise RerankInputError("documents: expected a non-empty list of strings (or {\"text\": ...} objects)")
    if len(documents) > MAX_DOCUMENTS:
        raise RerankInputError(f"documents: at most {MAX_DOCUMENTS} per request, got {len(documents)}")
    texts = []
    for index, document in enumerate(documents):
        text = document.get("text") if isinstance(document, dict) else document
        if not isinstance(text, str) or not text:
            raise RerankInputError(f"documents[{index}]: expected a non-empty string or {{\"text\": string}}")
        texts.append(text)
    return texts


def cosine_scores(query: np.ndarray, documents: np.ndarray) -> list[float]:
    """Cosine similarity of one query vector with each document row."""
    query = np.asarray(query, dtype=np.float64)
    documents = np.asarray(documents, dtype=np.float64)
    norms = np.linalg.norm(documents, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
    return (documents @ query / np.maximum(norms, 1e-12)).tolist()


def response_body(model: str, scoring: str, texts: list[str], scores: list[float], top_n: int | None,
                  return_documents: bool, tokens: int) -> dict[str, Any]:
    """Results sorted by score (ties keep input order), cut to top_n."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    if top_n is not None:
        order = order[:top_n]
    results = []
    for index in order:
        result: dict[str, Any] = {"index": index, "relevance_score": round(float(scores[index]), 6)}
        if return_documents:
            result["document"] = {"text": texts[index]}
        results.append(result)
    return {"id": f"rerank-{uuid.uuid4().hex}", "object": "rerank", "model": model, "scoring": scoring,
            "results": results, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
