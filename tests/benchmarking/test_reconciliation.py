"""A point reconciles the server's counters with what its client sent: clean alone, contaminated beside a
second client, uncounted when the server saw less; and a client made to fall behind is called client-bound."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from benchmarking import reconcile as R
from benchmarking.client import ClientConfig, RawTransport
from benchmarking.prompts import request_body
from benchmarking.runner import WorkItem, run_point
from contracts import REPO_ROOT
from records.judge_benchmarks import tier_target_checks
from records.reconciliation import Pacing, Reconciliation, counter_deltas, reconcile, status_of
from records.report import TargetRow, TierCheck
from tests.benchmarking.test_bench_stub_runs import SPEC

CLIENT = {"sent": 8, "completed": 7, "prompt_tokens": 700, "generation_tokens": 224, "failed_prompt_tokens": 100,
          "failed_max_tokens": 32}


@pytest.mark.parametrize("server, status", [
    ({"requests": 7, "prompt_tokens": 700, "generation_tokens": 224}, "clean"),
    ({"requests": 8, "prompt_tokens": 800, "generation_tokens": 240}, "clean"),   # the failed one was counted
    ({"requests": 9, "prompt_tokens": 800, "generation_tokens": 240}, "contaminated"),
    ({"requests": 8, "prompt_tokens": 801, "generation_tokens": 240}, "contaminated"),
    ({"requests": 6, "prompt_tokens": 700, "generation_tokens": 224}, "uncounted"),
    ({"requests": 7, "prompt_tokens": 700, "generation_tokens": 223}, "uncounted"),
    (None, "not_reconciled"), ({}, "not_reconciled"),
])
def test_reconcile_rules(server, status) -> None:
    got, detail = reconcile(CLIENT, server)
    assert got == status, detail


def test_token_slack_covers_counts_that_are_not_the_servers() -> None:
    assert reconcile(CLIENT, {"requests": 7, "prompt_tokens": 698, "generation_tokens": 224}, token_slack=2)[0] == \
        "clean"


def test_counter_deltas_sum_label_sets_and_skip_other_families() -> None:
    before = {'vllm:request_success_total{finished_reason="length"}': 3.0, "vllm:num_requests_running": 1.0}
    after = {'vllm:request_success_total{finished_reason="length"}': 5.0,
             'vllm:request_success_total{finished_reason="stop"}': 1.0, "vllm:num_requests_running": 4.0}
    assert counter_deltas(before, after) == {"requests": 3.0}


def test_media_points_reconcile_the_media_servers_finished_requests() -> None:
    from records.reconciliation import media_reconciliation
    ok, other = 'tt_media_server_requests_total{model="cnn",status="200"}', \
        'tt_media_server_requests_total{model="img",status="200"}'
    before = {ok: 10.0, other: 3.0}
    assert media_reconciliation(before, {ok: 14.0, other: 3.0}, 4, 0).status == "clean"
    mixed = media_reconciliation(before, {ok: 14.0, other: 5.0}, 4, 0)  # another model's load shares the devices
    assert mixed.status == "contaminated" and not mixed.decides and "2 requests finished more" in mixed.detail
    assert media_reconciliation(before, {ok: 13.0, other: 3.0}, 4, 0).status == "uncounted"
    assert media_reconciliation(None, None, 4, 0).status == "not_reconciled"


def test_a_point_that_is_not_clean_decides_no_target() -> None:
    row = TargetRow(key="isl-1_osl-2_con-1", isl=1, osl=2, max_concurrency=1, num_prompts=None, ran=True,
                    measured_ttft_ms=10.0, ci95={"ttft_ms": [9.0, 11.0]}, samples={"ttft_ms": 16})
    tier = TierCheck(tier="functional", required=True, ttft_ms=100.0)
    assert tier_target_checks(row, tier, True)[0][1].decision == "pass"
    bad = Reconciliation(status="contaminated", detail="7 requests finished more than this point's client sent")
    row.not_deciding = bad.why_not
    check = tier_target_checks(row, tier, True)[0][1]
    assert check.decision == "inconclusive" and "7 requests finished more" in check.detail
    bound = Reconciliation(status="clean", detail="ok", pacing=Pacing(client_bound=True, detail="requests left late"))
    assert not bound.decides and "client-bound" in bound.why_not
    assert status_of({"reconciliation": bad.to_dict()}) == "contaminated" and status_of({}) is None


def _run_point_process(run_dir: str, url: str) -> dict:
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "model_spec.json"), "w") as fh:
        json.dump(SPEC, fh)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TT_SERVED_MODEL_NAME="stub-model")
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run([sys.executable, "-m", "benchmarking.run_benchmarks", "--run-dir", run_dir,
                           "--model-spec-json", os.path.join(run_dir, "model_spec.json"), "--server-url", url,
                           "--workflow-args-json", json.dumps({"points": "128x32x4x8"}), "--disable-trace-capture"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(os.path.join(run_dir, "benchmarks", "point_isl-128_osl-32_con-4_n-8.json")) as fh:
        return json.load(fh)


def test_a_second_client_contaminates_the_point(stub_factory, tmp_path) -> None:
    """The same point against the stub: alone it is clean and its targets decide; with a second client sending
    to the stub throughout, the server finished more requests than the point's client sent, and every target
    check of the point is inconclusive, naming the extra requests."""
    stub = stub_factory("--ttft-ms", "20", "--itl-ms", "5")
    alone = _run_point_process(str(tmp_path / "alone"), stub.url)
    assert alone["reconciliation"]["status"] == "clean", alone["reconciliation"]
    r = alone["reconciliation"]
    assert r["server"]["requests"] == r["client"]["sent"] >= 8 and not r["pacing"]["client_bound"]
    assert {t["decision"] for t in alone["targets"].values()} <= {"pass", "fail"}

    stop = threading.Event()

    def other_client() -> None:
        body = json.dumps({"model": "stub-model", "prompt": "x y z", "max_tokens": 4}).encode()
        while not stop.is_set():
            req = urllib.request.Request(stub.url + "/v1/completions", body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as resp:
                resp.read()
            time.sleep(0.02)
    second = threading.Thread(target=other_client)
    second.start()
    try:
        shared = _run_point_process(str(tmp_path / "shared"), stub.url)
    finally:
        stop.set()
        second.join(timeout=10)
    r = shared["reconciliation"]
    assert r["status"] == "contaminated" and "requests finished more than this point's client sent" in r["detail"]
    assert {t["decision"] for t in shared["targets"].values()} == {"inconclusive"}
    assert any("point not clean (contaminated)" in w for w in shared["warnings"])


def test_a_client_made_to_fall_behind_is_client_bound(stub_factory, monkeypatch) -> None:
    """A client whose event loop is blocked 30 ms before each send (a busy client host, on purpose) sends its
    requests late: the send lags and Little's law call the point client-bound; the same point unblocked is not."""
    stub = stub_factory("--ttft-ms", "10", "--itl-ms", "2")
    work = [WorkItem(request_body("a b c", 8, "stub-model", False), 3, 8)] * 16
    cfg = ClientConfig(base_url=stub.url, model="stub-model")
    fine = run_point(cfg, work, [0.0] * 16, 4)
    assert not R.pacing(fine.records, 4, float("inf"), None, 1.0).client_bound
    send = RawTransport.send

    async def late_send(self, rec, body):
        time.sleep(0.03)  # blocks the loop: every other worker's send waits too
        return await send(self, rec, body)
    monkeypatch.setattr(RawTransport, "send", late_send)
    slow = run_point(cfg, work, [0.0] * 16, 4)
    paced = R.pacing(slow.records, 4, float("inf"), None, 1.0)
    assert paced.client_bound and "requests left late" in paced.detail, paced
    assert paced.mean_in_flight < paced.expected_in_flight


