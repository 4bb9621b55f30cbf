"""The original media server's documented variables, runner names and limits work as written.

Each test pins one documented form: the mesh flags (TP2, SD_3_5_BASE, SD_3_5_FAST), the runner
names tt-sdxl-trace and forge, TRACE_REGION_SIZE / IS_GALAXY / LOG_FILE / LOG_LEVEL=CRITICAL /
WORKER_CHECK_SLEEP_TIMEOUT / DEFAULT_SAMPLE_RATE / NEW_DEVICE_DELAY_SECONDS, MAX_WORKER_RESTART_COUNT
marking a worker failed, the audio routes' own size limit (and MAX_AUDIO_BYTES), and the
small-model server's names mapped onto this server's settings. Settings are read in the
media-server venv (a subprocess), as the server reads them.
"""
from __future__ import annotations

import json
import subprocess
import time

import httpx
import pytest

from tests.tt_media_server.conftest import SERVER_DIR, media_python, run_server_command

SETTINGS_SCRIPT = r"""
import json, sys
from media_server.config import ConfigError, load_settings
from media_server.runners.text_slots import TextSettings
from media_server.speech.settings import SpeechSettings
out = []
for case in json.loads(sys.argv[1]):
    try:
        s = load_settings(**case)
        out.append({"mesh": list(s.mesh_shape()), "device_ids": s.device_ids, "device": s.device,
                    "max_batch_size": s.max_batch_size, "enable_warmup": s.enable_warmup,
                    "new_device_delay_seconds": s.new_device_delay_seconds, "is_galaxy": s.is_galaxy,
                    "trace_region_size": s.trace_region_size, "restart_action": s.worker_restart_limit_action,
                    "worker_check_sleep_timeout": s.worker_check_sleep_timeout,
                    "model_runner": s.model_runner})
    except ConfigError as exc:
        out.append({"error": str(exc)})
print(json.dumps(out))
"""


def _settings(*cases: dict) -> list[dict]:
    """load_settings(**case) for each case in the media venv: the derived values or the error line."""
    result = subprocess.run([str(media_python()), "-c", SETTINGS_SCRIPT, json.dumps(cases)], cwd=SERVER_DIR,
                            capture_output=True, text=True, timeout=120,
                            env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _in_media_venv(script: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(media_python()), "-c", script], cwd=SERVER_DIR, capture_output=True, text=True,
                          timeout=timeout, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "API_KEY": "k", **(env or {})})


# ---- mesh flags -----------------------------------------------------------------------------------
def test_mesh_flags_set_the_documented_mesh_and_device_groups():
    tp2, base, fast, galaxy_base, preset_tp2, galaxy, as_written = _settings(
        {"tp2": "true"}, {"sd_3_5_base": "true"}, {"sd_3_5_fast": "1"},
        {"device": "galaxy", "sd_3_5_base": "true"}, {"device_mesh_shape": "TP2"}, {"device": "galaxy"},
        {"device_mesh_shape": "(2, 4)", "device_ids": "(0,1,2,3,4,5,6,7)"})
    assert (tp2["mesh"], tp2["device_ids"]) == ([2, 1], "(0,1)")
    assert (base["mesh"], base["device_ids"]) == ([2, 4], "(0,1,2,3,4,5,6,7)")
    assert fast["mesh"] == [4, 8] and fast["device_ids"] == "(" + ",".join(map(str, range(32))) + ")"
    # Asked for "base" on a galaxy: four 2x4 workers, not the preset's one 4x8 ("fast").
    assert galaxy_base["mesh"] == [2, 4]
    assert galaxy_base["device_ids"] == ",".join("(" + ",".join(map(str, range(i, i + 8))) + ")"
                                                 for i in range(0, 32, 8))
    assert preset_tp2["mesh"] == [2, 1]
    assert galaxy["mesh"] == [4, 8] and galaxy["is_galaxy"] is True
    assert as_written["mesh"] == [2, 4]  # the documented "(rows, columns)" form


def test_device_groups_alone_set_the_mesh_each_worker_opens():
    pairs, eights, threes, singles, fitting = _settings(
        {"device_ids": "(0,1),(2,3)"}, {"device_ids": "(0,1,2,3,4,5,6,7)"}, {"device_ids": "(0,1,2),(3,4,5)"},
        {"device_ids": "(0),(1)"}, {"device": "n300", "device_ids": "(2,3)"})
    assert (pairs["mesh"], pairs["device_ids"]) == ([2, 1], "(0,1),(2,3)")  # two TP2 workers
    assert eights["mesh"] == [2, 4] and threes["mesh"] == [1, 3]
    assert singles["mesh"] == [1, 1] and fitting["mesh"] == [2, 1]
    mixed, = _settings({"device_ids": "(0,1),(2)"})  # groups of two sizes: no one mesh; said, not guessed
    assert "each group must hold" in mixed["error"]


