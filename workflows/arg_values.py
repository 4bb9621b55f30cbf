"""The values of --workflow-args checked before any work: zero or absurd sizes, bad numbers, duplicate points.

Why here, before the run directory, the venvs or the server: the client workflows parse their own values
(``benchmarking.bench_args``, ``stress_tests.args``) when they start, which is after a server start that may
take minutes, or after "cannot reach the server" when the URL is wrong; a value that can be judged from the
spec alone must be refused in one line, exit 2, in well under a second. The client parsers are the only
parsers: this module runs them early with the keys each child will get (``workflows.clients.args_for``) and the
resolved spec, so the two can never disagree. Media specs have their own clients and are checked there.
"""
from __future__ import annotations

from contracts.model_spec import ModelSpec
from contracts.workflow_args import RELEASE_SEQUENCE, WorkflowType

# sizes beyond these describe no server: refused even where the spec gives no context length
MAX_TOKENS = 1 << 24          # a prompt or an output of more than 16M tokens
MAX_CONCURRENCY = 1 << 16     # more simultaneous requests than a client host has sockets
MAX_PROMPTS = 1_000_000       # requests of one point


def check_values(workflow: WorkflowType, args: dict[str, str], spec: ModelSpec) -> str | None:
    """Why the values of ``args`` cannot run ``workflow`` for ``spec`` (one line), or None when they can."""
    from records.media import kind_of
    from workflows.clients import args_for

    if kind_of(spec.model_type) is not None:
        return None
    chain = RELEASE_SEQUENCE if workflow is WorkflowType.RELEASE else (workflow,)
    for child in chain:
        check = _CHECKS.get(child)
        problem = check(args_for(child, args), spec) if check else None
        if problem:
            return problem
    return None


def _benchmarks(args: dict[str, str], spec: ModelSpec) -> str | None:
    from benchmarking.bench_args import parse_workflow_args
    from benchmarking.sweeps import build_points

    try:
        bench = parse_workflow_args(args)
    except ValueError as exc:
        return f"--workflow-args (benchmarks): {exc}"
    if bench.workload:  # the trace itself is read by workflows.main._check_trace
        return None
    for point in build_points(spec, bench):
        problem = point_problem(point.isl, point.osl, point.max_concurrency, point.num_prompts,
                                spec.device_model_spec.max_context)
        if problem:
            return f"--workflow-args (benchmarks): point {point.isl}x{point.osl}x{point.max_concurrency}: {problem}"
    return None


def _stress(args: dict[str, str], spec: ModelSpec) -> str | None:
    from stress_tests.args import parse_stress_args
    from stress_tests.plan import expand

    try:
        points = expand(parse_stress_args(args), spec)
    except ValueError as exc:
        return f"--workflow-args (stress_tests): {exc}"
    for point in points:
        isl, osl, con, n = point.isl, point.osl, point.concurrency, point.num_prompts
        problem = point_problem(isl, osl, con, n, spec.device_model_spec.max_context)
        if problem:
            return f"--workflow-args (stress_tests): point {isl}x{osl}x{con}: {problem}"
    return None


def point_problem(isl: int, osl: int, concurrency: int, prompts: int, max_context: int | None) -> str | None:
    """Why a point of these sizes measures nothing (every request refused, or a size no host can send)."""
    if min(isl, osl, concurrency, prompts) < 1:
        return "every size must be at least 1"
    if max_context and isl + osl > int(max_context):
        return (f"ISL+OSL = {isl + osl} exceeds the model's max_context {int(max_context)}: the server would "
                "refuse every request")
    if max(isl, osl) > MAX_TOKENS:
        return f"{max(isl, osl)} tokens is beyond any context ({MAX_TOKENS})"
    if concurrency > MAX_CONCURRENCY:
        return f"concurrency {concurrency} is beyond what one client host can hold open ({MAX_CONCURRENCY})"
    if prompts > MAX_PROMPTS:
        return f"{prompts} requests in one point is beyond {MAX_PROMPTS}"
    return None


def _evals(args: dict[str, str], spec: ModelSpec) -> str | None:
    from evals.eval_spec import parse_workflow_args

    try:
        parse_workflow_args(args)
    except ValueError as exc:
        return f"--workflow-args (evals): {exc}"
    return None


_CHECKS = {WorkflowType.BENCHMARKS: _benchmarks, WorkflowType.STRESS_TESTS: _stress, WorkflowType.EVALS: _evals}
