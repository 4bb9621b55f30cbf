#!/usr/bin/env python3
"""Join this host to the release matrix's Ray cluster: one command per host.

    python3 scripts/ray_node.py --head                  # the first host (run release_matrix.py here)
    python3 scripts/ray_node.py --address HEAD:6379     # every other host
    python3 scripts/ray_node.py --stop                  # leave (stops this host's Ray processes)

It builds the pinned ``ray`` venv (``requirements/ray.txt``) if needed and runs its ``ray start`` with this host's
resources (``run.py --host-resources``: a ``device_<device>`` per catalog device its cards, GPUs and CPU can run,
and one ``matrix_slot``), and with ``TT_WORKFLOW_VENVS_DIR`` set to this checkout's venvs, so the specs the
cluster runs here reuse them (the driver's code travels with each task; the venvs stay). Arguments after
``--`` go to ``ray start`` as they are (``--num-cpus``, ``--object-store-memory``, ``--block`` ...).
Exit codes: ``ray start``'s; 2 bad input; 1 the venv could not be built.
"""
from __future__ import annotations

import argparse
import os
import sys

import _repo  # noqa: F401  (the repository importable: scripts/_repo.py)


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(prog="ray_node.py", description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--head", action="store_true", help="start the cluster's head on this host")
    where.add_argument("--address", help="HOST:PORT of the head to join")
    where.add_argument("--stop", action="store_true", help="stop this host's Ray processes")
    p.add_argument("--port", type=int, default=6379, help="--head: the port the other hosts join on")
    return p.parse_args(own), extra


def main(argv: list[str]) -> int:
    try:
        args, extra = parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    from workflows.matrix_fleet import host_resources_line
    from workflows.venvs import VenvError, ensure_venv, venvs_root

    try:
        ray = ensure_venv("ray").path / "bin" / "ray"
    except VenvError as exc:
        print(f"ray_node.py: error: could not prepare the ray venv: {exc}", file=sys.stderr)
        return 1
    if args.stop:
        os.execv(str(ray), [str(ray), "stop", *extra])
    resources, notes = host_resources_line()
    for note in notes:
        print(f"ray_node.py: note: {note}", file=sys.stderr)
    where = ["--head", "--port", str(args.port)] if args.head else ["--address", args.address]
    cmd = [str(ray), "start", *where, "--resources", resources, "--disable-usage-stats", *extra]
    print(f"ray_node.py: {' '.join(cmd[1:])}", flush=True)
    os.execve(str(ray), cmd, dict(os.environ, TT_WORKFLOW_VENVS_DIR=str(venvs_root())))
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