def test_model_and_device_are_looked_up_as_a_pair():
    sdxl_t3k, sd35_t3k, sdxl_n300, sdxl_galaxy_base = _settings(
        {"model": "stable-diffusion-xl-base-1.0", "device": "t3k"},
        {"model": "stable-diffusion-3.5-large", "device": "t3k"},
        {"model": "stable-diffusion-xl-base-1.0", "device": "n300"},
        {"model": "stable-diffusion-xl-base-1.0", "device": "galaxy", "sd_3_5_base": "true"})
    # SDXL runs on one chip: a t3k serves it with eight 1x1 workers, not one 2x4 mesh; SD3.5 keeps the mesh
    assert (sdxl_t3k["mesh"], sdxl_t3k["device_ids"]) == ([1, 1], ",".join(f"({i})" for i in range(8)))
    assert (sd35_t3k["mesh"], sd35_t3k["device_ids"]) == ([2, 4], "(0,1,2,3,4,5,6,7)")
    assert (sdxl_n300["mesh"], sdxl_n300["device_ids"]) == ([1, 1], "(0),(1)")
    assert sdxl_galaxy_base["mesh"] == [2, 4]  # a mesh flag is the more specific ask and still wins


def test_contradicting_mesh_flags_are_refused_with_one_line():
    both, against_shape, bad_word = _settings({"tp2": "true", "sd_3_5_fast": "true"},
                                              {"sd_3_5_base": "true", "device_mesh_shape": "1,1"},
                                              {"tp2": "sure"})
    assert "TP2=true, SD_3_5_FAST=true" in both["error"] and "at most one" in both["error"]
    assert "SD_3_5_BASE=true means a 2x4 mesh but DEVICE_MESH_SHAPE=1,1" in against_shape["error"]
    assert "TP2='sure'" in bad_word["error"]


def test_a_misspelt_setting_gets_one_warning_line_at_start_up():
    script = "from media_server.app import create_app; create_app()"
    typo = _in_media_venv(script, {"SD_3_5_FST": "true", "MAX_QUEUE_SIZ": "3", "UNRELATED_THING": "1"})
    assert typo.returncode == 0, typo.stderr
    lines = [line for line in typo.stderr.splitlines() if "unknown setting" in line]
    assert len(lines) == 1, typo.stderr
    assert "SD_3_5_FST (did you mean SD_3_5_FAST?)" in lines[0]
    assert "MAX_QUEUE_SIZ (did you mean MAX_QUEUE_SIZE?)" in lines[0]
    assert "UNRELATED_THING" not in lines[0]
    clean = _in_media_venv(script, {"SD_3_5_FAST": "false", "MAX_QUEUE_SIZE": "3"})
    assert clean.returncode == 0 and "unknown setting" not in clean.stderr, clean.stderr


# ---- runner names ----------------------------------------------------------------------------------
def test_documented_runner_names_are_known():
    result = _in_media_venv("from media_server.runners.registry import runner_class as r\n"
                            "print(r('tt-sdxl-trace').__name__, r('tt-sdxl').__name__, r('forge').__name__, "
                            "r('forge').kind)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["TTSdxlRunner", "TTSdxlRunner", "ForgeResNetRunner", "cnn"]


def test_forge_without_its_package_stops_start_up_with_one_line():
    result = run_server_command({"MODEL_RUNNER": "forge"})
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("tt-media-server: cannot start:")]
    assert len(lines) == 1, result.stderr
    assert "forge" in lines[0] and "tt-forge-fe" in lines[0] and "not a known runner" not in lines[0]


def test_tt_sdxl_trace_reaches_the_sdxl_runner_not_the_unknown_runner_error():
    result = run_server_command({"MODEL_RUNNER": "tt-sdxl-trace"})
    assert result.returncode == 1
    assert "tt-sdxl needs the Tenstorrent stack" in result.stderr and "not a known runner" not in result.stderr


# ---- documented server settings --------------------------------------------------------------------
def test_documented_defaults_and_device_presets():
    default, cpu, n150 = _settings({}, {"device": "cpu"}, {"device": "n150"})
    assert default["trace_region_size"] == 34541598
    assert default["is_galaxy"] is True and n150["is_galaxy"] is False
    assert default["worker_check_sleep_timeout"] == 30.0
    assert default["new_device_delay_seconds"] == 30.0
    assert cpu["new_device_delay_seconds"] == 0.0  # CPU workers need no settling time
    assert default["restart_action"] == "fail"


