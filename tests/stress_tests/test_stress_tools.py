"""Another load generator (tool=aiperf|guidellm|vllm) sending the stress workflow's fixed-size load points: the
real tool against the stub, judged as our client's point; a tool that cannot run leaves its point not run; what
only our client does (endurance, capacity, workload=, saturation) is refused up front."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarking import tools
from benchmarking.metrics import RequestRecord
from contracts.workflow_args import WorkflowType
from records.stress import StressPointRecord, StressRecord
from stress_tests import tool_point
from stress_tests.args import StressArgError, parse_stress_args
from tests.benchmarking.conftest import hf_tokenizer_dir, tiny_tokenizer_dir  # noqa: F401 - fixtures
from tests.benchmarking.test_bench_tools import tool_bin
from tests.stress_tests.test_stress_workflow import run_stress, stub  # noqa: F401 - stub is a fixture

POINT = {"input_size": "16", "output_size": "8", "num_prompts": "6", "max_concurrent": "2"}


def _record(run_dir: Path) -> StressRecord:
    return StressRecord.read(run_dir / "stress_tests" / "stress_record.json")


@pytest.mark.integration
def test_aiperf_sends_the_single_point_judged_as_ours(stub, tmp_path, hf_tokenizer_dir):  # noqa: F811
    """AIPerf from its pinned venv sends the ci run's single point to the delay-programmed stub (TTFT 30 ms, 5 ms
    gaps, every third request answered 500): the record names the tool, its rows are counted and its error rate
    is judged as our client's would be (2 of 6 failed: fail, exit 1); capacity, left out with tool=, is logged.
    One run of the tool (its start-up is 15-40 s of a 2-core host): a passing point is the same path."""
    url, _ = stub("--ttft-ms", "30", "--itl-ms", "5", "--fault", "http:500:3")
    proc = run_stress(tmp_path, url, {"mode": "ci", "tool": "aiperf", **POINT}, api_key="sekrit-key",
                      tokenizer_dir=hf_tokenizer_dir, env_extra=tool_bin("aiperf"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "FAILED" in proc.stdout, out[-4000:]
    assert "not run: capacity (needs our client" in out and "saturation detector does not run" in out
    stress = _record(tmp_path)
    (point,) = stress.points
    assert point.mode == "single" and stress.run_modes == ["single"]
    assert not (tmp_path / "stress_tests" / "capacity_record.json").exists()
    assert point.tool == "aiperf" and point.tool_version and point.tool_version != "unknown"
    assert point.tool_command.split()[1] == "profile" and "<redacted>" in point.tool_command
    assert "sekrit-key" not in point.tool_command and any("one window" in w for w in point.warnings)
    assert (point.sent, point.completed, point.failed, point.not_sent) == (6, 4, 2, 0)
    error = point.checks["error_rate"]
    assert (error["n"], error["decision"], error["value"]) == (6, "fail", 0.3333) and "2 of 6 failed" in error["detail"]
    assert point.passed is False and point.failures_by_class == {"http_5xx": 2} and "error_rate" in point.detail
    assert len(point.windows) == 1 and point.windows[0]["completed"] == 4 and point.saturation is None
    # the stub's programmed 30 ms TTFT is a floor; a busy 2-core host only adds (timing itself: test_bench_tools.py)
    assert point.ttft_ms.count == 4 and point.ttft_ms.min >= 29.0 and point.tpot_ms.count == 4
    rows = [json.loads(ln) for ln in (tmp_path / point.requests_file).read_text().splitlines()]
    assert len(rows) == 6 and sum(not r["success"] for r in rows) == 2
    # the tool's wall-clock send times moved onto our clock: within the server-state sampler's seconds
    origin = point.server_state["origin_perf_s"]
    assert all(0 <= r["send_time_s"] - origin < 300 for r in rows), [r["send_time_s"] - origin for r in rows]
    assert list((tmp_path / "stress_tests" / "aiperf_raw" / point.name).glob("artifacts/*.jsonl"))


def test_a_tool_that_cannot_run_leaves_its_point_not_run(stub, tmp_path):  # noqa: F811
    """One line saying why, the point recorded not run and naming the tool, exit 1: never our client instead."""
    url, _ = stub()
    proc = run_stress(tmp_path, url, {"mode": "smoke", "tool": "aiperf", **POINT},
                      env_extra={"TT_AIPERF_BIN": "/nonexistent/aiperf"})
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    lines = [ln for ln in proc.stdout.splitlines() if "NOT RUN" in ln]
    assert len(lines) == 1 and "TT_AIPERF_BIN=/nonexistent/aiperf is not an executable file" in lines[0], lines
    stress = _record(tmp_path)
    (point,) = stress.points
    assert (point.status, point.passed, point.tool, point.sent) == ("not_run", False, "aiperf", 0)
    assert "is not an executable file" in point.detail and point.requests_file is None
    assert stress.status == "failed" and "FAILED" in proc.stdout
    outputs = json.loads((tmp_path / "stress_tests" / "outputs.json").read_text())["outputs"]
    assert outputs == ["stress_tests/stress_record.json"]


@pytest.mark.parametrize("raw, message", [
    ({"run_mode": "endurance"}, "run_mode=endurance needs our client"),
    ({"run_mode": "single,capacity"}, "run_mode=capacity needs our client"),
    ({"workload": "multi_turn"}, "workload=multi_turn needs our client"),
    ({"saturation": "on"}, "saturation=on"),
    ({"slo": "ttft_p99:100", "endurance_s": "5"}, "endurance_s, slo apply to capacity and endurance only"),
])
def test_what_only_our_client_does_is_refused_with_a_tool(raw, message):
    with pytest.raises(StressArgError, match=message):
        parse_stress_args({"tool": "guidellm", **raw})


@pytest.mark.parametrize("args", [{"tool": "aiperf", "run_mode": "endurance"}, {"tool": "locust"}])
def test_a_refused_tool_run_exits_2_before_any_request(tmp_path, args):
    proc = run_stress(tmp_path, "http://127.0.0.1:9", args)
    assert proc.returncode == 2 and "stress_tests: error: tool=" in proc.stderr, proc.stderr


def test_a_tool_keeps_the_fixed_size_modes_of_the_size_defaults():
    """smoke and ci default to single (ci's capacity left out, named), full to multiple (endurance and capacity
    left out); the saturation detector is off; run modes given are kept; tool=ours is unchanged."""
    assert [(a.run_modes, a.tool_left_out, a.saturation) for a in
            (parse_stress_args({"mode": m, "tool": "aiperf"}) for m in ("smoke", "ci", "full"))] == [
        (("single",), (), False), (("single",), ("capacity",), False),
        (("multiple",), ("endurance", "capacity"), False)]
    assert parse_stress_args({"tool": "vllm", "run_mode": "custom", "custom_concurrency_values": "1,2",
                              "saturation": "off"}).run_modes == ("custom",)
    ours = parse_stress_args({"mode": "ci"})
    assert (ours.tool, ours.run_modes, ours.saturation) == ("ours", ("single", "capacity"), True)


def test_the_tool_rows_become_one_window_on_our_clock():
    """Wall-clock send times shift onto perf_counter; one window holds every row; unsent requests are counted."""
    rows = [RequestRecord(index=i, request_id=f"r{i}", prompt_len=4, requested_output_len=2,
                          send_time=1.7e9 + i, success=i != 1, latency=0.5, ttft=0.1,
                          error_class=None if i != 1 else "http_5xx") for i in range(3)]
    run = tools.ToolRun(rows=rows, duration=2.5, raw_file="x", version="1.0", command="aiperf profile",
                        prompts="ours", warnings=["its own"])
    tool_point.on_our_clock(rows, 1.7e9 - 100.0)
    assert [r.send_time for r in rows] == [100.0, 101.0, 102.0]
    load = tool_point.as_load_run(run, num_prompts=4)
    assert load.not_sent == 1 and load.duration_s == 2.5 and load.saturation is None
    (window,) = load.windows
    assert (window.t_end, window.completed, window.failed) == (2.5, 2, 1)
    rec = StressPointRecord(name="p", mode="single")
    tool_point.name_tool(rec, "aiperf", run)
    assert (rec.tool, rec.tool_version, rec.tool_command) == ("aiperf", "1.0", "aiperf profile")
    assert rec.warnings[-1] == "its own" and "one window" in rec.warnings[0]


def test_the_tool_venv_is_built_for_an_llm_stress_run():
    """tool= builds its venv for stress_tests (an LLM model; a media kind's stress client refuses it) as for
    benchmarks; agreement= is a benchmarks key only."""
    from workflows.pipeline import load_tool_venvs

    def ctx(args: dict, model_type: str = "LLM"):
        return SimpleNamespace(options=SimpleNamespace(workflow_args=args), spec=SimpleNamespace(model_type=model_type))

    stress = [WorkflowType.STRESS_TESTS]
    assert load_tool_venvs(ctx({"tool": "guidellm"}), stress) == ["guidellm"]  # type: ignore[arg-type]
    assert load_tool_venvs(ctx({"agreement": "aiperf"}), stress) == []  # type: ignore[arg-type]
    assert load_tool_venvs(ctx({"tool": "ours"}), stress) == []  # type: ignore[arg-type]
    assert load_tool_venvs(ctx({"tool": "aiperf"}, "CNN"), stress) == []  # type: ignore[arg-type]
    both = [WorkflowType.BENCHMARKS, WorkflowType.STRESS_TESTS]
    assert load_tool_venvs(ctx({"tool": "aiperf", "agreement": "guidellm"}), both) == [  # type: ignore[arg-type]
        "aiperf", "guidellm"]
