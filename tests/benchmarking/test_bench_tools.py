"""Other load generators (tool=aiperf|guidellm|vllm) driving benchmarks points: the real tools against the
stub, their output parsed into our rows and point records, and the NOT RUN path when a tool cannot run."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarking import tools
from benchmarking.bench_args import BenchArgError, parse_workflow_args
from contracts import REPO_ROOT
from records.bench import BenchPoint
from tests.helpers import model_spec

SPEC = model_spec(model_id="stub-id", hf_model_repo="org/stub", served_model_name="stub-model", device_model_spec={
    "max_context": 1024, "max_concurrency": 4, "perf_reference": [
        {"isl": 16, "osl": 8, "max_concurrency": 2, "num_prompts": 6, "task_type": "text",
         "targets": {"functional": {"ttft_ms": 5000, "tput_user": 1, "tput": 2}}}]}).to_dict()


def tool_bin(name: str) -> dict[str, str]:
    """``TT_<TOOL>_BIN`` of the tool's pinned venv, built as run.py builds it (``workflows.venvs``)."""
    from benchmarking.tools import bin_variable, module
    from workflows.venvs import ensure_venv

    info = ensure_venv(module(name).VENV)
    return {bin_variable(name): str(info.path / "bin" / module(name).EXECUTABLE)}


def _bench(run_dir: Path, url: str, wargs: dict, tokenizer_dir: str, env_extra: dict | None = None):
    run_dir.mkdir(parents=True, exist_ok=True)
    spec = run_dir / "model_spec.json"
    spec.write_text(json.dumps(SPEC))
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TT_SERVED_MODEL_NAME="stub-model",
               TT_TOKENIZER_DIR=tokenizer_dir, OPENAI_API_KEY="sekrit-key", HF_HUB_OFFLINE="1",
               **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "benchmarking.run_benchmarks", "--run-dir", str(run_dir),
                           "--model-spec-json", str(spec), "--server-url", url, "--disable-trace-capture",
                           "--workflow-args-json", json.dumps(wargs)],
                          capture_output=True, text=True, env=env, timeout=300)


def _point(run_dir: Path) -> tuple[BenchPoint, list[dict]]:
    [path] = [p for p in (run_dir / "benchmarks").glob("point_*.json")]
    rec = BenchPoint.read(str(path))
    with open(run_dir / rec.requests_file, encoding="utf-8") as fh:
        return rec, [json.loads(line) for line in fh]


@pytest.mark.integration
@pytest.mark.parametrize("name", ["aiperf", "guidellm"])
def test_real_tool_against_the_stub_gives_our_point_record(name, stub_factory, tmp_path, hf_tokenizer_dir):
    """The tool runs from its pinned venv against the delay-programmed stub (TTFT 30 ms, 5 ms gaps); its own
    output is parsed into our rows, and the record names the tool, its version and its exact command."""
    stub = stub_factory("--ttft-ms", "30", "--itl-ms", "5")
    # aiperf measures the point's 6 requests, then a second round (6 requests decide no target); guidellm, the
    # slowest to start, is given 8 at once, which decide it in one run
    extra = {} if name == "aiperf" else {"points": "16x8x2x8"}
    p = _bench(tmp_path / "run", stub.url, {"mode": "smoke", "tool": name, **extra}, hf_tokenizer_dir, tool_bin(name))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rec, rows = _point(tmp_path / "run")
    assert rec.tool == name and rec.tool_version and rec.prompts_from == "ours"
    assert rec.tool_command.split()[1] in ("profile", "run") and "sekrit-key" not in rec.tool_command
    assert "<redacted>" in rec.tool_command and rec.raw_file and (tmp_path / "run" / rec.raw_file).exists()
    # adaptive rounds as our client's: the point's 6, then more while a required target is undecided
    assert rec.sampling is not None and rec.sampling.requests == len(rows) == rec.metrics.completed >= 6
    assert rec.sampling.rounds >= 2 if name == "aiperf" else rec.sampling.rounds == 1
    assert rec.sampling.stop_reason in ("decided", "precision", "sample_budget") and rec.metrics.failed == 0
    assert len({r["request_id"] for r in rows}) == len(rows)
    assert all(r["success"] and r["output_tokens"] == 8 for r in rows)
    # programmed TTFT 30 ms and 5 ms between tokens: what the tool saw, within a loaded machine's slack
    assert 29.0 <= rec.metrics.mean_ttft_ms < 200.0
    assert 4.0 <= rec.metrics.mean_tpot_ms < 50.0
    assert rec.targets["functional"]["decision"] in ("pass", "inconclusive")
    if name == "aiperf":
        assert all(len(r["chunk_times_ms"]) >= 2 for r in rows) and rec.metrics.mean_itl_ms is not None
    else:
        assert rec.metrics.mean_itl_ms is None and any("inter-chunk" in w for w in rec.warnings)


