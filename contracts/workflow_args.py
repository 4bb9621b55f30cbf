"""``--workflow-args 'k=v k2=v2'``: parsing and per-workflow key validation (stdlib only).

Each client workflow owns the set of keys it accepts (exported as ``WORKFLOW_ARG_KEYS`` from a
stdlib-only module of its package); the CLI checks keys up front so a typo fails in one line
before any server starts.
"""

from __future__ import annotations

import importlib
import shlex
from enum import Enum

# Keys every workflow accepts. ``mode`` sizes benchmarks, evals, tests and stress_tests alike.
COMMON_KEYS = frozenset({"mode"})
MODES = ("smoke", "ci", "full")


class WorkflowType(Enum):
    BENCHMARKS = "benchmarks"
    EVALS = "evals"
    TESTS = "tests"
    STRESS_TESTS = "stress_tests"
    REPORTS = "reports"
    SERVER = "server"
    RELEASE = "release"
    DEPLOY = "deploy"


# Client workflows a release chains, in order (reports always last).
RELEASE_SEQUENCE = (WorkflowType.EVALS, WorkflowType.BENCHMARKS, WorkflowType.TESTS,
                    WorkflowType.STRESS_TESTS, WorkflowType.REPORTS)
# Workflows not implemented yet: run.py refuses them and a release reports them as not run.
NOT_YET_AVAILABLE: dict[WorkflowType, str] = {}
# Module (stdlib-only) exporting WORKFLOW_ARG_KEYS for each client workflow.
_KEY_MODULES = {
    WorkflowType.BENCHMARKS: "benchmarking.run_benchmarks",
    WorkflowType.EVALS: "evals.eval_config",
    WorkflowType.TESTS: "server_tests.run_tests",
    WorkflowType.STRESS_TESTS: "stress_tests.run_stress_tests",
    WorkflowType.DEPLOY: "deploy.run_deploy",
}
_REPORT_KEYS = frozenset({"ignore_verdict"})


class WorkflowArgsError(ValueError):
    pass


def parse_workflow_args(text: str | None) -> dict[str, str]:
    """``'a=1 b=two'`` -> ``{"a": "1", "b": "two"}``; shell-style quoting allowed."""
    if not text:
        return {}
    result: dict[str, str] = {}
    for token in shlex.split(text):
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise WorkflowArgsError(f"--workflow-args entry {token!r} is not key=value")
        result[key.strip()] = value
    return result


def accepted_keys(workflow: WorkflowType) -> frozenset[str]:
    if workflow is WorkflowType.RELEASE:
        keys = set(COMMON_KEYS)
        for child in RELEASE_SEQUENCE:
            keys |= accepted_keys(child)
        return frozenset(keys)
    if workflow is WorkflowType.REPORTS:
        return COMMON_KEYS | _REPORT_KEYS
    module_name = _KEY_MODULES.get(workflow)
    if module_name is None:
        return COMMON_KEYS
    module = importlib.import_module(module_name)
    return COMMON_KEYS | frozenset(getattr(module, "WORKFLOW_ARG_KEYS"))


def validate_workflow_args(workflow: WorkflowType, args: dict[str, str]) -> None:
    valid = accepted_keys(workflow)
    unknown = sorted(set(args) - valid)
    if unknown:
        raise WorkflowArgsError(
            f"unknown --workflow-args key(s) for {workflow.value}: {', '.join(unknown)}; "
            f"valid keys: {', '.join(sorted(valid))}"
        )
    mode = args.get("mode")
    if mode is not None and mode not in MODES:
        raise WorkflowArgsError(f"--workflow-args mode={mode!r} is not one of: {', '.join(MODES)}")


def client_workflow_parser(description: str, *, server_required: bool = False) -> "argparse.ArgumentParser":
    """The arguments every client workflow entry script accepts (the orchestrator's child contract).

    One definition, so the contract in docs/architecture.md cannot drift between entry scripts;
    a script adds its own flags to the parser it gets back.
    """
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--run-dir", required=True, help="the run directory (results land below it)")
    parser.add_argument("--model-spec-json", required=True, help="the resolved ModelSpec (RUN_DIR/model_spec.json)")
    if server_required:
        parser.add_argument("--server-url", required=True, help="base URL of the server")
    else:
        parser.add_argument("--server-url", default="", help="base URL of the server (empty for file-only workflows)")
    parser.add_argument("--workflow-args-json", default="{}", help="--workflow-args as a JSON object")
    parser.add_argument("--disable-trace-capture", action="store_true",
                        help="the orchestrator already warmed the server up")
    return parser
