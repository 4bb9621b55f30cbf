"""CNN classification settings: which backend runs the network, and where its ONNX exports are cached.

Why its own class: these knobs belong to the CNN runners only; they are read like the server's
own settings (UPPERCASE variables, `.env`), and a bad value stops the server at start-up naming
the variable. CNN_BACKEND has EMBEDDING_BACKEND's form (media_server/onnx_cache.py).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from media_server.onnx_cache import backend_for, check_backends, default_cache_root

BACKEND_CHOICES = ("auto", "torch", "onnx", "onnx-int8")


class CnnSettings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False,
                                      protected_namespaces=())

    # Default torch: the ONNX backends are measured (benchmarks/cnn_served_vs_direct.py) but have not yet
    # served a whole smoke release inside the media image, which is what a default must have done.
    cnn_backend: str = Field("torch", max_length=2000, description=(
        "torch (default) | onnx | onnx-int8 | auto (onnx: fp32 ONNX Runtime); per model: "
        "'onnx,resnet-18=torch' (a bare value is the default of the others)"))
    cnn_onnx_cache_dir: str = Field("", description="where the CNN's ONNX exports are cached (default: "
                                    "$XDG_CACHE_HOME or ~/.cache, then tt-media-server/onnx)")

    @field_validator("cnn_backend")
    @classmethod
    def _known_backends(cls, value: str) -> str:
        return check_backends(value, BACKEND_CHOICES, "CNN_BACKEND")

    def backend_for(self, model_id: str) -> str:
        """The backend CNN_BACKEND names for this model (its own entry, else the bare default)."""
        return backend_for(self.cnn_backend, model_id)

    def onnx_cache_root(self) -> Path:
        return Path(self.cnn_onnx_cache_dir).expanduser() if self.cnn_onnx_cache_dir else default_cache_root()


@lru_cache(maxsize=1)
def cnn_settings() -> CnnSettings:
    return CnnSettings()
