#!/usr/bin/env python3
"""Prefetch the catalog models' weights into the HF cache, so a server can start with AUTO_DOWNLOAD_MODELS=0.

Usage (in the media-server venv, which has huggingface_hub and the catalog):
  .workflow_venvs/media-server/bin/python scripts/download_models.py [NAME ...] [--list] [--dry-run]
NAME: a catalog name (the documented HF repo id, e.g. BAAI/bge-m3 or openai/whisper-small);
without names, the comma list in MODELS. Each model is fetched at its pinned revision (HF_TOKEN
honoured for gated repos; an interrupted download resumes; files are checked against the
revision's hashes by huggingface_hub) and one line says where it went and at which commit.
Exit 0 when every model is present afterwards, 1 when one failed, 2 for bad input.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

SERVER_DIR = Path(__file__).resolve().parent.parent / "tt-media-server"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="catalog names (default: MODELS)")
    parser.add_argument("--list", action="store_true", help="print the catalog and exit")
    parser.add_argument("--dry-run", action="store_true", help="say what would be fetched, fetch nothing")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(SERVER_DIR))
    try:
        from media_server.model_files import cached_snapshot, download
        from media_server.runners.base import RunnerUnavailable
        from media_server.runners.catalog import CATALOG, source_of
    except ImportError as exc:
        print(f"error: {exc}; run this with .workflow_venvs/media-server/bin/python", file=sys.stderr)
        return 2
    if args.list:
        for name, runner in sorted(CATALOG.items()):
            print(f"{name}\t{runner.source.repo}@{runner.source.revision}\t{runner.kind}")
        return 0
    names = args.names or [n.strip().split("=")[-1] for n in os.environ.get("MODELS", "").split(",") if n.strip()]
    if not names:
        print("error: name the models (or set MODELS); --list shows the catalog", file=sys.stderr)
        return 2
    unknown = [n for n in names if n not in CATALOG]
    if unknown:
        print(f"error: not in the catalog: {', '.join(unknown)}; --list shows it", file=sys.stderr)
        return 2
    failed = 0
    for name in names:
        source = source_of(name)
        what = f"{name} ({source.repo}@{source.revision})"
        found = cached_snapshot(source)
        if found is not None:
            print(f"{what}: already in the cache at {found}", flush=True)
            continue
        if args.dry_run:
            print(f"{what}: would download", flush=True)
            continue
        try:
            path = download(source, what, ", ".join(source.required))
        except RunnerUnavailable as exc:
            print(f"FAILED {exc}", flush=True)
            failed += 1
            continue
        print(f"{what}: downloaded to {path} (commit {path.name})", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