def test_trace_region_size_reaches_ttnn_when_the_mesh_opens():
    script = r"""
import sys, types
calls = []
ttnn = types.ModuleType("ttnn")
ttnn.open_device = lambda **kw: calls.append(("device", kw))
ttnn.open_mesh_device = lambda shape, **kw: calls.append(("mesh", kw))
ttnn.MeshShape = lambda r, c: (r, c)
sys.modules["ttnn"] = ttnn
from media_server.config import load_settings, DeviceGroup
from media_server.runners.tt_common import open_mesh
open_mesh("tt-sdxl", load_settings(trace_region_size=1234), DeviceGroup(0, (0,)))
open_mesh("tt-sdxl", load_settings(tp2="true"), DeviceGroup(0, (0, 1)))
print(calls)
"""
    result = _in_media_venv(script)
    assert result.returncode == 0, result.stderr
    assert "('device', {'device_id': 0, 'trace_region_size': 1234})" in result.stdout
    assert "'trace_region_size': 34541598" in result.stdout


def test_log_level_critical_starts_and_log_file_gets_server_and_worker_lines(media_server, tmp_path):
    log_file = tmp_path / "media.log"
    server = media_server({"LOG_LEVEL": "CRITICAL"})
    assert httpx.get(server.base_url + "/health", timeout=5).status_code == 200
    server = media_server({"LOG_FILE": str(log_file), "DEVICE_IDS": "(0),(1)", "NEW_DEVICE_DELAY_SECONDS": "0"})
    server.wait_until(lambda live: live["worker_count"] == 2, 60, "both workers")
    text = log_file.read_text()
    assert "worker 0 (devices (0)" in text and "is ready" in text  # the server's lines
    assert "worker-0 INFO mock loaded" in text and "worker-1 INFO mock loaded" in text  # the workers' own


def test_new_device_delay_seconds_spaces_worker_starts(media_server):
    server = media_server({"DEVICE_IDS": "(0),(1)", "NEW_DEVICE_DELAY_SECONDS": "3"}, wait_ready=False)
    server.wait_until(lambda live: live["worker_count"] >= 1, 60, "the first worker")
    first = time.monotonic()
    assert server.liveness()["worker_count"] == 1
    server.wait_until(lambda live: live["worker_count"] == 2, 60, "the second worker")
    assert time.monotonic() - first >= 2.0  # the second one waited the delay, not started at once


def test_worker_check_finds_a_dead_worker_whose_pipe_stayed_quiet():
    """The periodic check (WORKER_CHECK_SLEEP_TIMEOUT) is the only thing that can notice this death:
    the pipe's reader is removed first, as when something else holds the pipe open."""
    script = r"""
import asyncio, logging, os, signal, sys
logging.basicConfig(level=logging.INFO, stream=sys.stdout)
from media_server.config import load_settings
from media_server.scheduler import Scheduler

async def main():
    settings = load_settings(worker_check_sleep_timeout=0.3, new_device_delay_seconds=0, api_key="k")
    scheduler = Scheduler(settings)
    scheduler.start()
    pool = next(iter(scheduler.pools.values()))
    worker = pool.workers[0]
    for _ in range(600):
        if worker.state == "ready": break
        await asyncio.sleep(0.05)
    old = worker.process.pid
    asyncio.get_running_loop().remove_reader(worker.conn.fileno())
    os.kill(old, signal.SIGKILL)
    for _ in range(600):
        await asyncio.sleep(0.05)
        if worker.state == "ready" and worker.process.pid != old: break
    print("RESULT", worker.state, worker.process.pid != old, worker.restarts)
    await scheduler.stop()

asyncio.run(main())
"""
    result = _in_media_venv(script, timeout=90)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "found dead by the periodic worker check" in result.stdout + result.stderr
    assert "RESULT ready True 1" in result.stdout, result.stdout[-2000:]


def test_max_worker_restart_count_marks_the_worker_failed(media_server, tmp_path):
    marker = tmp_path / "reset-ran"
    server = media_server({"MOCK_CRASH_ON": "CRASH", "MAX_WORKER_RESTART_COUNT": "1",
                           "RESET_DEVICE_COMMAND": f"touch {marker}", "RESET_DEVICE_SLEEP_TIME": "0"})
    with server.client(timeout=30) as client:
        assert client.post("/v1/images/generations", json={"prompt": "CRASH 1"}).status_code == 503
        server.wait_until(lambda live: live["worker_count"] == 1, 30, "the restarted worker")
        assert client.post("/v1/images/generations", json={"prompt": "CRASH 2"}).status_code == 503
        live = server.wait_until(lambda live: live["models"][0]["workers"][0]["state"] == "failed", 30,
                                 "the worker marked failed")
        assert live["worker_count"] == 0
        refused = client.post("/v1/images/generations", json={"prompt": "fine"})
        assert refused.status_code == 503, refused.text
    assert httpx.get(server.base_url + "/health", timeout=5).status_code == 503
    assert not marker.exists()  # the reset is the WORKER_RESTART_LIMIT_ACTION=reset option
    assert "marked failed: it was restarted MAX_WORKER_RESTART_COUNT=1 times" in server.log()


