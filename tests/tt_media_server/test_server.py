"""The media server for real (uvicorn on loopback, worker processes) with the mock runners.

The mock runner is a named fake (no model): it lets these tests drive delays, hangs and crashes
on purpose. Real models are exercised in test_runners_cpu.py.
"""
from __future__ import annotations

import base64
import concurrent.futures
import io
import json
import os
import subprocess
import time

import httpx
import pytest

from tests.tt_media_server.conftest import run_server_command

pytestmark = pytest.mark.integration

IMAGE = "/v1/images/generations"
CNN = "/v1/cnn/search-image"


def _png_b64(side: int = 16) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (side, side), (10, 200, 30)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().split()[2] != "Z"


# ---- start-up -----------------------------------------------------------------------------------
@pytest.mark.parametrize("env, expected", [
    ({"MAX_QUEUE_SIZE": "0"}, "MAX_QUEUE_SIZE='0': must be int in 1..100000"),
    ({"MODEL_RUNNER": "tt-sdxl"}, "tt-sdxl needs the Tenstorrent stack"),
])
def test_bad_start_up_fails_with_one_clear_line(env, expected):
    result = run_server_command(env)
    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("tt-media-server: cannot start:"), result.stderr[-2000:]
    assert expected in last_line
    assert "Traceback" not in result.stderr


START_UP_CASES = [
    ({"DEVICE_IDS": "(0),(0)"}, "DEVICE_IDS='(0),(0)': device 0 appears in two groups"),
    ({"DEVICE_IDS": "(0,1)", "DEVICE_MESH_SHAPE": "SD_3_5_BASE"}, "each group must hold 1 or 8 devices"),
    ({"ENVIRONMENT": "production", "API_KEY": "your-secret-key"}, "default key is refused"),
    ({"MODEL": "nope"}, "MODEL=nope: not a known preset"),
    ({"LOG_LEVEL": "LOUD"}, "LOG_LEVEL='LOUD': must be one of debug, info, warning, error"),
    ({"MODEL_RUNNER": "nope"}, "MODEL_RUNNER='nope': not a known runner"),
    ({"MODEL_RUNNER": "tt-resnet"}, "tt-resnet needs the Tenstorrent stack"),
    ({"MODEL_RUNNER": "cnn-resnet-cpu"}, "cnn-resnet-cpu needs torchvision"),
    ({"DEVICE_IDS": "(0),(7)", "MOCK_DEVICES_COUNT": "2"}, "device 7 (DEVICE_IDS=(0),(7)) does not exist"),
    ({"MODEL_RUNNER": "image-cpu", "IMAGE_CPU_WEIGHTS_PATH": "/nonexistent"}, "not a diffusers pipeline folder"),
]

START_UP_SCRIPT = r"""
import json, os, sys
from media_server.app import create_app
out = []
for env in json.loads(sys.argv[1]):
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        create_app()
        out.append("STARTED")
    except SystemExit as exc:
        out.append(str(exc))
    os.environ.clear(); os.environ.update(saved)
print(json.dumps(out))
"""


