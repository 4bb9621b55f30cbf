#!/usr/bin/env python3
"""Run every test: `python3 scripts/run_tests.py [pytest args]` (the README's command 2).

Stdlib only until bootstrapped: builds (or reuses) the `dev` venv from requirements/dev.txt with
the project's own venv manager, then runs pytest in it. Tests build whatever else they need
(the CPU engine venv, the converted SmolLM2 model) through the same code the tool uses.
pytest's exit code 5 ("no tests collected") is turned into a failure: a suite that silently
collects nothing must never look green.
"""

import os
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    sys.path.insert(0, REPO_ROOT)
    from workflows.venvs import VenvError, ensure_venv

    try:
        dev = ensure_venv("dev")
    except VenvError as exc:
        print(f"run_tests: could not build the dev venv: {exc}", file=sys.stderr)
        return 1
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    args = sys.argv[1:] or ["tests"]
    code = subprocess.call([str(dev.python), "-m", "pytest", *args], cwd=REPO_ROOT, env=env)
    if code == 5:
        print("run_tests: pytest collected no tests; treating that as a failure", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