def _stub_events(path) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except OSError:
        return []


def test_kill_and_rerun_keeps_the_finished_point_and_measures_alone(stub_factory, tmp_path) -> None:
    """run.py killed with SIGKILL while its second point runs, then the same command at once: the finished point
    is kept (not measured again), no request of the killed run's client reaches the server once the rerun sends
    (the stub's own request log, by the client's User-Agent), and every point of the rerun is clean."""
    log = tmp_path / "stub.log"
    stub = stub_factory("--ttft-ms", "10", "--itl-ms", "20", "--model", "SmolLM2-135M-Instruct",
                        "--request-log", str(log))
    out = tmp_path / "run"
    cmd = [sys.executable, str(REPO_ROOT / "run.py"), "--model", "SmolLM2-135M-Instruct", "--workflow", "benchmarks",
           "--device", "cpu", "--server-url", stub.url, "--workflow-args", "points=64x16x1x4,64x16x4x16",
           "--output-dir", str(out)]
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO_ROOT)
    finished = out / "benchmarks" / "point_isl-64_osl-16_con-1_n-4.json"
    deadline = time.monotonic() + 90
    while not any(e["request_id"].startswith("tt-64-16-4-") for e in _stub_events(log)):  # the second point runs
        assert time.monotonic() < deadline and first.poll() is None, "the second point never started"
        time.sleep(0.05)
    first.kill()
    first.wait(timeout=10)
    killed_at = time.time()
    kept = finished.stat().st_mtime
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    assert "Resuming" in again.stdout and "already finished, skipping (resume)" in again.stdout
    assert "resuming: the server is idle" in again.stdout
    assert finished.stat().st_mtime == kept
    events = _stub_events(log)
    old_agents = {e["user_agent"] for e in events if e["t"] < killed_at and e["user_agent"].startswith("tt-bench/")}
    rerun_sends = [e["t"] for e in events if e["event"] == "received" and e["t"] >= killed_at
                   and e["user_agent"].startswith("tt-bench/") and e["user_agent"] not in old_agents]
    assert rerun_sends and not [e for e in events if e["user_agent"] in old_agents and e["t"] >= min(rerun_sends)]
    for name in ("point_isl-64_osl-16_con-1_n-4.json", "point_isl-64_osl-16_con-4_n-16.json"):
        with open(out / "benchmarks" / name) as fh:
            assert json.load(fh)["reconciliation"]["status"] == "clean", name
    report = next((out / "reports").glob("*.md")).read_text()
    assert "| clean |" in report and "contaminated" not in report


