#!/usr/bin/env python3
"""Run every test: `python3 scripts/run_tests.py [--coverage] [--update-durations] [pytest args]` (the
README's command 2).

Stdlib only until bootstrapped: builds (or reuses) the `dev` venv from requirements/dev.txt with
the project's own venv manager, then runs pytest in it. Tests build whatever else they need
(the CPU engine venv, the converted SmolLM2 model) through the same code the tool uses.

Tests run side by side in `TT_TEST_WORKERS` xdist workers (default 2, one per core of this project's
reference host: half of the suite's time is waiting on servers and subprocesses; the timing tests are
built to pass with one other core kept busy, and a third worker (measured: 3 min faster) left three of
them failing on a fresh machine), grouped and ordered by tests/scheduling.py; pass `-n 0` (or `-p no:xdist`)
to run them in one process. pytest prints the 30 slowest steps and the time per test module.

--coverage            measure the product code's line coverage (coverage.py, pyproject.toml's
                      [tool.coverage]) and print it; .ci/run uses it
--update-durations    rewrite tests/durations.json (the scheduling order) from this run's times

pytest's exit code 5 ("no tests collected") is turned into a failure: a suite that silently
collects nothing must never look green.
"""

import os
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_WORKERS = "2"
OWN_FLAGS = ("--coverage", "--update-durations")


def pytest_args(argv: list[str], workers: str) -> list[str]:
    """The pytest command line: the user's arguments, plus workers, durations and coverage unless given."""
    args = [a for a in argv if a not in OWN_FLAGS] or ["tests"]
    chosen_workers = any(a == "-n" or a.startswith(("-n", "--numprocesses")) for a in args) or \
        "no:xdist" in args
    extra = [] if chosen_workers or workers in ("", "0") else ["-n", workers, "--dist", "loadgroup"]
    if not any(a.startswith("--durations") for a in args):
        extra.append("--durations=30")
    if "--coverage" in argv:
        extra += ["--cov", "--cov-report=term:skip-covered", "--cov-report=json:coverage.json"]
    return extra + args


def main() -> int:
    import _repo  # noqa: F401  (the repository importable: scripts/_repo.py)
    from workflows.venvs import VenvError, ensure_venv

    try:
        dev = ensure_venv("dev")
    except VenvError as exc:
        print(f"run_tests: could not build the dev venv: {exc}", file=sys.stderr)
        return 1
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    # The suite starts the dev interpreter and the client venvs' hundreds of times (each subprocess test); under
    # PYTHONDONTWRITEBYTECODE (this host and CI set it) each start compiles what it imports again. Written once
    # (git and the image build contexts ignore __pycache__), it is read by every later start: the fast tier
    # 2 min 34 s while writing, 2 min 22 s reading (2026-11-29). The product's own runs are unaffected.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if "--update-durations" in sys.argv[1:]:
        env["TT_TEST_UPDATE_DURATIONS"] = "1"
    args = pytest_args(sys.argv[1:], os.environ.get("TT_TEST_WORKERS", DEFAULT_WORKERS))
    code = subprocess.call([str(dev.python), "-m", "pytest", *args], cwd=REPO_ROOT, env=env)
    if code == 5:
        print("run_tests: pytest collected no tests; treating that as a failure", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
