"""``run.py --history [--model M] [--device D] --output-dir DIR``: the run history as a page and a document.

Why a command of run.py and not a workflow: it runs nothing against a model and makes no run directory;
it reads the run history (``history.store``, the same store the reports step indexes into and the
regression gate reads) and writes DIR/history.html and DIR/history.json (``reports.run_history``).

It runs in the reports venv, like the reports step: that venv has what a PostgreSQL store needs
(psycopg), which run.py's own venv does not.
"""
from __future__ import annotations

import os
import subprocess
from typing import Any

from contracts import REPO_ROOT
from workflows.cli import RunOptions

MODULE = "reports.run_history"  # run as a module from the repository root


def run_history(options: RunOptions, ui: Any) -> int:
    """Write the two files from the reports venv; its exit code (0 written, 1 the store cannot be read)."""
    from workflows.venvs import VenvError, ensure_venv

    try:
        venv = ensure_venv("reports")
    except VenvError as exc:
        ui.error(f"could not prepare the reports venv: {exc}")
        return 1
    assert options.output_dir is not None
    cmd = [str(venv.python), "-m", MODULE, "--output-dir", str(options.output_dir.resolve())]
    if options.model:
        cmd += ["--model", options.model]
    if options.device is not None:
        cmd += ["--device", options.device.value]
    return subprocess.run(cmd, cwd=REPO_ROOT, env=dict(os.environ), check=False).returncode
