"""``--workflow-args 'k=v k2=v2'``: parsing and per-workflow key validation (stdlib only).

Each workflow's keys are declared as data in ``contracts.workflow_keys`` (one table per workflow);
the CLI checks keys up front so a typo fails in one line before any server starts.

Evals and benchmarks also take keys they do not own (the documented ``"batch_size=4 max_tokens=512"``):
those pass through to the tool they configure (``PASSTHROUGH``: lm-eval's settings and generation
kwargs; the benchmark's request body fields). A key close to one the workflow owns is still a typo
("did you mean"), never passed through.
"""

from __future__ import annotations

import argparse
import difflib
import re
import shlex
from enum import Enum

from contracts.workflow_keys import (
    BENCHMARK_ARGS,
    BENCHMARK_PASSTHROUGH,
    COMMON_ARGS,
    COMPARE_ARGS,
    DEPLOY_ARGS,
    EVAL_ARGS,
    EVAL_PASSTHROUGH,
    PERF_TIERS,
    RELEASE_ARGS,
    REPORT_ARGS,
    STRESS_ARGS,
    TEST_ARGS,
    VERDICT_ARGS,
    Passthrough,
    shown,
)

# Keys every workflow accepts. ``mode`` sizes benchmarks, evals, tests and stress_tests alike.
COMMON_KEYS = frozenset(COMMON_ARGS)
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