def test_start_up_checks_name_the_variable_and_range(tmp_path):
    # The same create_app() uvicorn calls, in one process for all cases (each uvicorn start costs seconds).
    from tests.tt_media_server.conftest import SERVER_DIR, media_python

    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_", "MODEL", "DEVICE"))}
    env.update({"API_KEY": "k", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)})
    result = subprocess.run([str(media_python()), "-c", START_UP_SCRIPT,
                             json.dumps([case for case, _ in START_UP_CASES])],
                            cwd=SERVER_DIR, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = json.loads(result.stdout.strip().splitlines()[-1])
    for (case, expected), line in zip(START_UP_CASES, lines):
        assert line.startswith("tt-media-server: cannot start:"), (case, line)
        assert expected in line, (case, line)
        assert "\n" not in line


# ---- API, auth, limits --------------------------------------------------------------------------
def test_api_auth_and_limits(media_server):
    server = media_server({"MODELS": "mock,mock-cnn", "MAX_PAYLOAD_BYTES": "65536", "MAX_IMAGE_DIMENSION": "1024",
                           "DEVICE_IDS": "(0),(1)"})
    live = server.wait_until(lambda live: live["worker_count"] == 4, 60, "4 workers (2 models x 2 groups)")
    assert live["status"] == "alive" and live["model_ready"] is True
    assert live["worker_count"] == 4 and live["max_queue_size"] == 64 and live["queue_size"] == 0
    assert httpx.get(server.base_url + "/health").status_code == 200
    assert httpx.get(server.base_url + "/docs").status_code == 200
    with server.client() as client:
        models = client.get("/v1/models").json()["data"]
        assert {(m["id"], m["kind"]) for m in models} == {("mock-image", "image"), ("mock-cnn", "cnn")}

        # Auth: missing and wrong keys -> 401 with a JSON body; constant-time compare in auth.py.
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}):
            response = httpx.post(server.base_url + IMAGE, json={"prompt": "a"}, headers=headers)
            assert response.status_code == 401
            assert response.json()["error"]["type"] == "authentication_error"

        ok = client.post(IMAGE, json={"prompt": "a cat", "number_of_images": 2})
        assert ok.status_code == 200 and len(ok.json()["data"]) == 2
        png = client.post("/image/generations", json={"prompt": "a cat", "num_inference_step": 20})
        assert png.status_code == 200 and png.headers["content-type"] == "image/png"
        assert png.content.startswith(b"\x89PNG") and png.headers["deprecation"] == "true"
        # the documented example asks for JSON (accept: application/json): base64 PNGs in JSON, as /v1 answers
        as_json = client.post("/image/generations", json={"prompt": "a cat"}, headers={"accept": "application/json"})
        assert as_json.status_code == 200 and as_json.headers["content-type"].startswith("application/json")
        assert base64.b64decode(as_json.json()["data"][0]["b64_json"]).startswith(b"\x89PNG")

        def error_of(response, status):
            assert response.status_code == status, response.text
            return response.json()["error"]["message"]

        assert "num_inference_steps" in error_of(
            client.post(IMAGE, json={"prompt": "a", "num_inference_steps": 51}), 400)
        assert "number_of_images" in error_of(
            client.post(IMAGE, json={"prompt": "a", "number_of_images": 5}), 400)
        assert "size" in error_of(client.post(IMAGE, json={"prompt": "a", "size": "9999x8"}), 400)
        assert "prompt" in error_of(client.post(IMAGE, json={"negative_prompt": "a"}), 400)
        assert "MAX_PAYLOAD_BYTES" in error_of(
            client.post(IMAGE, json={"prompt": "a" * 70000}), 413)
        assert "not served" in error_of(client.post(IMAGE, json={"prompt": "a", "model": "x"}), 404)

        labels = client.post(CNN, json={"image": _png_b64(), "top_k": 2})
        assert labels.status_code == 200 and len(labels.json()["image_data"]) == 2
        form = client.post(CNN, files={"file": ("x.png", base64.b64decode(_png_b64()))},
                           data={"top_k": "3"})
        assert form.status_code == 200 and len(form.json()["image_data"]) == 3
        assert error_of(client.post(CNN, json={"image": "!!notbase64"}), 400).startswith("image:")
        assert error_of(client.post(CNN, json={"prompt": base64.b64encode(b"not an image").decode()}),
                        400).startswith("prompt:")
        assert "MAX_IMAGE_DIMENSION" in error_of(
            client.post(CNN, json={"image": _png_b64(1100)}), 413)

    metrics = httpx.get(server.base_url + "/metrics").text
    assert 'tt_media_server_requests_total{model="mock-image",status="200"}' in metrics
    # Samples written by the worker processes appear too (multiprocess mode).
    assert "tt_media_server_model_inference_duration_seconds_count" in metrics


# ---- admission ----------------------------------------------------------------------------------
def test_burst_of_ten_times_the_queue_gets_429_and_server_stays_up(media_server):
    server = media_server({"MAX_QUEUE_SIZE": "8", "MOCK_INFERENCE_DELAY_MS": "50"})

    client = httpx.Client(base_url=server.base_url, headers=server.headers, timeout=60,
                          limits=httpx.Limits(max_connections=80))

    def post(_):
        return client.post(IMAGE, json={"prompt": "burst"})

    with client, concurrent.futures.ThreadPoolExecutor(max_workers=80) as pool:
        responses = list(pool.map(post, range(80)))
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {200, 429}, statuses
    rejected = [r for r in responses if r.status_code == 429]
    assert rejected and statuses.count(200) >= 8
    assert all(int(r.headers["retry-after"]) >= 1 for r in rejected)
    assert rejected[0].json()["error"]["type"] == "queue_full"
    assert httpx.get(server.base_url + "/health").status_code == 200
    assert httpx.post(server.base_url + IMAGE, json={"prompt": "after"},
                      headers=server.headers).status_code == 200


