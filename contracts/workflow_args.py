"""``--workflow-args 'k=v k2=v2'``: parsing and per-workflow key validation (stdlib only).

Each client workflow owns the set of keys it accepts (exported as ``WORKFLOW_ARG_KEYS`` from a
stdlib-only module of its package); the CLI checks keys up front so a typo fails in one line
before any server starts.

Evals and benchmarks also take keys they do not own (the documented ``"batch_size=4 max_tokens=512"``):
those pass through to the tool they configure (``_PASSTHROUGH_MODULES``: lm-eval's settings and
generation kwargs; the benchmark's request body fields). A key close to one the workflow owns is
still a typo ("did you mean"), never passed through.
"""

from __future__ import annotations

import difflib
import importlib
import re
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
# Module (stdlib-only) exporting check_passthrough(key, value) and WORKFLOW_ARG_PASSTHROUGH for the
# workflows that hand keys they do not own to the tool they drive.
_PASSTHROUGH_MODULES = {
    WorkflowType.EVALS: "evals.passthrough",
    WorkflowType.BENCHMARKS: "benchmarking.body_fields",
}
_KEY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_TYPO_CUTOFF = 0.75


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


def passthrough_workflows(workflow: WorkflowType) -> tuple[WorkflowType, ...]:
    """The workflows (``workflow`` itself, or a release's children) that take keys they do not own."""
    chain = RELEASE_SEQUENCE if workflow is WorkflowType.RELEASE else (workflow,)
    return tuple(w for w in chain if w in _PASSTHROUGH_MODULES)


def passthrough_problem(workflow: WorkflowType, key: str, value: str) -> str | None:
    """Why ``workflow`` cannot pass ``key=value`` through, or None when it does."""
    if workflow not in _PASSTHROUGH_MODULES:
        return f"{workflow.value} takes only its own keys"
    module = importlib.import_module(_PASSTHROUGH_MODULES[workflow])
    return module.check_passthrough(key, value)


def passthrough_targets(workflow: WorkflowType, args: dict[str, str]) -> dict[str, list[str]]:
    """Each key ``workflow`` does not own -> the workflows it passes through to (recorded in cli_args.json)."""
    own = accepted_keys(workflow)
    return {key: [w.value for w in passthrough_workflows(workflow) if passthrough_problem(w, key, value) is None]
            for key, value in args.items() if key not in own}


def validate_workflow_args(workflow: WorkflowType, args: dict[str, str]) -> None:
    valid = accepted_keys(workflow)
    unknown = sorted(set(args) - valid)
    for key in unknown:
        close = difflib.get_close_matches(key, sorted(valid), n=1, cutoff=_TYPO_CUTOFF)
        if close:
            raise WorkflowArgsError(f"unknown --workflow-args key {key!r} for {workflow.value}; "
                                    f"did you mean {close[0]!r}?")
    targets = passthrough_workflows(workflow)
    if unknown and not targets:
        raise WorkflowArgsError(
            f"unknown --workflow-args key(s) for {workflow.value}: {', '.join(unknown)}; "
            f"valid keys: {', '.join(sorted(valid))}"
        )
    for key in unknown:
        if not _KEY_NAME.fullmatch(key):
            raise WorkflowArgsError(f"--workflow-args key {key!r} is not a setting name (letters, digits, _)")
        problems = [passthrough_problem(w, key, args[key]) for w in targets]
        if all(problems):
            raise WorkflowArgsError(problems[0])
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
