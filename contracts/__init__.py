"""Stdlib-only contract modules shared by run.py and the client workflows in their own venvs.

Everything here imports only the standard library (tests/contracts/test_stdlib_only.py checks it
once for the whole package): the model spec, the run directory, --workflow-args and the typed
record base.
"""
