"""Where a runner's weights come from: a local directory, the HF cache, or the Hub when allowed.

Order: an explicit directory (the runner's *_MODEL_PATH, else MODEL_WEIGHTS_PATH) > the HF cache
(``HF_HOME`` / ``HF_HUB_CACHE``) at the pinned revision > a download from the Hub when
``AUTO_DOWNLOAD_MODELS=1`` (``HF_TOKEN`` honoured; huggingface_hub resumes a partial download and
checks each file against the revision's hashes). Anything missing is ONE line naming the model,
the repo and revision, the files not found and what to do (the server prints it and exits at
start-up): ``scripts/download_models.py`` prefetches on a host that can reach the Hub.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from media_server.runners.base import RunnerUnavailable


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """A catalog model's weights: repo, pinned revision and the files a load needs.

    served_name: the name /v1/models shows (the documented server's HF repo id).
    repo: Hugging Face repo id.
    revision: a commit hash or tag pinned so every host loads the same files ("main" when the
      catalog pins none).
    required: files (glob patterns) that must all be present for a load.
    """

    served_name: str
    repo: str
    revision: str = "main"
    required: tuple[str, ...] = ("config.json",)


def _missing(path: Path, required: tuple[str, ...]) -> list[str]:
    """The required patterns with no file; ``a|b`` is satisfied by either (safetensors or a .bin)."""
    return [pattern for pattern in required
            if not any(any(path.glob(alternative)) for alternative in pattern.split("|"))]


def hub_cache() -> str:
    """HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub, read when asked (not at import)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    return os.path.join(os.path.expanduser(os.environ.get("HF_HOME", "~/.cache/huggingface")), "hub")


def auto_download_enabled() -> bool:
    return os.environ.get("AUTO_DOWNLOAD_MODELS", "1").strip().lower() not in ("0", "false", "no", "off", "")


def cached_snapshot(source: ModelSource) -> Path | None:
    """The HF cache's snapshot of the pinned revision, or None (never touches the network)."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        return None
    try:
        return Path(snapshot_download(source.repo, revision=source.revision, local_files_only=True,
                                      cache_dir=hub_cache()))
    except (LocalEntryNotFoundError, FileNotFoundError, OSError, ValueError):
        return None


def resolve_model_dir(source: ModelSource, local_path: str = "", allow_download: bool | None = None) -> Path:
    """The directory holding ``source``'s files; RunnerUnavailable (one line) when it cannot be had."""
    what = f"{source.served_name} ({source.repo}@{source.revision})"
    if local_path:
        path = Path(local_path).expanduser()
        missing = _missing(path, source.required) if path.is_dir() else ["the directory itself"]
        if missing:
            raise RunnerUnavailable(f"{what}: {path} lacks {', '.join(missing)}")
        return path
    snapshot = cached_snapshot(source)
    if snapshot is not None and not _missing(snapshot, source.required):
        return snapshot
    allow = auto_download_enabled() if allow_download is None else allow_download
    cache = hub_cache()
    missing = ", ".join(_missing(snapshot, source.required) if snapshot else source.required)
    if not allow:
        raise RunnerUnavailable(f"{what}: weights not found in {cache} (missing {missing}) and AUTO_DOWNLOAD_MODELS=0;"
                                f" run scripts/download_models.py {source.served_name} where the Hub is reachable")
    return download(source, what, missing)


def download(source: ModelSource, what: str, missing: str) -> Path:
    """snapshot_download of the pinned revision (resumable, hash-checked); one line when it fails."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise RunnerUnavailable(f"{what}: huggingface_hub is not installed; cannot download") from None
    try:
        path = Path(snapshot_download(source.repo, revision=source.revision, cache_dir=hub_cache(),
                                      token=os.environ.get("HF_TOKEN") or None))
    except Exception as exc:  # noqa: BLE001 - offline, gated, unknown repo: all one line for the operator
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise RunnerUnavailable(f"{what}: weights not found locally (missing {missing}) and the download failed "
                                f"({type(exc).__name__}: {reason}); set HF_TOKEN for gated repos, or prefetch "
                                f"with scripts/download_models.py") from None
    still = _missing(path, source.required)
    if still:
        raise RunnerUnavailable(f"{what}: downloaded snapshot {path} lacks {', '.join(still)}")
    return path
