"""Vision chat settings: image inputs (data: URLs always; http(s) URLs only when allowed) and the model.

The documented names: ``ALLOW_REMOTE_IMAGES`` (0: an http(s) image URL is a 400 naming the part),
``REMOTE_IMAGE_TIMEOUT`` (5 s for connect + read of a fetch), ``MAX_REMOTE_IMAGE_BYTES`` (5 MiB,
also the cap of a data: URL's decoded bytes). ``ALLOW_PRIVATE_IMAGE_URLS`` (0) additionally lets a
fetch reach loopback, private, link-local and other non-global addresses (a test server on this
host); without it such URLs, and redirects to them, are refused before any connection is made.
"""
from __future__ import annotations

from functools import lru_cache

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class VisionSettings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False,
                                      protected_namespaces=())

    allow_remote_images: bool = Field(False, description="fetch http(s) image_url parts (0: refused with 400)")
    allow_private_image_urls: bool = Field(False, description="let fetches reach loopback/private/link-local hosts")
    remote_image_timeout: float = Field(5.0, gt=0, le=300, description="seconds to connect and read one image")
    max_remote_image_bytes: int = Field(5 * 1024 * 1024, ge=1024, le=2**30, description="largest image, fetched "
                                        "or in a data: URL, in bytes")
    max_image_redirects: int = Field(3, ge=0, le=20, description="redirects followed per fetch (each re-checked)")
    vision_model_path: str = Field("", description="vision-hf: checkpoint directory (else MODEL_WEIGHTS_PATH, "
                                   "else the catalog model's HF cache / download)")
    vision_model_id: str = Field("", description="vision-hf: the served model's name (else the runner's)")
    vision_torch_threads: int = Field(0, ge=0, le=1024, description="torch threads (0: CPU_THREADS_PER_WORKER)")


@lru_cache(maxsize=1)
def vision_settings() -> VisionSettings:
    return VisionSettings()
