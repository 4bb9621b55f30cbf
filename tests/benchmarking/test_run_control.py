"""Run control of the benchmarks workflow: consistent budgets, signals keep partial points, resume."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from benchmarking import run_control
from benchmarking.bench_args import BenchArgError, parse_workflow_args
from benchmarking.metrics import RequestRecord
from benchmarking.sse import finish_record
from contracts import REPO_ROOT
from tests.helpers import model_spec

SPEC = model_spec(model_id="fake-id", hf_model_repo="org/fake", served_model_name="m",
                  device_model_spec={"max_context": 1024, "max_concurrency": 1}).to_dict()
STEM = "point_isl-16_osl-20_con-1_n-4"


def test_stall_timeout_defaults_per_mode_and_must_fit_in_the_point_budget():
    assert parse_workflow_args({"mode": "smoke"}).stall_timeout_s == 60
    assert parse_workflow_args({"mode": "ci"}).stall_timeout_s == 300
    assert parse_workflow_args({"mode": "smoke", "stall_timeout_s": "5"}).stall_timeout_s == 5
    with pytest.raises(BenchArgError, match="must exceed stall_timeout_s"):
        parse_workflow_args({"stall_timeout_s": "30", "point_budget_s": "30"})
    # the mode default budget is raised above a long stall timeout; a configured one is kept
    assert run_control.point_budget(None, 120, 300) == 300 + run_control.STALL_MARGIN_S
    assert run_control.point_budget(None, 120, 60) == 120
    assert run_control.point_budget(400, 120, 300) == 400


def test_server_gone_only_when_nothing_succeeded():
    rows = [{"success": False, "error_class": "stall"}, {"success": False, "error_class": "http_5xx"}]
    assert run_control.server_gone(rows) == "stall"
    assert run_control.server_gone(rows + [{"success": True, "error_class": None}]) is None
    assert run_control.server_gone([{"success": False, "error_class": "http_5xx"}]) is None


def test_failure_summary_counts_classes_over_points():
    recs = [{"metrics": {"completed": 3, "failed": 1, "failures_by_class": {"http_5xx": 1}}},
            {"metrics": {"completed": 0, "failed": 8, "failures_by_class": {"stall": 4, "http_5xx": 4}}}]
    assert run_control.failure_summary(recs) == "http_5xx 5, stall 4 (of 12 requests in 2 point(s))"
    assert run_control.failure_summary([{"metrics": {"completed": 2, "failed": 0}}]) == ""


def test_a_content_event_without_data_field_is_malformed():
    r = RequestRecord(index=0, request_id="r", prompt_len=1, requested_output_len=2)
    r.send_time = 0.0
    good = b'data: {"choices":[{"index":0,"text":" a"}]}\n\n'
    finish_record(r, [good + b'{"choices":[{"index":0,"text":" b"}]}\n\n' + b"data: [DONE]\n\n"], [0.1], chat=False)
    assert (r.success, r.error_class) == (False, "malformed_sse")
    r2 = RequestRecord(index=0, request_id="r", prompt_len=1, requested_output_len=2)
    r2.send_time = 0.0
    finish_record(r2, [b": keep-alive\n\nevent: x\ndata: {\"choices\":[]}\n\n" + good + b"data: [DONE]\n\n"], [0.1],
                  chat=False)
    assert r2.success, r2.error


def _bench(run_dir: str, url: str, wargs: dict) -> subprocess.Popen:
    os.makedirs(run_dir, exist_ok=True)
    spec = os.path.join(run_dir, "model_spec.json")
    with open(spec, "w") as fh:
        json.dump(SPEC, fh)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TT_SERVED_MODEL_NAME="m", TT_TOKENIZER_DIR="")
    env.pop("OPENAI_API_KEY", None)
    return subprocess.Popen([sys.executable, "-m", "benchmarking.run_benchmarks", "--run-dir",
                             run_dir, "--model-spec-json", spec, "--server-url", url, "--workflow-args-json",
                             json.dumps(wargs), "--disable-trace-capture"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


@pytest.fixture
def slow_fake(tmp_path, fake_server_process):
    # 20 tokens x 50 ms = 1 s a request: a 4-request point at concurrency 1 takes ~4 s
    log = tmp_path / "fake.requests.jsonl"
    fake = fake_server_process("benchmarking.fault_server", "--model", "m", "--itl-ms", "50", "--request-log", str(log))
    return fake.url, log


def _wait_for_second_request(log) -> None:
    end = time.monotonic() + 60
    while time.monotonic() < end and (not log.exists() or len(log.read_text().splitlines()) < 2):
        time.sleep(0.1)  # until the first request is done and the second in flight
    time.sleep(0.3)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_mid_point_writes_a_partial_point_and_resume_reruns_it(tmp_path, slow_fake, signum):
    url, log = slow_fake
    run_dir = str(tmp_path / "run")
    bdir = os.path.join(run_dir, "benchmarks")
    proc = _bench(run_dir, url, {"points": "16x20x1x4"})
    _wait_for_second_request(log)
    proc.send_signal(signum)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum, out
    rec = json.load(open(os.path.join(bdir, STEM + ".json")))
    assert rec["interrupted"] == signal.Signals(signum).name and rec["complete"] is False
    rows = [json.loads(line) for line in open(os.path.join(bdir, STEM + ".requests.jsonl"))]
    assert rows and all(r["success"] for r in rows) and len(rows) == rec["metrics"]["completed"] < 4
    assert rec["metrics"]["failed"] == 0  # cut requests are not the server's failures
    assert f"INTERRUPTED by {signal.Signals(signum).name}" in out.strip().splitlines()[-1]
    again = _bench(run_dir, url, {"points": "16x20x1x4"})
    out2, _ = again.communicate(timeout=60)
    assert again.returncode == 0 and "skipping (resume)" not in out2, out2
    rec = json.load(open(os.path.join(bdir, STEM + ".json")))
    assert rec["complete"] is True and rec["interrupted"] is None and rec["metrics"]["completed"] == 4


def test_parent_death_with_stdout_gone_still_writes_the_partial_point(tmp_path, slow_fake):
    """run.py SIGKILLed: its pipe has no reader and the parent-death SIGTERM arrives; the files come first."""
    url, log = slow_fake
    run_dir = str(tmp_path / "run")
    proc = _bench(run_dir, url, {"points": "16x20x1x4"})
    _wait_for_second_request(log)
    proc.stdout.close()  # the reader is gone: every later write to stdout fails with EPIPE
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    rec = json.load(open(os.path.join(run_dir, "benchmarks", STEM + ".json")))
    assert rec["interrupted"] == "SIGTERM" and rec["complete"] is False and rec["metrics"]["completed"] >= 1
    outputs = json.load(open(os.path.join(run_dir, "benchmarks", "outputs.json")))
    assert outputs["interrupted"] == "SIGTERM"
