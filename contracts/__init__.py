"""Stdlib-only contract modules shared by run.py and the client workflows in their own venvs.

Everything here imports only the standard library (tests/contracts/test_stdlib_only.py checks it
once for the whole package): the model spec, the run directory, --workflow-args, the typed
record base and the OpenAI-compatible HTTP basics every client shares.

``REPO_ROOT`` is defined here, once: every module that needs the repository root imports it.
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