def test_estimated_wait_past_the_deadline_is_refused_up_front(media_server):
    server = media_server({"MOCK_INFERENCE_DELAY_MS": "400", "DEFAULT_INFERENCE_TIMEOUT_SECONDS": "1",
                           "MAX_QUEUE_SIZE": "100"})
    with server.client() as client:
        assert client.post(IMAGE, json={"prompt": "prime the batch-time estimate"}).status_code == 200

    client = httpx.Client(base_url=server.base_url, headers=server.headers, timeout=30)

    def post(_):
        return client.post(IMAGE, json={"prompt": "x"})

    with client, concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        responses = list(pool.map(post, range(8)))
    estimated = [r for r in responses if r.status_code == 429]
    assert estimated, [r.status_code for r in responses]
    assert "estimated wait" in estimated[0].json()["error"]["message"]
    assert "retry-after" in estimated[0].headers
    # Admitted ones finished inside their deadline: no 504 among them.
    assert {r.status_code for r in responses} <= {200, 429}


# ---- faults -------------------------------------------------------------------------------------
def test_hanging_runner_gets_504_and_its_worker_comes_back(media_server):
    server = media_server({"MOCK_HANG_ON": "HANG", "DEFAULT_INFERENCE_TIMEOUT_SECONDS": "1.5"})
    old_pids = server.worker_pids()
    with server.client() as client:
        started = time.monotonic()
        response = client.post(IMAGE, json={"prompt": "please HANG"})
        elapsed = time.monotonic() - started
        assert response.status_code == 504, response.text
        assert "recycled" in response.json()["error"]["message"]
        # The 1.5 s deadline answers in about 1.5 s; a deadline not enforced leaves the request on the
        # hung worker until the 60 s default (or forever), past the client's 30 s timeout.
        assert elapsed < 15, elapsed
        server.wait_until(lambda live: live["worker_count"] == 1, 30, "the recycled worker")
        assert set(server.worker_pids()).isdisjoint(old_pids)
        assert not any(_alive(pid) for pid in old_pids)
        assert client.post(IMAGE, json={"prompt": "fine"}).status_code == 200


def test_crashing_worker_fails_its_requests_at_once_and_restarts(media_server, tmp_path):
    """The batching window is the longest allowed (10 s): a full batch goes out at once and its
    crash reaches every client in well under a second, while a batch held for the window, or a
    crash noticed only at a deadline, answers 10 s or more after the first request was sent. The
    5 s bound sits between the two, so only such a bug crosses it."""
    marker = tmp_path / "reset-ran"
    server = media_server({"MOCK_CRASH_ON": "CRASH", "MAX_BATCH_SIZE": "3",
                           "MAX_BATCH_DELAY_TIME_MS": "10000", "MAX_WORKER_RESTART_COUNT": "1",
                           "WORKER_RESTART_LIMIT_ACTION": "reset",
                           "RESET_DEVICE_COMMAND": f"touch {marker}", "RESET_DEVICE_SLEEP_TIME": "0",
                           "DEFAULT_INFERENCE_TIMEOUT_SECONDS": "60"})
    client = httpx.Client(base_url=server.base_url, headers=server.headers, timeout=60)

    def post(prompt):
        response = client.post(IMAGE, json={"prompt": prompt})
        return response, time.monotonic()

    with client, concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        # Two requests wait in the batching window; the third fills the batch, which crashes.
        first_sent = time.monotonic()
        waiting = [pool.submit(post, "innocent one"), pool.submit(post, "innocent two")]
        server.wait_until(lambda live: live["queue_size"] == 2, 10, "two queued requests")
        response, answered = post("CRASH now")
        results = [f.result() for f in waiting] + [(response, answered)]
    took = max(at for _, at in results) - first_sent
    assert took < 5.0, f"the crash took {took:.2f} s to reach every client (batching window 10 s)"
    for response, _ in results:
        assert response.status_code == 503, response.text
        message = response.json()["error"]["message"]
        assert "worker 0 (devices (0)" in message and "died" in message, message
    server.wait_until(lambda live: live["worker_count"] == 1, 30, "the restarted worker")
    assert not marker.exists()
    # A second crash passes MAX_WORKER_RESTART_COUNT=1: the device reset command runs. A full batch
    # of three, so it goes out without waiting for the 10 s window.
    again = httpx.Client(base_url=server.base_url, headers=server.headers, timeout=30)
    with again, concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        crashes = list(pool.map(lambda prompt: again.post(IMAGE, json={"prompt": prompt}),
                                ["CRASH again", "innocent three", "innocent four"]))
    assert [r.status_code for r in crashes] == [503] * 3, [r.text for r in crashes]
    server.wait_until(lambda live: live["worker_count"] == 1, 30, "the worker after device reset")
    assert marker.exists()
    assert "RESET_DEVICE_COMMAND" in server.log()


