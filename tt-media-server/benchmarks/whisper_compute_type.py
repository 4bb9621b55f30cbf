"""CTranslate2 compute types of the CPU Whisper runner side by side: word error rate and real-time factor.

Why: WHISPER_COMPUTE_TYPE=int8 is the default because it runs faster than float32 on a CPU; the
default holds only while the words stay the same. Both runners (faster-whisper, the packaged
tiny.en weights, one compute type each) transcribe the project's speech set
(scripts/make_speech_data.py: thirty espeak-ng sentences of known text) in this process, clip by
clip, as the server's worker does; `--repeats` timed passes, the compute types alternating.

    WER = word errors / reference words over the set, media_clients/scoring.py's one definition
          (jiwer; scored in the media-clients venv when this venv has no jiwer)
    difference = WER(float32) - WER(int8), with a 95% interval by the paired bootstrap over
          sentences (contracts/intervals.py); goal |difference| <= 0.01: pass when the interval
          lies inside +-0.01, fail when it lies outside, inconclusive otherwise
    RTF = seconds transcribing / seconds of audio (median pass; below 1: faster than real time)

    cd tt-media-server && ../.workflow_venvs/media-server/bin/python benchmarks/whisper_compute_type.py \\
        [--compute-types int8 float32] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SERVER_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = SERVER_DIR.parent
import _paths  # noqa: E402,F401  (media_server and the repository importable: benchmarks/_paths.py)

from contracts.intervals import bootstrap_ratio  # noqa: E402
from whisper_rtf import speech_set  # noqa: E402 - also sets PROMETHEUS_MULTIPROC_DIR for the runner

GOAL = 0.01
SCORE = """
import json, sys
from media_clients.scoring import word_errors
print(json.dumps([word_errors(reference, hypothesis) for reference, hypothesis in json.load(sys.stdin)]))
"""


def runner_for(compute_type: str):
    """A loaded WhisperCpuRunner with WHISPER_COMPUTE_TYPE=compute_type."""
    from media_server.config import DeviceGroup, load_settings
    from media_server.runners.whisper_cpu import WhisperCpuRunner
    from media_server.speech.settings import speech_settings

    os.environ["WHISPER_COMPUTE_TYPE"] = compute_type
    speech_settings.cache_clear()
    runner = WhisperCpuRunner(load_settings(), DeviceGroup(0, (0,)))
    runner.load()
    return runner


def transcribe(runner, clips) -> tuple[list[str], float]:
    """Each clip's transcript and the seconds the whole set took."""
    texts = []
    started = time.perf_counter()
    for samples in clips:
        texts.append("".join(segment["text"] for segment in runner.start({"samples": samples, "options": {}})))
    return texts, time.perf_counter() - started


def word_errors(pairs: list[tuple[str, str]]) -> list[tuple[int, int]]:
    """(errors, reference words) per pair by media_clients/scoring.py, here or in the media-clients venv."""
    try:
        from media_clients.scoring import word_errors as score
    except ImportError:
        python = REPO_ROOT / ".workflow_venvs" / "media-clients" / "bin" / "python"
        if not python.exists():
            raise SystemExit(f"benchmark: no jiwer here and no media-clients venv at {python} to score with") from None
        result = subprocess.run([str(python), "-c", SCORE], input=json.dumps(pairs), capture_output=True, text=True,
                                cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
        if result.returncode != 0:
            raise SystemExit(f"benchmark: scoring failed: {result.stderr[-2000:]}") from None
        return [tuple(pair) for pair in json.loads(result.stdout)]
    return [score(reference, hypothesis) for reference, hypothesis in pairs]


def verdict(low: float, high: float) -> str:
    if -GOAL <= low and high <= GOAL:
        return "pass"
    if low > GOAL or high < -GOAL:
        return "fail"
    return "inconclusive"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compute-types", nargs=2, default=["int8", "float32"], metavar=("BASE", "OTHER"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    from media_server.speech.audio_input import AudioLimits, decode_audio

    speech = speech_set()
    limits = AudioLimits(10**9, 3600)
    clips = [decode_audio(clip.mp3.read_bytes(), "file", limits) for clip in speech.clips]
    audio_seconds = sum(clip.duration_seconds for clip in clips)
    samples = [clip.samples for clip in clips]
    runners = {compute_type: runner_for(compute_type) for compute_type in args.compute_types}
    texts, seconds = {}, {compute_type: [] for compute_type in runners}
    for _ in range(max(1, args.repeats)):
        for compute_type, runner in runners.items():
            texts[compute_type], took = transcribe(runner, samples)
            seconds[compute_type].append(took)
    references = [clip.text for clip in speech.clips]
    rows = {}
    for compute_type in runners:
        errors = word_errors(list(zip(references, texts[compute_type])))
        rtf = statistics.median(seconds[compute_type]) / audio_seconds
        rows[compute_type] = {"errors": [e for e, _ in errors], "words": [n for _, n in errors],
                              "wer": sum(e for e, _ in errors) / sum(n for _, n in errors), "rtf": rtf}
        print(f"WHISPER_COMPUTE_TYPE={compute_type}: WER {rows[compute_type]['wer']:.4f} "
              f"({sum(rows[compute_type]['errors'])} errors / {sum(rows[compute_type]['words'])} words, "
              f"{len(clips)} sentences); RTF {rtf:.3f} (median of {len(seconds[compute_type])} passes over "
              f"{audio_seconds:.1f} s of audio, one call per sentence)", flush=True)
    base, other = args.compute_types
    differences = [a - b for a, b in zip(rows[other]["errors"], rows[base]["errors"])]
    difference = sum(differences) / sum(rows[base]["words"])
    interval = bootstrap_ratio(differences, rows[base]["words"])
    decision = verdict(interval.low, interval.high)
    print(f"WER({other}) - WER({base}) = {difference:+.4f} (n={len(clips)} sentences, 95% CI "
          f"[{interval.low:+.4f}, {interval.high:+.4f}], {interval.method}); goal |difference| <= {GOAL}: {decision}; "
          f"RTF {base} / {other} = {rows[base]['rtf'] / rows[other]['rtf']:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"schema": "tt-media-whisper-compute-type/1", "model": "whisper-tiny.en",
                                         "audio_seconds": round(audio_seconds, 2), "sentences": len(clips),
                                         "rows": {k: {"wer": round(v["wer"], 5), "rtf": round(v["rtf"], 4)}
                                                  for k, v in rows.items()},
                                         "difference": round(difference, 5), "difference_95ci": interval.as_list(5),
                                         "goal": GOAL, "decision": decision,
                                         "load_average": os.getloadavg()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