# ---- audio limits ----------------------------------------------------------------------------------
def _upload(server, size: int) -> httpx.Response:
    files = {"file": ("speech.wav", b"\0" * size, "audio/wav")}
    return httpx.post(server.base_url + "/v1/audio/transcriptions", files=files, headers=server.headers,
                      timeout=60)


def test_audio_uploads_are_limited_by_max_audio_size_bytes_not_the_payload_limit(media_server):
    server = media_server({})  # mock image runner: an upload that passes the limits meets 404 (no audio model)
    passed = _upload(server, 25 * 1024 * 1024)
    assert passed.status_code == 404, passed.text[:300]
    too_big = _upload(server, 51 * 1024 * 1024)
    assert too_big.status_code == 413 and "MAX_AUDIO_SIZE_BYTES=52428800" in too_big.text, too_big.text[:300]
    image = httpx.post(server.base_url + "/v1/images/generations", headers=server.headers, timeout=60,
                       content=b"{" + b" " * (21 * 1024 * 1024) + b"}")
    assert image.status_code == 413 and "MAX_PAYLOAD_BYTES" in image.text


def test_max_audio_bytes_is_the_same_limit(media_server):
    server = media_server({"MAX_AUDIO_BYTES": "1000"})
    response = _upload(server, 2000)
    assert response.status_code == 413 and "MAX_AUDIO_SIZE_BYTES=1000" in response.text, response.text
    assert _upload(server, 900).status_code == 404
    result = run_server_command({"MAX_AUDIO_BYTES": "1000", "MAX_AUDIO_SIZE_BYTES": "2000"})
    assert result.returncode == 1 and "MAX_AUDIO_BYTES=1000 and MAX_AUDIO_SIZE_BYTES=2000" in result.stderr


def test_default_sample_rate_is_accepted_and_the_audio_resampled_to_the_models_rate():
    said = _in_media_venv("from media_server.speech.settings import SpeechSettings as S\n"
                          "s = S(); print(s.default_sample_rate); print(s.sample_rate_line())",
                          {"DEFAULT_SAMPLE_RATE": "22050"})
    lines = said.stdout.strip().splitlines()
    assert lines[0] == "22050" and "resampled to 16000 Hz" in lines[1], said.stderr
    same = _in_media_venv("from media_server.speech.settings import SpeechSettings as S\n"
                          "print(S().sample_rate_line())", {"DEFAULT_SAMPLE_RATE": "16000"})
    assert same.stdout.split() == ["None"], same.stderr
    refused = run_server_command({"DEFAULT_SAMPLE_RATE": "100"})  # no audio rate at all
    assert refused.returncode == 1 and "DEFAULT_SAMPLE_RATE" in refused.stderr and "Traceback" not in refused.stderr


# ---- the small-model server's names ---------------------------------------------------------------
def test_small_model_server_names_map_onto_this_servers_settings():
    cpu, auto, concurrent, no_warmup = _settings({"model_device": "cpu"}, {"model_device": "auto"},
                                                 {"max_concurrent": "4"}, {"warmup_steps": "0"})
    assert cpu["device"] == "cpu" and cpu["new_device_delay_seconds"] == 0.0
    assert auto["device"] == ""
    assert concurrent["max_batch_size"] == 4
    assert no_warmup["enable_warmup"] is False
    cuda, both, warm = _settings({"model_device": "cuda:0"}, {"max_concurrent": "4", "max_batch_size": "2"},
                                 {"warmup_steps": "0", "enable_warmup": "1"})
    assert "MODEL_DEVICE=cuda:0: torch sees 0 CUDA device(s) here" in cuda["error"]  # a host without CUDA
    assert "MAX_CONCURRENT=4 and MAX_BATCH_SIZE=2" in both["error"]
    assert "WARMUP_STEPS=0 contradicts ENABLE_WARMUP=1" in warm["error"]
    text = _in_media_venv("from media_server.runners.text_slots import TextSettings as T\n"
                          "print(T(enable_chat_batching='0').max_user_slots, T(chat_batch_max_size='3').max_user_slots,"
                          " T().max_user_slots)")
    assert text.stdout.split() == ["1", "3", "8"], text.stderr


