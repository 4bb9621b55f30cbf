"""The media clients and the media readiness wait against a real tt-media-server with its mock runners.

The mock runners are the media server's own named fakes (grey PNGs, fixed labels); they make the
server real (routes, scheduler, workers, auth, error codes) while keeping each request instant.
Checks: records are written and readable, failures are counted, the readiness wait passes.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from contracts.retry import GaveUp, wait_http_ok
from records.media import MediaPoint
from tests.helpers import free_port, write_model_spec
from workflows.venvs import venv_path

REPO = Path(__file__).resolve().parents[2]
MEDIA_PYTHON = venv_path("media-server") / "bin" / "python"  # TT_WORKFLOW_VENVS_DIR, else the checkout's
CLIENT_PYTHON = venv_path("media-clients") / "bin" / "python"
KEY = "media-clients-test-key"
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def mock_cnn_server(tmp_path_factory):
    """tt-media-server serving `mock-cnn` as model `tiny-cnn`, on loopback, stopped after the module."""
    from workflows.venvs import ensure_venv

    for name in ("media-server", "media-clients"):  # the tool's own venv manager: reused when current
        ensure_venv(name)
    port = free_port()
    log = tmp_path_factory.mktemp("media") / "server.log"
    env = {**os.environ, "MODELS": "tiny-cnn=mock-cnn", "API_KEY": KEY, "ENVIRONMENT": "production"}
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(MEDIA_PYTHON), "-m", "uvicorn", "main:app", "--lifespan", "on", "--host",
                                 "127.0.0.1", "--port", str(port)], cwd=REPO / "tt-media-server", env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"

    def not_exited() -> None:
        if proc.poll() is not None:
            raise AssertionError(f"the media server exited with {proc.returncode}: {log.read_text()[-2000:]}")

    try:  # every test may be the module's first (it is one unit of work, but its order is not promised)
        wait_http_ok("the mock-cnn media server to answer /health with 200", base + "/health", deadline_s=120,
                     alive_check=not_exited)
    except GaveUp:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"the media server was not healthy in 120 s: {log.read_text()[-2000:]}") from None
    yield base, proc, log
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _spec(tmp_path: Path) -> Path:
    return write_model_spec(tmp_path / "model_spec.json", model_id="id_tt-media_tiny-cnn_cpu",
                            model_name="tiny-cnn", served_model_name="tiny-cnn", model_type="cnn", engine="media",
                            status="FUNCTIONAL", readiness_timeout_s=60,
                            device_model_spec={"max_concurrency": 2, "perf_reference": [
                                {"isl": 0, "osl": 0, "max_concurrency": 2, "num_prompts": 6, "task_type": "cnn",
                                 "targets": {}}]})


def _client(script: str, base: str, tmp_path: Path, args: dict | None = None,
            package: str = "media_clients") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": KEY, "TT_SERVED_MODEL_NAME": "tiny-cnn"}
    module = f"{package}.{script.removesuffix('.py')}"
    return subprocess.run([str(CLIENT_PYTHON), "-m", module, "--run-dir", str(tmp_path),
                           "--model-spec-json", str(_spec(tmp_path)), "--server-url", base,
                           "--workflow-args-json", json.dumps(args or {"mode": "smoke"})],
                          capture_output=True, text=True, timeout=300, env=env)


def test_readiness_then_clients_write_their_records(mock_cnn_server, tmp_path):
    from workflows.media_readiness import wait_media_ready

    base, proc, log = mock_cnn_server

    class Handle:  # the ServerHandle surface the wait uses
        base_url, served_model_name, kind, log_path = base, "tiny-cnn", "local", log

        def is_alive(self):
            return proc.poll() is None

    info = wait_media_ready(Handle(), "cnn", bearer=KEY, timeout_s=120, poll_interval_s=0.2)
    assert set(info.stages_s) == {"liveness", "models", "one_item"}

    bench = _client("run_media_benchmarks.py", base, tmp_path)
    assert bench.returncode == 0, bench.stdout + bench.stderr
    point = MediaPoint.read(tmp_path / "benchmarks" / "media_point_cnn_con-2.json")
    assert (point.completed, point.failed, point.source) == (4, 0, "perf_reference")
    assert point.figures["items_per_s"] > 0
    # the media server's finished requests over the point agree with the client's (records/reconciliation.py)
    assert point.reconciliation.status == "clean" and point.reconciliation.server["requests"] == 4, point.reconciliation
    # the server's queue sampled beside the point (its /metrics, about once a second)
    assert point.server_state["samples"] >= 1 and "queue_depth" in point.server_state["series"], point.server_state
    outputs = json.loads((tmp_path / "benchmarks" / "outputs.json").read_text())["outputs"]
    assert "benchmarks/media_point_cnn_con-2.json" in outputs

    tests = _client("run_media_tests.py", base, tmp_path)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    record = json.loads((tmp_path / "tests" / "tests_record.json").read_text())
    assert record["schema"] == "tt-tests-record/1" and record["passed"] is True
    assert record["counts"]["passed"] == 10 and (tmp_path / "tests" / "junit.xml").is_file()
    assert {c["name"]: c["outcome"] for c in record["cases"]}["cnn/batch_invariance"] == "passed"
    invariance = next(c for c in record["cases"] if c["name"] == "cnn/batch_invariance")
    assert invariance["divergent"] == record["batch_divergent"] == 0
    assert invariance["compared"] == record["batch_compared"] >= 1

    # The mock's fixed labels are not ImageNet classes: the top-5 eval runs and fails, as it must.
    evals = _client("run_media_evals.py", base, tmp_path)
    assert evals.returncode == 1, evals.stdout + evals.stderr
    eval_record = json.loads((tmp_path / "evals" / "photo_top5" / "eval_record.json").read_text())
    assert (eval_record["status"], eval_record["value"], eval_record["samples"]) == ("failed", 0.0, 2)


def test_media_stress_samples_the_server_state_beside_each_load_point(mock_cnn_server, tmp_path):
    base, _, _ = mock_cnn_server
    done = _client("run_media_stress.py", base, tmp_path, {"mode": "smoke", "run_mode": "single",
                                                             "max_concurrent": "2", "num_prompts": "6"},
                   package="stress_tests")
    assert done.returncode == 0, done.stdout + done.stderr
    (point,) = json.loads((tmp_path / "stress_tests" / "stress_record.json").read_text())["points"]
    assert (point["kind"], point["completed"]) == ("cnn", 6)
    # the media server's queue over the same seconds, on the clock of the point's request rows
    state = point["server_state"]
    assert state["samples"] >= 1 and "queue_depth" in state["series"] and state["origin_perf_s"] > 0, state


def test_a_wrong_key_fails_every_request_and_is_counted(mock_cnn_server, tmp_path):
    base, _, _ = mock_cnn_server
    env_key = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = "wrong"
    try:
        env = {**os.environ, "PYTHONPATH": str(REPO), "TT_SERVED_MODEL_NAME": "tiny-cnn"}
        done = subprocess.run([str(CLIENT_PYTHON), "-m", "media_clients.run_media_benchmarks",
                               "--run-dir", str(tmp_path), "--model-spec-json", str(_spec(tmp_path)),
                               "--server-url", base, "--workflow-args-json", '{"mode": "smoke"}'],
                              capture_output=True, text=True, timeout=120, env=env)
    finally:
        if env_key is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = env_key
    assert done.returncode == 0, done.stdout + done.stderr   # the report judges the failures
    point = MediaPoint.read(tmp_path / "benchmarks" / "media_point_cnn_con-2.json")
    assert (point.completed, point.failed) == (0, 4)
    # A server may answer 401 and close before it has read a large upload: that request's client
    # sees a reset connection instead of the 401. Either way it is counted and classified.
    assert set(point.failures_by_class) <= {"http_401", "connection"} and point.failures_by_class.get("http_401")
    assert point.error_rate == 1.0


def test_bad_input_exits_2(tmp_path, mock_cnn_server):
    spec = write_model_spec(tmp_path / "model_spec.json", model_type="LLM")  # a text model: no media variant
    done = subprocess.run([str(CLIENT_PYTHON), "-m", "media_clients.run_media_tests", "--run-dir",
                           str(tmp_path), "--model-spec-json", str(spec), "--server-url", "http://127.0.0.1:9"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2 and "no media client variant" in done.stderr
