"""stress_tests for a media kind end to end: the media entry against the real media server with the
real CPU embedding model (all-MiniLM-L6-v2 from its wheel): a load point, a short endurance run
(the media engine's CI endurance run) with memory read from the server's process tree, and the
rate capacity search answered in items/s."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from records.stress import CapacityRecord, StressRecord
from tests.helpers import write_model_spec
from workflows.venvs import venv_path
from tests.tt_media_server.conftest import TEST_API_KEY, start_media_server

REPO = Path(__file__).resolve().parents[2]
CLIENT_PYTHON = venv_path("media-clients") / "bin" / "python"  # TT_WORKFLOW_VENVS_DIR, else the checkout's
MODEL = "all-MiniLM-L6-v2"
pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def embedding_server(tmp_path_factory):
    from workflows.venvs import ensure_venv

    ensure_venv("media-clients")
    handle = start_media_server({"MODEL": MODEL, "ENABLE_BATCHING": "1", "BATCH_WINDOW_MS": "5"},
                                tmp_path_factory.mktemp("media_stress") / "server.log", ready_timeout=300)
    yield handle
    handle.stop()


def run_media_stress(run_dir: Path, url: str, args: dict, pid: int | None = None) -> subprocess.CompletedProcess:
    run_dir.mkdir(parents=True, exist_ok=True)
    write_model_spec(run_dir / "model_spec.json", "id_tt-media_all-MiniLM-L6-v2_cpu", status="FUNCTIONAL",
                     readiness_timeout_s=60, device_model_spec={"max_concurrency": 4, "perf_reference": []})
    if pid is not None:
        (run_dir / "server.pid.json").write_text(json.dumps({"kind": "local", "pid": pid, "pgid": pid}))
    env = {k: v for k, v in os.environ.items() if k != "TT_SERVER_CONTAINER"}
    env.update(PYTHONPATH=str(REPO), OPENAI_API_KEY=TEST_API_KEY, TT_SERVED_MODEL_NAME=MODEL)
    return subprocess.run([str(CLIENT_PYTHON), "-m", "stress_tests.run_media_stress", "--run-dir",
                           str(run_dir), "--model-spec-json", str(run_dir / "model_spec.json"), "--server-url", url,
                           "--workflow-args-json", json.dumps(args)], capture_output=True, text=True, env=env,
                          timeout=300)


def latency_failed(run_dir: Path) -> bool:
    """Whether the run's endurance point decided its latency drift `fail` (no record: no, the asserts say why)."""
    path = run_dir / "stress_tests" / "stress_record.json"
    if not path.exists():
        return False
    stress = StressRecord.read(path)
    return any(p.mode == "endurance" and p.checks["latency_drift_pct"]["decision"] == "fail" for p in stress.points)


def test_points_endurance_and_capacity_against_the_real_embedding_server(embedding_server, tmp_path):
    args = {"mode": "smoke", "run_mode": "single,endurance,capacity", "max_concurrent": "4",
            "endurance_s": "10", "window_s": "1", "capacity_max": "40", "requests_per_level": "8",
            # a level holds when its goodput's 95% interval clears the goal: 16 good requests
            # (a level and its repeat) clear 80%, while 95% would need 73 per level
            "goodput_goal": "0.8"}
    proc = run_media_stress(tmp_path, embedding_server.base_url, args, pid=embedding_server.process.pid)
    # Ten seconds is short enough for a neighbour on a shared 2-core host to lift one half's latency by a
    # third (seen once: +33.5% [28.0, 39.3], p50 197 ms then 296 ms); alone the drift is -1..+6%. A drift
    # fail must therefore reproduce in a second run on a fresh directory before it fails the test.
    if latency_failed(tmp_path):
        first = StressRecord.read(tmp_path / "stress_tests" / "stress_record.json")
        print("latency drift failed once, rerunning:", first.points[1].checks["latency_drift_pct"]["detail"])
        tmp_path = tmp_path / "rerun"
        proc = run_media_stress(tmp_path, embedding_server.base_url, args, pid=embedding_server.process.pid)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    stress = StressRecord.read(tmp_path / "stress_tests" / "stress_record.json")
    single, endurance = stress.points
    assert (single.kind, single.mode, single.concurrency) == ("embedding", "single", 4)
    assert single.completed == single.sent == 8 and single.passed and single.items_throughput > 0
    assert single.e2el_ms.p50 > 0 and single.tpot_ms.count == 0   # one latency per media answer
    assert endurance.duration_s >= 10 and len(endurance.windows) >= 7 and endurance.error_rate == 0
    d = endurance.drift
    assert d.memory_source == "process_tree" and d.memory_baseline_mb > 50 and d.memory_samples >= 4
    assert endurance.checks["memory_growth_pct"]["decision"] in ("pass", "inconclusive")   # a leak fails it
    assert endurance.checks["latency_drift_pct"]["decision"] in ("pass", "inconclusive")
    assert len(d.slices) in (2, 3, 4) and sum(s["n"] for s in d.slices) > 0
    assert endurance.status in ("passed", "inconclusive") and stress.status == endurance.status
    cap = CapacityRecord.read(tmp_path / "stress_tests" / "capacity_record.json")
    assert cap.metric == "rate" and cap.slos[0].startswith("e2el_p99:") and "unloaded requests" in cap.slo_source
    assert cap.items_per_request == 8 and len(cap.levels) >= 2 and cap.passed
    assert cap.capacity > 0 and cap.capacity_items_per_s > 0 and "items/s" in cap.detail
    assert all(lv.items_per_s for lv in cap.levels if lv.holds)
    rows = [json.loads(line) for line in (tmp_path / single.requests_file).read_text().splitlines()]
    assert len(rows) == 8 and all(r["success"] and r["e2el_ms"] > 0 for r in rows)


@pytest.mark.parametrize("args, message", [
    ({"run_mode": "custom", "custom_isl_values": "0.5"}, "do not apply to embedding requests"),
    ({"run_mode": "capacity", "slo": "tpot_p99:100"}, "media requests have one latency"),
    ({"run_mode": "bogus"}, "is not one of"),
    ({"workload": "multi_turn", "turns": "2"}, "workload=multi_turn replays LLM traffic"),
    ({"tool": "aiperf"}, "tool=aiperf sends LLM completions"),
])
def test_bad_input_exits_2_before_any_request(tmp_path, args, message):
    proc = run_media_stress(tmp_path, "http://127.0.0.1:9", args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