def test_chat_limits_and_metrics_switch_through_the_server(media_server):
    server = media_server({"MODEL_RUNNER": "text-slots", "TEXT_BACKEND": "mock", "ENABLE_CHAT_BATCHING": "0",
                           "MAX_NEW_TOKENS": "3", "CHAT_MAX_NEW_TOKENS": "6", "MAX_TEXT_CHARS": "50",
                           "ENABLE_METRICS": "0"})
    with server.client() as client:
        default = client.post("/v1/completions", json={"prompt": "hello", "ignore_eos": True}).json()
        assert default["usage"]["completion_tokens"] == 3, default
        too_many = client.post("/v1/completions", json={"prompt": "hello", "max_tokens": 7})
        assert too_many.status_code == 400 and "CHAT_MAX_NEW_TOKENS=6" in too_many.text, too_many.text
        long = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x" * 51}]})
        assert long.status_code == 413 and "MAX_TEXT_CHARS=50" in long.text, long.text
        assert client.get("/metrics").status_code == 404


@pytest.mark.parametrize("env, name", [({"CHAT_MAX_PROMPT_TOKENS": "-1"}, "CHAT_MAX_PROMPT_TOKENS"),
                                       ({"ENABLE_METRICS": "maybe"}, "ENABLE_METRICS"),
                                       ({"MODEL_DEVICE": "mps"}, "MODEL_DEVICE")])
def test_bad_small_model_server_values_stop_start_up(env, name):
    result = run_server_command(env)
    assert result.returncode == 1 and name in result.stderr


def test_source_run_uvicorn_sh_starts_the_server_as_documented(tmp_path):
    """`source run_uvicorn.sh` (the documented TP2/SD3.5 start-up) serves with this shell's settings from any
    directory, and the calling shell keeps its own directory."""
    import os
    import signal

    from tests.helpers import free_port

    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHON": str(media_python()), "HOST": "127.0.0.1",
           "SERVICE_PORT": str(port), "MODEL_RUNNER": "mock", "NO_AUTH": "1", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    log = open(tmp_path / "server.log", "wb")
    shell = subprocess.Popen(["bash", "-c", "source tt-media-server/run_uvicorn.sh; echo \"back in $PWD\""],
                             cwd=SERVER_DIR.parent,
                             env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and shell.poll() is None:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/tt-liveness", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        live = httpx.get(f"http://127.0.0.1:{port}/tt-liveness", timeout=5).json()
        assert live["status"] == "alive", live
    finally:
        os.killpg(shell.pid, signal.SIGINT)
        try:
            shell.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
    assert f"back in {SERVER_DIR.parent}\n" in (tmp_path / "server.log").read_text(errors="replace")


def test_a_request_without_max_tokens_gets_the_models_generation_default(tmp_path):
    """The small-model server's per-model default: generation_config.json's max_new_tokens, else 512; MAX_NEW_TOKENS
    (this server's name) still decides when given (text_slots passes it first)."""
    (tmp_path / "generation_config.json").write_text('{"max_new_tokens": 64}')
    script = (
        "import json, sys\n"
        "from media_server.runners.text_slots import generation_default_max_tokens as d\n"
        f"print(json.dumps([d({str(tmp_path)!r}), d({str(tmp_path / 'none')!r}), d(None)]))\n")
    done = _in_media_venv(script)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [64, 512, 512], done.stderr[-2000:]


def test_model_device_cuda_says_which_models_stay_on_the_cpu():
    """MODEL_DEVICE=cuda moves only the device-aware runners (vision, embeddings, rerank); models that run on the
    CPU whatever it says are named in one line at start-up (create_app logs it) instead of silently staying there.
    (Start-up itself refuses cuda on a host whose torch sees none, so the line is checked as create_app builds it.)"""
    script = ("import json\n"
              "from media_server.app import model_device_line as line\n"
              "print(json.dumps([line('cuda', {'openai/whisper-tiny.en': False, 'BAAI/bge-m3': True}),\n"
              "                  line('auto', {'openai/whisper-tiny.en': False}),\n"
              "                  line('mps', {'BAAI/bge-m3': True})]))")
    done = _in_media_venv(script)
    said, auto, all_on_device = json.loads(done.stdout.strip().splitlines()[-1])
    assert said == ("MODEL_DEVICE=cuda applies to the vision, embedding and rerank runners; openai/whisper-tiny.en "
                    "run on the CPU"), done.stderr[-2000:]
    assert auto is None and all_on_device is None
