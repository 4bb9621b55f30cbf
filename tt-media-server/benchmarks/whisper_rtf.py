"""Real-time factor of the CPU Whisper runner (faster-whisper, packaged tiny.en), direct and through the server.

RTF = seconds spent transcribing / seconds of audio (below 1: faster than real time). The audio
is the project's synthesized speech set (scripts/make_speech_data.py): thirty sentences of 3-5 s
and one 45 s clip of the first ten. Whisper pads every call to a 30 s window, so short clips cost
nearly as much as 30 s ones: both are reported.

Direct: the runner in this process, each clip `--repeats` times per beam size.
Server (`--server-workers N ...`): a real server with N worker processes; the 45 s clip through
`POST /v1/audio/transcriptions` (cut into chunks spread over the workers), wall time per request.

    cd tt-media-server && ../.workflow_venvs/media-server/bin/python benchmarks/whisper_rtf.py \\
        [--beam 1 5] [--repeats 3] [--server-workers 1 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import atexit
import importlib.util
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SERVER_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = SERVER_DIR.parent
import _paths  # noqa: E402,F401  (media_server and the repository importable: benchmarks/_paths.py)
_METRICS_DIR = tempfile.mkdtemp(prefix="bench-metrics-")  # the in-process server's metrics; gone at exit
atexit.register(shutil.rmtree, _METRICS_DIR, True)
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", _METRICS_DIR)

from contracts.retry import GaveUp, NotYet, retry  # noqa: E402


def speech_set():
    spec = importlib.util.spec_from_file_location("make_speech_data", REPO_ROOT / "scripts" / "make_speech_data.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_speech_data"] = module
    spec.loader.exec_module(module)
    try:
        return module.ensure_speech_data()
    except module.SpeechDataError as error:
        raise SystemExit(f"benchmark: {error}") from None


def direct(speech, beams: list[int], repeats: int) -> list[dict]:
    from media_server.config import DeviceGroup, load_settings
    from media_server.runners.whisper_cpu import WhisperCpuRunner
    from media_server.speech.audio_input import AudioLimits, decode_audio

    limits = AudioLimits(10**9, 3600)
    runner = WhisperCpuRunner(load_settings(), DeviceGroup(0, (0,)))
    started = time.perf_counter()
    runner.load()
    print(f"model load + warm-up: {time.perf_counter() - started:.1f} s", flush=True)
    short = [decode_audio(clip.mp3.read_bytes(), "file", limits) for clip in speech.clips]
    long = decode_audio(speech.long_clip.mp3.read_bytes(), "file", limits)
    rows = []
    for beam in beams:
        runner.beam_size = beam
        for name, clips in ((f"{len(short)} sentences, one call each", short), ("45 s clip, one call", [long])):
            audio = sum(clip.duration_seconds for clip in clips)
            timings = []
            for _ in range(repeats):
                started = time.perf_counter()
                for clip in clips:
                    for _segment in runner.start({"samples": clip.samples, "options": {}}):
                        pass
                timings.append(time.perf_counter() - started)
            seconds = statistics.median(timings)
            rows.append({"path": "direct", "beam_size": beam, "audio": name, "audio_seconds": round(audio, 2),
                         "median_seconds": round(seconds, 3), "rtf": round(seconds / audio, 4), "repeats": repeats})
            print(f"direct beam={beam} {name}: {seconds:.2f} s for {audio:.1f} s of audio, RTF {seconds / audio:.3f}",
                  flush=True)
    return rows


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def through_server(speech, workers: int, repeats: int, timeout: float, beam: int) -> dict:
    import httpx

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    groups = ",".join(f"({index})" for index in range(workers))
    env = dict(os.environ, MODEL="whisper-tiny.en", DEVICE_IDS=groups, NO_AUTH="1", LOG_LEVEL="WARNING",
               WHISPER_BEAM_SIZE=str(beam))
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    log_path = Path(tempfile.mkdtemp(prefix="bench-whisper-")) / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "uvicorn", "main:app", "--lifespan", "on", "--host",
                                    "127.0.0.1", "--port", str(port), "--no-access-log"], cwd=SERVER_DIR, env=env,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:

        def warm(_remaining_s: float) -> None:
            if process.poll() is not None:
                raise SystemExit(f"benchmark: the server exited ({process.returncode}); see {log_path}")
            try:
                live = httpx.get(url + "/tt-liveness", timeout=2).json()
            except httpx.HTTPError as exc:
                raise NotYet(str(exc)) from None
            if live["worker_count"] != workers:
                raise NotYet(f"{live['worker_count']} worker(s) warm")

        try:
            retry(f"{workers} whisper workers to be warm", warm, deadline_s=timeout, delay_s=0.5)
        except GaveUp as exc:
            raise SystemExit(f"benchmark: {exc}; see {log_path}") from None
        audio = speech.long_clip.mp3.read_bytes()
        timings = []
        with httpx.Client(base_url=url, timeout=600) as client:
            for _ in range(repeats + 1):  # the first request warms the HTTP path and is not counted
                started = time.perf_counter()
                response = client.post("/v1/audio/transcriptions", files={"file": ("long.mp3", audio)})
                response.raise_for_status()
                timings.append(time.perf_counter() - started)
        seconds = statistics.median(timings[1:])
        duration = speech.long_clip.duration_seconds
        print(f"server, {workers} worker(s), 45 s clip: {seconds:.2f} s, RTF {seconds / duration:.3f}", flush=True)
        return {"path": f"server, {workers} worker(s)", "beam_size": beam, "audio": "45 s clip, one request",
                "audio_seconds": round(duration, 2), "median_seconds": round(seconds, 3),
                "rtf": round(seconds / duration, 4), "repeats": repeats}
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--beam", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--server-workers", type=int, nargs="*", default=[])
    parser.add_argument("--server-beam", type=int, default=5, help="the served decoder's beam (its default: 5)")
    parser.add_argument("--ready-timeout", type=float, default=600.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # like Ctrl-C: the finally blocks stop the server
    speech = speech_set()
    rows = direct(speech, args.beam, args.repeats)
    for workers in args.server_workers:
        rows.append(through_server(speech, workers, args.repeats, args.ready_timeout, args.server_beam))
    print()
    print(f"{'path':<22} {'beam':>4} {'audio':<30} {'audio s':>8} {'median s':>9} {'RTF':>7}")
    for row in rows:
        print(f"{row['path']:<22} {row['beam_size']:>4} {row['audio']:<30} {row['audio_seconds']:>8.1f} "
              f"{row['median_seconds']:>9.2f} {row['rtf']:>7.3f}")
    if args.json:
        args.json.write_text(json.dumps({"schema": "tt-media-whisper-rtf/1", "model": "whisper-tiny.en",
                                         "cpu_count": os.cpu_count(), "load_average": os.getloadavg(),
                                         "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
