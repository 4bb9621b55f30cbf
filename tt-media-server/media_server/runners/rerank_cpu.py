"""Cross-encoder reranking on CPU (kind ``rerank``): sentence-transformers' CrossEncoder.

Why a runner of its own: a cross-encoder reads query and document together, so it cannot reuse
the embeddings cache; each (query, document) pair is one forward pass, batched per request.
Weights: ``RERANK_MODEL_PATH`` (a directory), else the HF cache's (or, with
``AUTO_DOWNLOAD_MODELS=1``, the Hub's) ``cross-encoder/ms-marco-MiniLM-L-6-v2``; missing weights
stop start-up with one line naming them. Without a cross-encoder served, ``/v1/rerank`` scores
with an embedding model (bi-encoder) instead.

Payload: {"query": str, "documents": [str]}. Result: {"scores": [float in 0..1], "tokens": int}.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any, ClassVar

from media_server.devices import model_device
from media_server.embeddings.settings import embedding_settings
from media_server.runners.base import BatchRunner, ItemError, RunnerUnavailable
from media_server.runners.model_files import ModelSource, resolve_model_dir

SOURCE = ModelSource("ms-marco-MiniLM-L-6-v2", "cross-encoder/ms-marco-MiniLM-L-6-v2", "main",
                     ("config.json", "*.safetensors", "tokenizer*"))


class CrossEncoderRunner(BatchRunner):

    uses_model_device = True
    name: ClassVar[str] = "rerank-cpu"
    kind: ClassVar[str] = "rerank"
    model_id: ClassVar[str] = SOURCE.served_name

    @classmethod
    def model_dir(cls) -> Path:
        return resolve_model_dir(SOURCE, embedding_settings().rerank_model_path)

    @classmethod
    def preflight(cls, settings) -> None:
        if importlib.util.find_spec("sentence_transformers") is None:
            raise RunnerUnavailable(f"{cls.name}: sentence-transformers is not installed in this venv")
        cls.model_dir()

    @classmethod
    def model_card(cls, model_id: str) -> dict[str, Any]:
        return {"scoring": "cross-encoder", "device": model_device().label}

    def load(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch
        from sentence_transformers import CrossEncoder

        threads = embedding_settings().cpu_threads(self.settings)
        if threads:
            torch.set_num_threads(threads)
        self.model = CrossEncoder(str(self.model_dir()), device=model_device().label, local_files_only=True)
        if self.settings.enable_warmup:
            self.model.predict([("warm-up query", "warm-up document")], show_progress_bar=False)

    def run_batch(self, payloads: list[Any]) -> list[Any]:
        import torch

        results: list[Any] = []
        for payload in payloads:
            query, documents = payload.get("query"), payload.get("documents")
            if not isinstance(query, str) or not isinstance(documents, list) or not documents:
                results.append(ItemError(400, "documents: expected a query and a non-empty list of documents"))
                continue
            pairs = [(query, document) for document in documents]
            scores = self.model.predict(pairs, show_progress_bar=False, activation_fn=torch.nn.Sigmoid(),
                                        convert_to_numpy=True)
            encoded = self.model.tokenizer([query] * len(documents), documents, truncation=True)
            results.append({"scores": [float(s) for s in scores.reshape(-1)],
                            "tokens": sum(len(ids) for ids in encoded["input_ids"])})
        return results