#: Client workflows that time nothing: what they judge does not depend on how busy the server or the
#: host is (evals score answers, tests check API conformance), so they may share the server with each
#: other. benchmarks and stress_tests measure latency and capacity: nothing may run beside them.
TIMES_NOTHING = frozenset({WorkflowType.EVALS, WorkflowType.TESTS})
#: Client workflows a release runs, as stages in order: a stage starts when the one before it has ended,
#: and the workflows of one stage run side by side (``--workflow-args overlap=0``: one after another, in
#: this order). Reports reads what the others wrote, so it is last and alone.
RELEASE_STAGES: tuple[tuple[WorkflowType, ...], ...] = (
    (WorkflowType.EVALS, WorkflowType.TESTS),
    (WorkflowType.BENCHMARKS,),
    (WorkflowType.STRESS_TESTS,),
    (WorkflowType.REPORTS,),
)
#: The same workflows, flat, in the order their stages run.
RELEASE_SEQUENCE = tuple(w for stage in RELEASE_STAGES for w in stage)
# Workflows not implemented yet: run.py refuses them and a release reports them as not run.
NOT_YET_AVAILABLE: dict[WorkflowType, str] = {}
#: The keys each workflow owns, with their help (``contracts.workflow_keys``).
WORKFLOW_ARGS = {
    WorkflowType.BENCHMARKS: BENCHMARK_ARGS,
    WorkflowType.EVALS: EVAL_ARGS,
    WorkflowType.TESTS: TEST_ARGS,
    WorkflowType.STRESS_TESTS: STRESS_ARGS,
    WorkflowType.DEPLOY: DEPLOY_ARGS,
    WorkflowType.REPORTS: REPORT_ARGS,
    WorkflowType.RELEASE: RELEASE_ARGS,
}
#: Workflows that hand keys they do not own to the tool they drive, and where those keys go.
PASSTHROUGH: dict[WorkflowType, Passthrough] = {
    WorkflowType.EVALS: EVAL_PASSTHROUGH,
    WorkflowType.BENCHMARKS: BENCHMARK_PASSTHROUGH,
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
            raise WorkflowArgsError(f"--workflow-args entry {shown(token)} is not key=value")
        if key.strip() in result:  # which one was meant? silently keeping the last would hide the slip
            raise WorkflowArgsError(f"--workflow-args key {shown(key.strip())} is given twice "
                                    f"({shown(result[key.strip()])}, then {shown(value)}); give it once")
        result[key.strip()] = value
    return result


def accepted_keys(workflow: WorkflowType) -> frozenset[str]:
    if workflow is WorkflowType.RELEASE:
        keys = set(COMMON_KEYS) | set(RELEASE_ARGS)
        for child in RELEASE_SEQUENCE:
            keys |= accepted_keys(child)
        return frozenset(keys)
    return COMMON_KEYS | frozenset(WORKFLOW_ARGS.get(workflow, {}))


def own_keys(workflow: WorkflowType) -> frozenset[str]:
    """The keys ``workflow`` takes on the command line: its children's, plus the comparison and
    verdict keys (``COMPARE_ARGS``, ``VERDICT_ARGS``) when its run ends with a report; those reach
    the reports step only. ``overlap`` (``RELEASE_ARGS``) too: a run of one client workflow has nothing
    to overlap, but the key is the orchestrator's, never a generation kwarg or request field passed through."""
    if workflow in (WorkflowType.SERVER, WorkflowType.DEPLOY):
        return accepted_keys(workflow)
    return accepted_keys(workflow) | frozenset(COMPARE_ARGS) | frozenset(VERDICT_ARGS) | frozenset(RELEASE_ARGS)


def overlap_enabled(args: dict[str, str], default: bool = True) -> bool:
    """Whether a release runs the workflows of one stage side by side: ``overlap`` when given, else
    ``default`` (the orchestrator's: on for an accelerator, off for a CPU engine, ``workflows.pipeline``)."""
    if "overlap" not in args:
        return default
    return args["overlap"] not in ("0", "false")


def passthrough_workflows(workflow: WorkflowType) -> tuple[WorkflowType, ...]:
    """The workflows (``workflow`` itself, or a release's children) that take keys they do not own."""
    chain = RELEASE_SEQUENCE if workflow is WorkflowType.RELEASE else (workflow,)
    return tuple(w for w in chain if w in PASSTHROUGH)


def passthrough_problem(workflow: WorkflowType, key: str, value: str) -> str | None:
    """Why ``workflow`` cannot pass ``key=value`` through, or None when it does."""
    if workflow not in PASSTHROUGH:
        return f"{workflow.value} takes only its own keys"
    return PASSTHROUGH[workflow].problem(key, value)


def passthrough_targets(workflow: WorkflowType, args: dict[str, str]) -> dict[str, list[str]]:
    """Each key ``workflow`` does not own -> the workflows it passes through to (recorded in cli_args.json)."""
    own = own_keys(workflow)
    return {key: [w.value for w in passthrough_workflows(workflow) if passthrough_problem(w, key, value) is None]
            for key, value in args.items() if key not in own}


def validate_workflow_args(workflow: WorkflowType, args: dict[str, str]) -> None:
    valid = own_keys(workflow)
    unknown = sorted(set(args) - valid)
    for key in unknown:
        close = difflib.get_close_matches(key, sorted(valid), n=1, cutoff=_TYPO_CUTOFF)
        if close:
            raise WorkflowArgsError(f"unknown --workflow-args key {shown(key)} for {workflow.value}; "
                                    f"did you mean {close[0]!r}?")
    targets = passthrough_workflows(workflow)
    if unknown and not targets:
        raise WorkflowArgsError(
            f"unknown --workflow-args key(s) for {workflow.value}: {', '.join(unknown)}; "
            f"valid keys: {', '.join(sorted(valid))}"
        )
    for key in unknown:
        if not _KEY_NAME.fullmatch(key):
            raise WorkflowArgsError(f"--workflow-args key {shown(key)} is not a setting name (letters, digits, _)")
        problems = [passthrough_problem(w, key, args[key]) for w in targets]
        if all(problems):
            raise WorkflowArgsError(problems[0])
    mode = args.get("mode")
    if mode is not None and mode not in MODES:
        raise WorkflowArgsError(f"--workflow-args mode={shown(mode)} is not one of: {', '.join(MODES)}")
    for key, choices in (("on_regression", ("fail", "warn")), ("compare_hosts", ("same", "any")),
                         ("perf_tiers", PERF_TIERS), ("overlap", ("1", "0", "true", "false"))):
        if key in args and args[key] not in choices:
            raise WorkflowArgsError(f"--workflow-args {key}={shown(args[key])} is not one of: {', '.join(choices)}")
    if "regression_tolerance" in args:
        try:
            tolerance = float(args["regression_tolerance"])
        except ValueError:
            tolerance = -1.0
        if not 0 <= tolerance < 1:
            raise WorkflowArgsError(f"--workflow-args regression_tolerance={shown(args['regression_tolerance'])} "
                                    f"is not a share between 0 and 1 (e.g. 0.05)")


def client_workflow_parser(description: str, *, server_required: bool = False) -> argparse.ArgumentParser:
    """The arguments every client workflow entry script accepts (the orchestrator's child contract).

    One definition, so the contract in docs/architecture.md cannot drift between entry scripts;
    a script adds its own flags to the parser it gets back.
    """
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