def test_disconnect_cancels_queued_work(media_server):
    server = media_server({"MOCK_INFERENCE_DELAY_MS": "1500", "NO_AUTH": "1"})
    # NO_AUTH=1: no key needed.
    assert httpx.get(server.base_url + "/v1/models").status_code == 200
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        running = pool.submit(httpx.post, server.base_url + IMAGE, json={"prompt": "first"},
                              headers=server.headers, timeout=30)
        server.wait_until(lambda live: live["models"][0]["workers"][0]["inflight"] == 1, 10,
                          "the first request on the worker")
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(server.base_url + IMAGE, json={"prompt": "leaves"}, headers=server.headers,
                       timeout=httpx.Timeout(30, read=0.3))
        server.wait_until(lambda live: live["queue_size"] == 0, 2, "the cancelled request to leave the queue")
        assert running.result().status_code == 200
    metrics = httpx.get(server.base_url + "/metrics").text
    assert 'tt_media_server_requests_total{model="mock-image",status="cancelled"} 1.0' in metrics
    # Only the first request ran on the worker.
    assert 'tt_media_server_batch_size_count{model="mock-image"} 1.0' in metrics


def test_shutdown_fails_queued_requests_and_leaves_no_process(media_server):
    server = media_server({"MOCK_INFERENCE_DELAY_MS": "3000", "DEVICE_IDS": "(0),(1)"})
    # /health answers once one worker is warm; the second may still be starting on a busy machine.
    server.wait_until(lambda live: live["worker_count"] == 2, 60, "both workers")
    pids = server.worker_pids()
    assert len(pids) == 2
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(httpx.post, server.base_url + IMAGE, json={"prompt": f"p{i}"},
                               headers=server.headers, timeout=30) for i in range(4)]
        server.wait_until(lambda live: live["queue_size"] == 2, 10, "two queued requests")
        started = time.monotonic()
        code = server.stop(timeout=20)
        responses = [f.result() for f in futures]
    # Each worker exits once its running batch (at most 3 s) is over; one that ignored "stop" would
    # be killed only after the scheduler's 10 s wait, so 10 s is crossed only by that.
    assert time.monotonic() - started < 10
    assert code == 0, server.log()[-2000:]
    for response in responses:
        assert response.status_code == 503
        assert "shutting down" in response.json()["error"]["message"]
    assert not any(_alive(pid) for pid in pids)


# ---- streaming runners (scheduler API, in-process in the media venv) -----------------------------
STREAM_SCRIPT = r"""
import asyncio, json, time
from media_server.config import load_settings
from media_server.scheduler import Scheduler

async def main():
    settings = load_settings(model_runner="mock-stream", mock_stream_chunks=5, max_batch_size=2,
                             mock_inference_delay_ms=20)
    scheduler = Scheduler(settings)
    scheduler.start()
    while not scheduler.is_ready:
        await asyncio.sleep(0.05)
    events = [e.type for e in [x async for x in scheduler.stream(None, "text", {"prompt": "a"})]]
    # Cancel after two chunks: the worker is told, a slot frees for the next request.
    stream = scheduler.stream(None, "text", {"prompt": "b", "chunks": 1000})
    got = [await stream.__anext__(), await stream.__anext__()]
    await stream.aclose()
    pool = scheduler.pools["mock-stream"]
    inflight_after_cancel = sum(len(w.inflight) for w in pool.workers)
    both = await asyncio.gather(*[asyncio.create_task(_collect(scheduler)) for _ in range(3)])
    await scheduler.stop()
    print(json.dumps({"events": events, "got": [g.data for g in got],
                      "inflight_after_cancel": inflight_after_cancel,
                      "parallel": [len(b) for b in both]}))

async def _collect(scheduler):
    return [e async for e in scheduler.stream(None, "text", {"prompt": "c"})]

asyncio.run(main())
"""


def test_streaming_runner_protocol_chunks_done_and_cancel(tmp_path):
    from tests.tt_media_server.conftest import SERVER_DIR, media_python

    result = subprocess.run([str(media_python()), "-c", STREAM_SCRIPT], cwd=SERVER_DIR,
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["events"] == ["chunk"] * 5 + ["done"]
    assert report["got"] == ["chunk-0", "chunk-1"]
    assert report["inflight_after_cancel"] == 0
    assert report["parallel"] == [6, 6, 6]
