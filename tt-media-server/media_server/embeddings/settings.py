"""Embeddings settings: cache size, micro-batching window, model directory; env or `.env`.

Why its own settings class: these knobs belong to the embeddings route and runner only; they are
read like the server's own settings (UPPERCASE variables, `.env`) and a bad value stops the
server at start-up naming the variable.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from media_server.embeddings.batcher import BatchingConfig
from media_server.onnx_cache import backend_for, check_backends, default_cache_root

BACKEND_CHOICES = ("auto", "torch", "onnx", "onnx-int8")


class EmbeddingSettings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False,
                                      protected_namespaces=())

    enable_batching: bool = Field(True, description="merge concurrent requests' texts into micro-batches")
    batch_window_ms: float = Field(5.0, ge=0, le=10_000, description="how long a text waits for company")
    batch_window_max_size: int = Field(32, ge=1, le=4096, description="most texts in one model call")
    batch_max_inflight: int = Field(0, ge=0, le=256, description="batches of one model at the workers before "
                                    "a window's end waits for one to return (0: one per ready worker of the "
                                    "model, which keeps every worker busy; a window's texts are split over "
                                    "the free ones)")
    embedding_cache_size: int = Field(10_000, ge=0, le=10_000_000, description="LRU entries (0 disables it)")
    embedding_model_path: str = Field("", description="a sentence-transformers directory to serve instead")
    rerank_model_path: str = Field("", description="rerank-cpu: a cross-encoder directory (else the HF cache's "
                                   "cross-encoder/ms-marco-MiniLM-L-6-v2)")
    embedding_threads: int = Field(1, ge=0, le=256, description="torch threads per worker (0: torch's default, "
                                   "all cores; one per worker avoids oversubscribing a shared CPU)")
    embedding_backend: str = Field("auto", max_length=2000, description=(
        "torch | onnx | onnx-int8 | auto (onnx-int8 where the model directory exports as one graph, else "
        "torch); per model: 'onnx-int8,BAAI/bge-m3=torch' (a bare value is the default of the others)"))
    embedding_onnx_cache_dir: str = Field("", description="where ONNX exports are cached (default: "
                                          "$XDG_CACHE_HOME or ~/.cache, then tt-media-server/onnx)")

    def cpu_threads(self, server_settings) -> int:
        """EMBEDDING_THREADS when given, else the server's CPU_THREADS_PER_WORKER, else 1."""
        if "embedding_threads" in self.model_fields_set:
            return self.embedding_threads
        return getattr(server_settings, "cpu_threads_per_worker", 0) or 1

    @field_validator("embedding_backend")
    @classmethod
    def _known_backends(cls, value: str) -> str:
        return check_backends(value, BACKEND_CHOICES, "EMBEDDING_BACKEND")

    def backend_for(self, model_id: str) -> str:
        """The backend EMBEDDING_BACKEND names for this model (its own entry, else the bare default)."""
        return backend_for(self.embedding_backend, model_id)

    def onnx_cache_root(self) -> Path:
        if self.embedding_onnx_cache_dir:
            return Path(self.embedding_onnx_cache_dir).expanduser()
        return default_cache_root()

    @property
    def batching(self) -> BatchingConfig:
        return BatchingConfig(enabled=self.enable_batching, window_ms=self.batch_window_ms,
                              max_size=self.batch_window_max_size, max_inflight=self.batch_max_inflight)


@lru_cache(maxsize=1)
def embedding_settings() -> EmbeddingSettings:
    return EmbeddingSettings()
