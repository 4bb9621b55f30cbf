"""``MODEL_DEVICE``: which torch device the device-aware runners use (vision, embeddings, rerank).

``auto`` (the default) picks CUDA, then Apple's MPS, then the CPU, in that order, as the documented
small-model server does; ``cuda``, ``cuda:<idx>`` and ``mps`` are taken only when torch sees that
device (otherwise start-up stops with one line: running on the CPU instead would hide it); ``cpu``
is the CPU. ``/v1/models`` shows each model's device; runners that only run on the CPU (Whisper
via CTranslate2, the text slot runner, the image and CNN runners) say ``cpu`` whatever is set.

Why torch is imported only here and only when asked: the server process must not pay torch's
start-up for a mock or CPU-only runner.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import re


@dataclasses.dataclass(frozen=True)
class Device:
    """kind: cuda | mps | cpu; index: the CUDA device number (cuda only)."""

    kind: str
    index: int | None = None

    @property
    def label(self) -> str:
        return f"cuda:{self.index or 0}" if self.kind == "cuda" else self.kind


class DeviceUnavailable(ValueError):
    """MODEL_DEVICE names a device torch does not see here; one line."""


def _cuda_count() -> int:
    if importlib.util.find_spec("torch") is None:
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _mps_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())


def resolve(value: str) -> Device:
    """MODEL_DEVICE's value -> the device; DeviceUnavailable (one line) when it cannot be had."""
    value = (value or "auto").strip().lower()
    if value == "cpu":
        return Device("cpu")
    if value == "auto":
        if _cuda_count():
            return Device("cuda", 0)
        return Device("mps") if _mps_available() else Device("cpu")
    match = re.fullmatch(r"cuda(?::(\d+))?", value)
    if match:
        index = int(match.group(1) or 0)
        count = _cuda_count()
        if index >= count:
            raise DeviceUnavailable(f"MODEL_DEVICE={value}: torch sees {count} CUDA device(s) here; use "
                                    "MODEL_DEVICE=auto or cpu")
        return Device("cuda", index)
    if value == "mps":
        if not _mps_available():
            raise DeviceUnavailable("MODEL_DEVICE=mps: torch sees no MPS device here; use MODEL_DEVICE=auto or cpu")
        return Device("mps")
    raise DeviceUnavailable(f"MODEL_DEVICE={value!r}: must be one of auto, cpu, mps, cuda, cuda:<idx>")


@functools.lru_cache(maxsize=1)
def model_device() -> Device:
    """The device for this process's MODEL_DEVICE (resolved once)."""
    return resolve(os.environ.get("MODEL_DEVICE", "auto"))
