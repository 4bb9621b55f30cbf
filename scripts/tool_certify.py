#!/usr/bin/env python3
"""Each load generator's timing error against the stub: builds the tools' venvs, then runs the benchmark.

    python3 scripts/tool_certify.py --tools ours,vllm,aiperf,guidellm --out /tmp/tool_certify.json

Why a script beside ``benchmarking/tool_certify.py``: the benchmark needs each tool's executable
(``TT_<TOOL>_BIN``), and a client package never builds venvs (that is the orchestrator's layer,
``workflows.venvs``; benchmarking may not import workflows). So this script checks the arguments
(the benchmark's own parser: a bad one exits 2 before anything is built), builds or reuses the venv
of every named tool whose ``TT_<TOOL>_BIN`` is unset, exactly as run.py does, and replaces itself
with ``python -m benchmarking.tool_certify`` in the benchmarks venv. A venv that cannot be built
makes that tool NOT RUN with the reason (``--not-run``); the others are still measured. Exit codes
are the benchmark's (0, 1 some tool NOT RUN, 2 bad arguments, 130 interrupted).
"""
from __future__ import annotations

import os
import sys

import _repo  # noqa: F401  (the repository importable: scripts/_repo.py)

from benchmarking import tools
from benchmarking.tool_certify import parse_args
from contracts import REPO_ROOT


def tool_bins(names: list[str], env: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """(``TT_<TOOL>_BIN`` of each named tool's venv not already set, ``--not-run`` arguments for the venvs
    that could not be built)."""
    from workflows.venvs import VenvError, ensure_venv

    found: dict[str, str] = {}
    not_run: list[str] = []
    for name in names:
        if name not in tools.TOOLS or env.get(tools.bin_variable(name)):
            continue
        mod = tools.module(name)
        try:
            info = ensure_venv(mod.VENV)
        except VenvError as exc:
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            not_run += ["--not-run", f"{name}={name}: its venv {mod.VENV!r} could not be built: {why}"]
            continue
        found[tools.bin_variable(name)] = str(info.path / "bin" / mod.EXECUTABLE)
    return found, not_run


def main(argv: list[str]) -> int:
    args = parse_args(argv)  # exits 2 on a bad argument, before any venv is built
    from workflows.venvs import VenvError, ensure_venv

    env = dict(os.environ)
    found, not_run = tool_bins(args.tools, env)
    env.update(found)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    try:
        python = str(ensure_venv("benchmarks").python)
    except VenvError as exc:
        print(f"tool_certify: could not build the benchmarks venv: {exc}", file=sys.stderr)
        return 1
    os.execve(python, [python, "-m", "benchmarking.tool_certify", *argv, *not_run], env)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
