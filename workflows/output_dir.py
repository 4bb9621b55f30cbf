"""Which directory a run may write into, decided before anything is written.

Why: a run writes manifest.json, run.log, model_spec.json, reports/ ... into its directory. Pointed
at a directory that holds another run, or someone's files, it would overwrite them; pointed at a
place that cannot hold files (``/proc``, a read-only mount, an existing file) it used to fail with a
traceback from ``mkdir``. The rules:

- a new or empty directory is used (created with its parents);
- a directory holding a run of the same model and workflow is resumed (finished benchmark points are
  kept, see benchmarking/run_benchmarks.py);
- a directory holding a run of another model or workflow, a manifest.json that is not a run
  manifest, or other files without a manifest is refused: never overwritten;
- a path that cannot be created or written is refused, naming the reason.

Every refusal is a ``ValueError`` with one line; run.py reports it as bad input (exit 2).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

MANIFEST_NAME = "manifest.json"


def _held_run(path: Path) -> tuple[str, str, str]:
    """(run_id, model_id, workflow) of the run in ``path``; ValueError if its manifest is not a run's."""
    manifest = path / MANIFEST_NAME
    if not manifest.is_file():  # a FIFO or a directory would hang or fail the read
        raise ValueError(f"--output-dir {_shown(path)} holds a {MANIFEST_NAME} that is not a file; "
                         f"pick a new or empty directory")
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise ValueError(f"--output-dir {_shown(path)} holds a {MANIFEST_NAME} that cannot be read "
                         f"({type(exc).__name__}); pick a new or empty directory") from None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("model_id", "workflow")):
        raise ValueError(f"--output-dir {_shown(path)} holds a {MANIFEST_NAME} that is not a run manifest; "
                         f"pick a new or empty directory")
    return str(data.get("run_id", "?")), data["model_id"], data["workflow"]


def claim_output_dir(path: Path, model_id: str, workflow: str) -> Path:
    """The absolute run directory for this run, created; ValueError (one line) when it must not be used."""
    path = Path(os.path.abspath(path))
    try:
        return _claim(path, model_id, workflow)
    except OSError as exc:  # a name too long, a loop of symlinks, a permission on a parent...
        raise ValueError(f"--output-dir {_shown(path)} cannot be used: {exc.strerror or exc}") from None


def _shown(path: Path, limit: int = 200) -> str:
    text = str(path)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _claim(path: Path, model_id: str, workflow: str) -> Path:
    if path.exists() and not path.is_dir():
        raise ValueError(f"--output-dir {_shown(path)} exists and is not a directory")
    if path.is_dir():
        try:
            entries = [e.name for e in os.scandir(path)]
        except OSError as exc:
            raise ValueError(f"--output-dir {_shown(path)} cannot be listed: {exc.strerror or exc}") from None
        if MANIFEST_NAME in entries:
            run_id, held_model, held_workflow = _held_run(path)
            if (held_model, held_workflow) != (model_id, workflow):
                raise ValueError(f"--output-dir {_shown(path)} holds another run ({run_id}: model {held_model}, "
                                 f"workflow {held_workflow}); it is never overwritten: pick a new or empty "
                                 f"directory (the same model and workflow resume there)")
        elif entries:
            raise ValueError(f"--output-dir {_shown(path)} is not empty and holds no run ({len(entries)} entries); "
                             f"pick a new or empty directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--output-dir {_shown(path)} cannot be created: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"--output-dir {_shown(path)} is not writable")
    return path