def test_a_rerun_of_stress_keeps_finished_points_and_measures_the_interrupted_one(stub_factory, tmp_path) -> None:
    """stress_tests in a directory an earlier run wrote: a point that ran to its end is kept (not sent again, as the
    stub's counters show), one marked interrupted is measured again, after the server was seen idle."""
    from records.stress import StressRecord
    from tests.stress_tests.test_stress_workflow import run_stress

    stub = stub_factory("--ttft-ms", "5", "--itl-ms", "1")
    args = {"mode": "smoke", "run_mode": "custom", "custom_isl_values": "16,32", "custom_osl_values": "4",
            "custom_concurrency_values": "2", "num_prompts": "4"}
    first = run_stress(tmp_path, stub.url, args)
    assert first.returncode == 0, first.stdout[-2000:]
    path = tmp_path / "stress_tests" / "stress_record.json"
    record = StressRecord.read(path)
    assert len(record.points) == 2
    record.points[1].interrupted = True  # as a signal leaves the point that was running
    record.write(path)
    sent = json.loads(stub.get("/stub/stats"))["requests"]
    again = run_stress(tmp_path, stub.url, args)
    assert again.returncode == 0, again.stdout[-2000:]
    assert f"{record.points[0].name}: already finished, skipping (resume)" in again.stdout
    assert "resuming: the server is idle" in again.stdout
    assert json.loads(stub.get("/stub/stats"))["requests"] - sent == 4  # the interrupted point's requests only
    rerun = StressRecord.read(path)
    assert [p.name for p in rerun.points] == [p.name for p in record.points] and not rerun.points[1].interrupted
