"""The media server and the repository, importable from a benchmark run by path
(``python benchmarks/whisper_rtf.py`` from tt-media-server/, the documented form).

Why: Python puts the script's directory (benchmarks/) first on ``sys.path``, so neither ``media_server``
(tt-media-server/) nor ``contracts`` (the repository root) would import. Each benchmark imports this module
before those (``import _paths``): the one place under tt-media-server/ that touches ``sys.path``; the server
itself runs from tt-media-server/ and needs none of it. Nothing is added twice.
"""
from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS_DIR = Path(__file__).resolve().parent
SERVER_DIR = BENCHMARKS_DIR.parent
REPO_ROOT = SERVER_DIR.parent

for _directory in (BENCHMARKS_DIR, REPO_ROOT, SERVER_DIR):  # SERVER_DIR ends up first: media_server wins
    if str(_directory) not in sys.path:
        sys.path.insert(0, str(_directory))
