#!/usr/bin/env python3
"""tt-inference-server: one command from a catalog model to a served, benchmarked, evaluated report.

    python3 run.py --model SmolLM2-135M-Instruct --workflow release --device cpu --local-server

This file runs on any Python >= 3.10 and imports only the standard library until it has
bootstrapped itself: it finds uv (or installs it into a private bootstrap venv), makes sure the
orchestrator venv (requirements/run.txt) is current, and re-executes itself there.
"""

import os
import sys

MIN_PYTHON = (3, 10)
IN_VENV_MARKER = "TT_INFERENCE_ORCHESTRATOR"


def _bootstrap_and_reexec(argv):
    from workflows import venvs

    if "--reset-venvs" in argv:
        venvs.reset_venvs()
    try:
        info = venvs.ensure_venv("run")
    except venvs.VenvError as exc:
        print(f"run.py: error: could not prepare the orchestrator venv: {exc}", file=sys.stderr)
        return 1
    env = dict(os.environ)
    env[IN_VENV_MARKER] = str(info.path)
    os.execve(str(info.python), [str(info.python), os.path.abspath(__file__), *argv], env)
    return 1  # not reached


def main():
    if sys.version_info < MIN_PYTHON:
        print(f"run.py: error: needs Python >= {MIN_PYTHON[0]}.{MIN_PYTHON[1]}, this is "
              f"{sys.version_info[0]}.{sys.version_info[1]}", file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the repository: workflows/, contracts/
    argv = sys.argv[1:]
    if os.environ.get(IN_VENV_MARKER) != sys.prefix:
        return _bootstrap_and_reexec(argv)
    from workflows.main import main as orchestrate

    return orchestrate(argv)


if __name__ == "__main__":
    sys.exit(main())
