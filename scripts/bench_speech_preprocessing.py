#!/usr/bin/env python3
"""What speech preprocessing costs and saves: diarization real-time factor, and VAD on long silences.

Two measurements, both in this process with the media server's own code (no HTTP in the way):

1. Diarization cost: the espeak-ng conversation set (scripts/make_diarization_data.py), each
   conversation through the Silero VAD and the diarization backend; real-time factor (RTF) =
   seconds spent / seconds of audio, per torch thread count (``--threads 1 2``), with the DER of
   each answer (collar 0.25 s) so a fast but wrong diarizer shows. The peer figure beside it: the
   same audio transcribed by the CPU Whisper runner (tiny.en), as a ratio (diarization / Whisper).
2. VAD on long silences: the speech set's first ten sentences, each followed by ``--silence``
   seconds of silence, transcribed as the server does without preprocessing (30 s chunks of the
   whole audio) and with it (speech-only chunks the VAD found, VAD time included); the two times,
   their ratio and the share of the reference words each transcript has (the saving must not cost words).

    .workflow_venvs/media-server/bin/python scripts/bench_speech_preprocessing.py \\
        [--threads 1 2] [--repeats 3] [--silence 20] [--json out.json]

Prints one line per figure and exits 0 when every measurement ran (it judges nothing: the issue's
goals, RTF <= 0.25 on 2 cores and DER <= 10% / 20%, are stated beside the figures).
"""

from __future__ import annotations

import argparse
import atexit
import difflib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SERVER_DIR = REPO_ROOT / "tt-media-server"
import _repo  # noqa: E402  (the repository and scripts/ importable: scripts/_repo.py)

_repo.use_media_server()
_METRICS_DIR = tempfile.mkdtemp(prefix="bench-metrics-")  # the in-process server's metrics; gone at exit
atexit.register(shutil.rmtree, _METRICS_DIR, True)
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", _METRICS_DIR)

import numpy as np  # noqa: E402

import make_diarization_data  # noqa: E402
import make_speech_data  # noqa: E402
from media_clients.diarization_scoring import Span, score  # noqa: E402

SR = 16_000


def word_recall(reference: str, hypothesis: str) -> float:
    """Share of the reference's words found, in order, in the hypothesis (lower case, no punctuation).

    Why not WER: this venv has no jiwer; the figure only has to show that skipping silence loses no words."""
    def words(text: str) -> list[str]:
        return re.sub(r"[^a-z0-9 ]+", " ", text.lower()).split()

    ref, hyp = words(reference), words(hypothesis)
    matched = sum(block.size for block in difflib.SequenceMatcher(a=ref, b=hyp, autojunk=False).get_matching_blocks())
    return matched / len(ref) if ref else 1.0


def _decode(path: Path):
    from media_server.speech.audio_input import AudioLimits, decode_audio

    return decode_audio(path.read_bytes(), "file", AudioLimits(10**9, 3600)).samples


def _whisper():
    from media_server.config import DeviceGroup, load_settings
    from media_server.runners.whisper_cpu import WhisperCpuRunner

    runner = WhisperCpuRunner(load_settings(), DeviceGroup(0, (0,)))
    runner.load()
    return runner


def _transcribe(runner, samples: np.ndarray, chunks) -> tuple[float, str]:
    """Seconds to transcribe `chunks` of `samples` one after another, and the joined text."""
    started = time.perf_counter()
    texts = []
    for chunk in chunks:
        for segment in runner.start({"samples": chunk.samples_of(samples), "options": {}}):
            texts.append(segment["text"])
    return time.perf_counter() - started, "".join(texts).strip()