@pytest.mark.integration
def test_aiperf_failed_requests_are_failures_of_the_point(stub_factory, tmp_path, hf_tokenizer_dir):
    stub = stub_factory("--ttft-ms", "5", "--itl-ms", "1", "--fault", "http:503:3")
    p = _bench(tmp_path / "run", stub.url, {"mode": "smoke", "tool": "aiperf"}, hf_tokenizer_dir,
               tool_bin("aiperf"))
    rec, rows = _point(tmp_path / "run")
    assert rec.metrics.failed == 2 and rec.metrics.completed == 4, p.stdout[-2000:]
    assert rec.metrics.failures_by_class == {"http_5xx": 2}
    assert sum(not r["success"] for r in rows) == 2


@pytest.mark.parametrize("binary,why", [("/nonexistent/aiperf", "is not an executable file"), ("false", "exit 1"),
                                        ("", "is not set")])
def test_a_tool_that_cannot_run_leaves_the_point_not_run(binary, why, stub_factory, tmp_path, hf_tokenizer_dir):
    """One clear line, no point record, exit 1: never a silent fallback to our client."""
    stub = stub_factory()
    exe = shutil.which(binary) or binary
    p = _bench(tmp_path / "run", stub.url, {"mode": "smoke", "tool": "aiperf"}, hf_tokenizer_dir,
               env_extra={"TT_AIPERF_BIN": exe})
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    lines = [ln for ln in p.stdout.splitlines() if "NOT RUN" in ln]
    assert lines and all(why in ln for ln in lines), p.stdout[-2000:]
    assert not list((tmp_path / "run" / "benchmarks").glob("point_*.json"))
    outputs = json.loads((tmp_path / "run" / "benchmarks" / "outputs.json").read_text())
    assert len(outputs["not_run_points"]) == 1


def test_bad_tool_value_exits_2_listing_the_valid_ones(stub_factory, tmp_path, hf_tokenizer_dir):
    p = _bench(tmp_path / "run", "http://127.0.0.1:9", {"mode": "smoke", "tool": "locust"}, hf_tokenizer_dir)
    assert p.returncode == 2
    assert "tool='locust': expected one of ours, vllm, aiperf, guidellm" in p.stdout + p.stderr


def test_tool_args_refuse_what_only_our_client_does():
    assert parse_workflow_args({"tool": "aiperf"}).tool == "aiperf"
    assert parse_workflow_args({}).tool == "ours"
    for raw in ({"tool": "guidellm", "ramp": "1:2"}, {"tool": "aiperf", "workload": "multi_turn"},
                {"tool": "aiperf", "tools": "tt,vllm"}, {"tool": "vllm", "dataset": "shared_prefix"},
                {"tool": "aiperf", "warmup_requests": "2"}):
        with pytest.raises(BenchArgError):
            parse_workflow_args(raw)


def test_every_tool_module_has_what_the_driver_needs():
    for name in tools.TOOLS:
        mod = tools.module(name)
        assert mod.PROMPTS in ("ours", "tool") and callable(mod.command) and callable(mod.parse)
        assert mod.VENV and mod.EXECUTABLE and mod.DISTRIBUTION
    assert tools.CHOICES[0] == "ours" and set(tools.RECORD_TOOL) == set(tools.CHOICES)


@pytest.mark.slow
@pytest.mark.integration
def test_run_py_smoke_with_aiperf_against_the_real_cpu_server(real_cpu_server, tmp_path):
    """Slow: AIPerf measures a perf-reference point of the session's real vLLM CPU server through run.py, tool
    venv and run.py start included (30-60 s: one point, one round).

    The README's command with tool=aiperf ends with a verdict judged from point records that name aiperf."""
    cmd = [sys.executable, str(REPO_ROOT / "run.py"), "--model", "SmolLM2-135M-Instruct", "--device", "cpu",
           "--server-url", real_cpu_server.base_url, "--workflow", "benchmarks", "--output-dir", str(tmp_path / "run"),
           "--workflow-args", "mode=smoke tool=aiperf points=128x32x4x8 sample_budget_s=1"]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1500, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, API_KEY=real_cpu_server.api_key))
    out = proc.stdout + proc.stderr
    assert proc.returncode in (0, 4) and "VERDICT: " in out, out[-4000:]   # PASS, or INCONCLUSIVE on few samples
    run_dir = tmp_path / "run"
    points = sorted((run_dir / "benchmarks").glob("point_*.json"))
    assert points and all(BenchPoint.read(str(p)).tool == "aiperf" for p in points)
    assert all(BenchPoint.read(str(p)).metrics.completed for p in points)
