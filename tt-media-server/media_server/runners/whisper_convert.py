"""A transformers Whisper checkpoint (a community fine-tune) converted once to CTranslate2 for faster-whisper.

Why: the catalog's community fine-tunes (``jethrowang/whisper-tiny-chinese``, ``BELLE-2/Belle-whisper-large-v3-zh``...)
are published as transformers checkpoints only, while this server decodes Whisper with faster-whisper, which
loads CTranslate2 weights. CTranslate2's own converter turns one into the other; the result is cached under
``$XDG_CACHE_HOME/tt-media-server/whisper-ct2/<name>-<key>``, the key a hash of the checkpoint's files (names,
sizes, config bytes) and the ctranslate2 version, so new weights or a new converter convert again. A conversion
runs under a lock, into a temporary directory renamed into place: workers starting together convert once and
never load a half-written directory. The tokenizer goes with it (``tokenizer.json``, written from the checkpoint's
own vocabulary when the repo has none), so faster-whisper never asks the Hub for one.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
from pathlib import Path

#: Files the checkpoint must hold to be converted (``a|b``: either).
HF_WHISPER_FILES = ("config.json", "*.safetensors|pytorch_model*.bin", "tokenizer.json|vocab.json")
RECIPE = "1"  # bump when the conversion below changes


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tt-media-server" / "whisper-ct2"


def conversion_key(hf_dir: Path) -> str:
    import ctranslate2

    digest = hashlib.sha256(f"{ctranslate2.__version__}/{RECIPE}".encode())
    for path in sorted(p for p in hf_dir.iterdir() if p.is_file()):
        digest.update(f"{path.name}:{path.stat().st_size}".encode())
        if path.suffix == ".json":
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def converted(hf_dir: Path, name: str, root: Path | None = None) -> Path:
    """The CTranslate2 directory of ``hf_dir``, converting it first when the cache has none."""
    root = root or cache_root()
    target = root / f"{name.replace('/', '--')}-{conversion_key(hf_dir)}"
    if (target / "model.bin").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "model.bin").is_file():  # another worker converted it while this one waited
            return target
        staging = root / f".{target.name}.{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            _convert(hf_dir, staging)
            os.replace(staging, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(staging)
    return target


def _convert(hf_dir: Path, out: Path) -> None:
    from ctranslate2.converters import TransformersConverter

    copy = [name for name in ("preprocessor_config.json", "tokenizer.json") if (hf_dir / name).is_file()]
    TransformersConverter(str(hf_dir), copy_files=copy).convert(str(out), force=True)
    if not (out / "tokenizer.json").is_file():  # a repo with vocab.json/merges.txt only: write the fast tokenizer
        from transformers import WhisperTokenizerFast

        tokenizer = WhisperTokenizerFast.from_pretrained(str(hf_dir), local_files_only=True)
        tokenizer.backend_tokenizer.save(str(out / "tokenizer.json"))
