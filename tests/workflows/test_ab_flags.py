"""--baseline-url and --baseline-vllm-args: checked before anything starts (one line, exit 2), and what they
hand the benchmarks client."""
from __future__ import annotations

import subprocess
import sys

import pytest

from contracts import REPO_ROOT
from workflows.catalog import load_catalog
from workflows.cli import UsageError, parse_args

CATALOG = load_catalog()
BASE = ("--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "benchmarks")


def error_of(*argv: str) -> str:
    with pytest.raises(UsageError) as info:
        parse_args([*BASE, *argv], CATALOG)
    return str(info.value)


def test_a_baseline_url_is_checked_and_normalised_as_server_url_is() -> None:
    args = parse_args([*BASE, "--server-url", "http://127.0.0.1:9001", "--baseline-url", "127.0.0.1:9002/v1"], CATALOG)
    assert args.baseline_url == "http://127.0.0.1:9002" and args.baseline_vllm_args is None
    assert args.flags["baseline_url"] == "127.0.0.1:9002/v1"  # cli_args.json: as typed


@pytest.mark.parametrize("argv, says", [
    (("--baseline-url", "ftp://host:1"), "--baseline-url 'ftp://host:1': scheme 'ftp' is not supported"),
    (("--baseline-url", "http://user:pw@host:1"), "--baseline-url 'http://***@host:1' carries credentials"),
    (("--baseline-url", ""), "--baseline-url is empty"),
    (("--server-url", "http://127.0.0.1:9001", "--baseline-url", "http://127.0.0.1:9001/v1"),
     "is this run's own server: an A/B needs two servers"),
    (("--baseline-url", "http://h:1", "--baseline-vllm-args", "{}"), "name two baselines; pick one"),
    (("--baseline-vllm-args", '{"max_num_seqs": 1}'), "use it with --local-server"),
    (("--local-server", "--baseline-vllm-args", "[1]"), "--baseline-vllm-args must be a JSON object"),
    (("--local-server", "--baseline-vllm-args", '{"port": 9}'), "port is the baseline server's own"),
    (("--baseline-url", "http://h:1", "--workflow-args", "regression_tolerance=2"),
     "regression_tolerance='2' is not a share"),
])
def test_bad_baseline_flags_are_one_line(argv, says) -> None:
    message = error_of(*argv)
    assert says in message and "\n" not in message


def test_a_baseline_needs_a_workflow_with_benchmarks_or_evals() -> None:
    with pytest.raises(UsageError, match="use --workflow benchmarks, evals or release"):
        parse_args(["--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "stress_tests",
                     "--baseline-url", "http://h:1"], CATALOG)
    evals = parse_args(["--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "evals",
                        "--baseline-url", "http://h:1"], CATALOG)
    assert evals.baseline_url == "http://h:1"


def test_run_py_exits_2_with_one_line_on_a_bad_baseline_url() -> None:
    done = subprocess.run([sys.executable, str(REPO_ROOT / "run.py"), *BASE, "--baseline-url", "file:///etc/passwd"],
                          capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--baseline-url" in lines[0] and "scheme 'file' is not supported" in lines[0], lines


class _Handle:
    def __init__(self, kind: str) -> None:
        self.kind, self.base_url, self.stopped = kind, "http://127.0.0.1:9002", None

    def stop(self, timeout: float) -> None:
        self.stopped = timeout


def _ctx(handle, **options):
    from types import SimpleNamespace

    from workflows.catalog import load_catalog as catalog
    from workflows.cli import resolve_spec

    args = parse_args([*BASE, "--local-server", *options.get("argv", ())], CATALOG)
    return SimpleNamespace(options=args, spec=resolve_spec(args, catalog()), baseline=handle)


def test_teardown_stops_a_started_baseline_and_leaves_an_attached_one_alone() -> None:
    from workflows.ab_servers import stop_baseline

    local = _Handle("local")
    ctx = _ctx(local, argv=("--baseline-vllm-args", '{"max_num_seqs": 1}'))
    assert stop_baseline(ctx, 20.0) == "baseline server stopped" and local.stopped == 20.0 and ctx.baseline is None
    external = _Handle("external")
    assert stop_baseline(_ctx(external), 20.0) is None and external.stopped is None


def test_the_benchmarks_client_gets_the_baseline_label_and_tolerance() -> None:
    from workflows.ab_servers import child_args

    ctx = _ctx(_Handle("local"), argv=("--baseline-vllm-args", '{"max_num_seqs": 1}', "--workflow-args",
                                       "regression_tolerance=0.1"))
    assert child_args(ctx) == ["--baseline-url", "http://127.0.0.1:9002", "--baseline-label",
                               '--baseline-vllm-args {"max_num_seqs": 1}', "--baseline-tolerance", "0.1"]
    assert child_args(_ctx(None)) == []
