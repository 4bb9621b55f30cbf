"""--workflow-args values refused before any work: one line, exit 2, before the server is contacted or started."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from contracts import REPO_ROOT
from contracts.workflow_args import WorkflowType
from workflows.arg_values import check_values, point_problem
from workflows.catalog import load_catalog
from workflows.cli import parse_args, resolve_spec

CATALOG = load_catalog()
SPEC = resolve_spec(parse_args(["--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "benchmarks",
                                "--local-server"], CATALOG), CATALOG)


@pytest.mark.parametrize("workflow, args, says", [
    (WorkflowType.BENCHMARKS, {"points": "128x32x0"}, "'128x32x0'"),
    (WorkflowType.BENCHMARKS, {"points": "99999999x99999999x4"}, "exceeds the model's max_context"),
    (WorkflowType.BENCHMARKS, {"points": "64x16x1,64x16x1x8"}, "given twice"),
    (WorkflowType.BENCHMARKS, {"num_prompts": "0"}, "num_prompts"),
    (WorkflowType.RELEASE, {"points": "64x16x99999999"}, "concurrency 99999999"),
    (WorkflowType.STRESS_TESTS, {"input_size": "0"}, "input_size"),
    (WorkflowType.STRESS_TESTS, {"max_concurrent": "999999"}, "concurrency 999999"),
    (WorkflowType.EVALS, {"limit": "0"}, "limit"),
])
def test_bad_values_are_named(workflow, args, says) -> None:
    problem = check_values(workflow, args, SPEC)
    assert problem is not None and says in problem and "\n" not in problem


@pytest.mark.parametrize("workflow, args", [
    (WorkflowType.RELEASE, {"mode": "smoke"}), (WorkflowType.BENCHMARKS, {"points": "64x16x1,128x32x4x8"}),
    (WorkflowType.STRESS_TESTS, {"mode": "ci"}), (WorkflowType.EVALS, {"limit": "3"}),
])
def test_good_values_pass(workflow, args) -> None:
    assert check_values(workflow, args, SPEC) is None


def test_point_problem_without_a_context_length() -> None:
    assert point_problem(1 << 25, 1, 1, 1, None).startswith("33554432 tokens")
    assert point_problem(128, 128, 1, 1, None) is None


@pytest.mark.parametrize("points", ["128x32x0", "99999999x99999999x4"])
def test_run_py_refuses_a_bad_point_before_reaching_the_server(points, tmp_path) -> None:
    """An unreachable --server-url is never contacted: the point is refused first (exit 2, one line)."""
    started = time.monotonic()
    result = subprocess.run([sys.executable, str(REPO_ROOT / "run.py"), "--model", "SmolLM2-135M-Instruct",
                             "--workflow", "benchmarks", "--device", "cpu", "--server-url", "http://127.0.0.1:9",
                             "--workflow-args", f"points={points}", "--output-dir", str(tmp_path / "run")],
                            capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    took = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("run.py: error: --workflow-args (benchmarks): point ")
    assert not (tmp_path / "run").exists()
    assert took < 10  # under a second on an idle host; the bound leaves room for a shared 2-core runner
