"""scripts/run_tests.py: the README's test command adds workers, durations and coverage, never over the user."""

from __future__ import annotations

from contracts import REPO_ROOT
from tests.helpers import load_script

run_tests = load_script(REPO_ROOT / "scripts" / "run_tests.py")


def test_defaults_run_every_test_in_workers_with_the_slowest_durations():
    assert run_tests.pytest_args([], "2") == ["-n", "2", "--dist", "loadgroup", "--durations=30", "tests"]
    assert run_tests.DEFAULT_WORKERS == "2"


def test_the_users_choices_win():
    args = run_tests.pytest_args(["-n", "0", "--durations=5", "-m", "not slow"], "3")
    assert args == ["-n", "0", "--durations=5", "-m", "not slow"]
    assert "-n" not in run_tests.pytest_args(["-p", "no:xdist"], "3")
    assert "-n" not in run_tests.pytest_args([], "0")


def test_coverage_and_durations_flags_are_the_scripts_own():
    args = run_tests.pytest_args(["--coverage", "--update-durations", "tests/records"], "2")
    assert "--coverage" not in args and "--update-durations" not in args
    assert args[-1] == "tests/records" and "--cov" in args and "--cov-report=term:skip-covered" in args
