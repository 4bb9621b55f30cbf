"""Which client variant a model spec needs, from its ``model_type`` (stdlib only).

Why by ``model_type``: the engine says who serves the model, the kind says what a request looks
like. The media server also serves text models, and those are measured like any LLM.
"""
from __future__ import annotations

from typing import Any

IMAGE, SPEECH, CNN, EMBEDDING = "image", "speech", "cnn", "embedding"
#: Kinds with a media client variant; any other model_type (LLM, text, ...) uses the LLM clients.
MEDIA_KINDS = (IMAGE, SPEECH, CNN, EMBEDDING)
_ALIASES = {"audio": SPEECH, "asr": SPEECH, "classification": CNN, "embeddings": EMBEDDING, "images": IMAGE}


def kind_of(spec: Any) -> str | None:
    """The media kind of a spec (a ModelSpec or its JSON dict), or None for LLM/text models."""
    raw = spec.get("model_type") if isinstance(spec, dict) else getattr(spec, "model_type", None)
    kind = str(raw or "").strip().lower()
    kind = _ALIASES.get(kind, kind)
    return kind if kind in MEDIA_KINDS else None
