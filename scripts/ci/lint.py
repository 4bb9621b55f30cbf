#!/usr/bin/env python3
"""Lint and type-check the repository: `python3 scripts/ci/lint.py` (.ci/run runs it before the tests).

Stdlib only until bootstrapped: builds (or reuses) the `dev` venv from requirements/dev.txt, which pins
ruff and mypy, then runs in it

* `ruff check .`: the rules of pyproject.toml's [tool.ruff] (pycodestyle E and W with lines of at most
  120 characters, Pyflakes F), over every Python file but the venvs and caches;
* `python -m mypy`: pyproject.toml's [tool.mypy], strict over contracts/, records/ and history/.

Both run even when the first fails, so one run shows every finding; the exit code is non-zero when
either found something (or the dev venv could not be built); 2 when given an argument (it takes none).
"""
from __future__ import annotations

import os
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def checks(python: str) -> list[tuple[str, list[str]]]:
    """(name, command) of each check, in the order they run."""
    return [("ruff", [python, "-m", "ruff", "check", "."]),
            ("mypy", [python, "-m", "mypy"])]


def main() -> int:
    import runpy  # scripts/_repo.py makes the repository importable (it is not next to this file)

    runpy.run_path(os.path.join(REPO_ROOT, "scripts", "_repo.py"))
    from workflows.venvs import VenvError, ensure_venv

    try:
        dev = ensure_venv("dev")
    except VenvError as exc:
        print(f"lint: could not build the dev venv: {exc}", file=sys.stderr)
        return 1
    failed = []
    for name, cmd in checks(str(dev.python)):
        print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
        if subprocess.call(cmd, cwd=REPO_ROOT) != 0:
            failed.append(name)
    if failed:
        print(f"lint: {' and '.join(failed)} found problems (see above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1:]:  # it takes none: an argument would be silently ignored, which looks like it was used
        print(f"lint: takes no arguments (got {sys.argv[1][:200]!r})\nusage: python3 scripts/ci/lint.py",
              file=sys.stderr)
        sys.exit(2)
    sys.exit(main())
