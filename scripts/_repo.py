"""The repository, importable from a script run by path (``python3 scripts/x.py``, the documented form).

Why: Python puts a script's own directory (scripts/) first on ``sys.path``, not the repository root, so a
script could not ``import workflows`` or ``contracts``. Each script imports this module before those
(``import _repo``): the one place under scripts/ that touches ``sys.path`` (run.py has its own stdlib
bootstrap; tt-media-server/benchmarks/ has ``_paths.py``). Inside the project's venvs and under pytest the
root is on ``PYTHONPATH`` already, and nothing is added twice. Stdlib only: scripts import it before any venv
exists.
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPTS_DIR = REPO_ROOT / "scripts"
MEDIA_SERVER_DIR = REPO_ROOT / "tt-media-server"


def _put_first(directory: Path) -> None:
    if str(directory) not in sys.path:
        sys.path.insert(0, str(directory))


def use_media_server() -> None:
    """Make the media server's package (``media_server``) importable too, for scripts that drive it in process."""
    _put_first(MEDIA_SERVER_DIR)


_put_first(SCRIPTS_DIR)  # sibling scripts (make_speech_data, measure_release_time) when imported from elsewhere
_put_first(REPO_ROOT)