def diarization_cost(threads: list[int], repeats: int, runner) -> list[dict]:
    from media_server.speech.chunking import plan_chunks
    from media_server.speech.diarization import SpeakerCount
    from media_server.speech.diarize_embeddings import EmbeddingDiarizer
    from media_server.speech.vad import detect_speech

    conversations = make_diarization_data.ensure_conversations()
    audio = [(c, _decode(c.wav)) for c in conversations]
    total_audio = sum(c.duration_seconds for c in conversations)
    whisper_seconds = sum(_transcribe(runner, samples, plan_chunks(samples, 30.0))[0] for _, samples in audio)
    print(f"peer: whisper-tiny.en transcribes the {len(audio)} conversations ({total_audio:.1f} s) in "
          f"{whisper_seconds:.2f} s, RTF {whisper_seconds / total_audio:.3f}", flush=True)
    rows = []
    for count in threads:
        diarizer = EmbeddingDiarizer(threads=count)
        started = time.perf_counter()
        diarizer.load()
        load_seconds = time.perf_counter() - started
        runs, ders, found = [], {2: [], 3: []}, 0
        for repeat in range(repeats):
            spent = 0.0
            for conversation, samples in audio:
                started = time.perf_counter()
                turns = diarizer.diarize(samples, detect_speech(samples), SpeakerCount())
                spent += time.perf_counter() - started
                if repeat == 0:
                    reference = [Span(t.speaker, t.start, t.end) for t in conversation.turns]
                    result = score(reference, [Span(t.speaker, t.start, t.end) for t in turns], collar=0.25)
                    ders[conversation.speaker_count].append(result.der)
                    found += len({t.speaker for t in turns}) == conversation.speaker_count
            runs.append(spent)
        seconds = statistics.median(runs)
        row = {"measure": "diarization (VAD + embeddings backend)", "torch_threads": count,
               "audio_seconds": round(total_audio, 2), "median_seconds": round(seconds, 3),
               "rtf": round(seconds / total_audio, 4), "repeats": repeats, "load_seconds": round(load_seconds, 2),
               "whisper_seconds": round(whisper_seconds, 3),
               "ratio_to_whisper": round(seconds / whisper_seconds, 3),
               "der_two_speakers_mean": round(statistics.mean(ders[2]), 4),
               "der_three_speakers_mean": round(statistics.mean(ders[3]), 4),
               "speaker_count_right": f"{found}/{len(audio)}"}
        rows.append(row)
        print(f"diarization, {count} torch thread(s): {seconds:.2f} s for {total_audio:.1f} s of audio, RTF "
              f"{row['rtf']:.3f} (goal <= 0.25), {row['ratio_to_whisper']:.2f}x Whisper's time; DER 2 speakers "
              f"{row['der_two_speakers_mean']:.3f} (goal <= 0.10), 3 speakers {row['der_three_speakers_mean']:.3f} "
              f"(goal <= 0.20), speaker count right {found}/{len(audio)}; load {load_seconds:.1f} s", flush=True)
    return rows


def vad_saving(silence_seconds: float, repeats: int, runner) -> dict:
    from media_server.speech.chunking import plan_chunks
    from media_server.speech.vad import detect_speech, plan_speech_chunks

    speech = make_speech_data.ensure_speech_data()
    clips = speech.clips[:make_speech_data.LONG_CLIP_SENTENCES]
    gap = np.zeros(int(silence_seconds * SR), dtype=np.float32)
    samples = np.concatenate([piece for clip in clips for piece in (_decode(clip.wav), gap)])
    duration = len(samples) / SR
    reference = " ".join(clip.text for clip in clips)
    plain, trimmed, vad_only = [], [], []
    for _ in range(repeats):
        seconds, plain_text = _transcribe(runner, samples, plan_chunks(samples, 30.0))
        plain.append(seconds)
        started = time.perf_counter()
        regions = detect_speech(samples)
        chunks = plan_speech_chunks(samples, regions, 30.0)
        vad_seconds = time.perf_counter() - started
        seconds, vad_text = _transcribe(runner, samples, chunks)
        trimmed.append(seconds + vad_seconds)
        vad_only.append(vad_seconds)
    row = {"measure": "VAD on long silences", "audio_seconds": round(duration, 2),
           "speech_seconds": round(sum(c.duration_seconds for c in chunks), 2),
           "silence_between_sentences_s": silence_seconds, "repeats": repeats,
           "without_vad_seconds": round(statistics.median(plain), 3),
           "with_vad_seconds": round(statistics.median(trimmed), 3),
           "vad_seconds": round(statistics.median(vad_only), 3),
           "chunks_without_vad": len(plan_chunks(samples, 30.0)), "chunks_with_vad": len(chunks),
           "runs_without_vad_seconds": [round(x, 3) for x in plain],
           "runs_with_vad_seconds": [round(x, 3) for x in trimmed],
           "ratio_with_to_without": round(statistics.median(trimmed) / statistics.median(plain), 3),
           "word_recall_without_vad": round(word_recall(reference, plain_text), 4),
           "word_recall_with_vad": round(word_recall(reference, vad_text), 4)}
    print(f"VAD, {duration:.0f} s audio ({row['speech_seconds']:.0f} s speech sent): "
          f"without {row['without_vad_seconds']:.2f} s ({row['chunks_without_vad']} Whisper calls), with "
          f"{row['with_vad_seconds']:.2f} s ({row['chunks_with_vad']} calls + {row['vad_seconds']:.2f} s of VAD), "
          f"ratio {row['ratio_with_to_without']:.2f}; reference "
          f"words found {row['word_recall_without_vad']:.3f} without, {row['word_recall_with_vad']:.3f} with",
          flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch threads of the diarizer")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--silence", type=float, default=20.0, help="seconds of silence after each sentence")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--only", choices=("diarization", "vad"), default=None, help="run one measurement")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.silence < 0 or any(t < 1 for t in args.threads):
        parser.error("--repeats and --threads must be >= 1, --silence >= 0")
    try:
        runner = _whisper()
        rows = [] if args.only == "vad" else diarization_cost(args.threads, args.repeats, runner)
        if args.only != "diarization":
            rows.append(vad_saving(args.silence, args.repeats, runner))
    except make_speech_data.SpeechDataError as error:
        print(f"bench_speech_preprocessing: {error}", file=sys.stderr)
        return 1
    if args.json:
        args.json.write_text(json.dumps({"cpu_count": os.cpu_count(), "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
