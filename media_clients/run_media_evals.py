#!/usr/bin/env python3
"""Media evals client: one accuracy check per kind, written as an eval record (``tt-eval-record/1``).

- speech: word error rate of the transcripts of the espeak-ng sentence set (scored as 1 - WER), and,
  when the spec allows preprocessing, speaker diarization: DER on two- and three-speaker espeak-ng
  conversations and the share of speaker counts found (``diarization_eval.py``);
- cnn: top-5 on scikit-image's cat and coffee photos;
- embedding: retrieval sanity, paraphrases rank above unrelated sentences;
- image: PNG of the requested size, seeded determinism (the same seed gives the same image);
- vision: image tokens counted and consistent (one, two, bigger images), greedy repeats, streaming.
Details per item (transcripts, labels, similarities) go to ``evals/<task>/items.json``.
"""
from __future__ import annotations

import base64
import json
import shlex
import struct
import sys
from pathlib import Path
from typing import Any

from contracts.intervals import Interval, bootstrap_ratio, decide, exact
from records.evals import STATUS_ERROR, STATUS_FAILED, AccuracyCheck, EvalRecord
from media_clients import data, diarization_eval, scoring
from media_clients.common import EXIT_FAILED, EXIT_OK, ClientRun, log, main_wrapper
from media_clients.eval_references import Reference, reference_for
from media_clients.vision import eval_checks
from media_clients.workloads import (CnnWorkload, EmbeddingWorkload, ImageWorkload, SpeechWorkload,
                                     describe, spec_params)

WORKFLOW_ARG_KEYS = frozenset()


class EvalError(RuntimeError):
    """The eval could not be scored (a request failed, data missing); one line."""


def eval_speech(run: ClientRun) -> tuple[float, int, list[dict]]:
    workload = SpeechWorkload({})
    clips = workload.clips[:3] if run.mode == "smoke" else workload.clips
    pairs, items = [], []
    for clip in clips:
        answer = workload.transcribe(run.http, run.served_model_name, clip)
        if not answer.ok:
            raise EvalError(f"transcription of {clip.clip_id} failed: {describe(answer)}")
        text = str(answer.json().get("text", ""))
        errors, words = scoring.word_errors(clip.text, text)
        pairs.append((clip.text, text))
        items.append({"clip": clip.clip_id, "reference": clip.text, "transcript": text, "word_errors": errors,
                      "words": words, "seconds": clip.seconds, "latency_s": round(answer.elapsed_s, 3)})
    wer = scoring.corpus_wer(pairs)
    log(f"WER {wer:.3f} over {sum(i['words'] for i in items)} words in {len(items)} clips")
    return 1.0 - wer, len(items), items


def eval_cnn(run: ClientRun) -> tuple[float, int, list[dict]]:
    workload = CnnWorkload({})
    items = []
    for photo in workload.photos:
        answer = workload.classify(run.http, run.served_model_name, photo, top_k=5)
        if not answer.ok:
            raise EvalError(f"classification of {photo.name} failed: {describe(answer)}")
        labels = [str(d.get("label")) for d in answer.json().get("image_data", [])]
        hit = scoring.top_k_hit(labels, photo.expected, 5)
        items.append({"photo": photo.name, "top5": labels[:5], "expected_any_of": list(photo.expected), "hit": hit})
        log(f"{photo.name}: {'hit' if hit else 'MISS'} top-5 {labels[:5]}")
    return sum(i["hit"] for i in items) / len(items), len(items), items


def eval_embedding(run: ClientRun) -> tuple[float, int, list[dict]]:
    workload = EmbeddingWorkload({})
    items = []
    for anchor, paraphrase, unrelated in data.SENTENCE_TRIPLES:
        answer = workload.embed(run.http, run.served_model_name, [anchor, paraphrase, unrelated])
        if not answer.ok:
            raise EvalError(f"embedding request failed: {describe(answer)}")
        vectors = [d["embedding"] for d in sorted(answer.json()["data"], key=lambda d: d.get("index", 0))]
        close, far = scoring.cosine(vectors[0], vectors[1]), scoring.cosine(vectors[0], vectors[2])
        items.append({"anchor": anchor, "paraphrase": paraphrase, "unrelated": unrelated,
                      "cos_paraphrase": round(close, 4), "cos_unrelated": round(far, 4), "ranked": close > far})
    log(f"paraphrase ranked first in {sum(i['ranked'] for i in items)}/{len(items)} triples")
    return sum(i["ranked"] for i in items) / len(items), len(items), items


def _png_size(png: bytes) -> tuple[int, int] | None:
    if not png.startswith(b"\x89PNG\r\n\x1a\n") or len(png) < 24:
        return None
    return struct.unpack(">II", png[16:24])


def eval_image(run: ClientRun) -> tuple[float, int, list[dict]]:
    workload = ImageWorkload(spec_params(run.spec))
    env = run.spec.env_vars
    side = int(env.get("IMAGE_SIZE") or 0) or None

    def generate(seed: int) -> bytes:
        body = workload.body(run.served_model_name, 0)
        body["seed"] = seed
        answer = run.http.post_json(workload.endpoint, body)
        if not answer.ok:
            raise EvalError(f"image generation (seed {seed}) failed: {describe(answer)}")
        return base64.b64decode(answer.json()["data"][0]["b64_json"])

    a, b, c = generate(7), generate(7), generate(8)
    size = _png_size(a)
    checks = [{"check": "png", "passed": size is not None, "detail": f"size {size}"},
              {"check": "requested size", "passed": side is None or size == (side, side),
               "detail": f"expected {side}x{side}" if side else "server default size"},
              {"check": "same seed, same image", "passed": a == b, "detail": ""},
              {"check": "other seed, other image", "passed": a != c, "detail": ""}]
    for item in checks:
        log(f"{item['check']}: {'ok' if item['passed'] else 'FAILED'} {item['detail']}")
    return sum(i["passed"] for i in checks) / len(checks), len(checks), checks


def eval_vision(run: ClientRun) -> tuple[float, int, list[dict]]:
    checks = eval_checks(run.http, run.served_model_name)
    for item in checks:
        log(f"{item['check']}: {'ok' if item['passed'] else 'FAILED ' + str(item['error'])}")
    return sum(i["passed"] for i in checks) / len(checks), len(checks), checks


EVALS = {"speech": eval_speech, "cnn": eval_cnn, "embedding": eval_embedding, "image": eval_image,
         "vision": eval_vision}


def score_interval(kind: str, ref: Reference, value: float, items: list[dict]) -> Interval:
    """Speech: a bootstrap over sentences of the corpus WER, turned into accuracy. A fixed set of
    items checked one by one: exact."""
    if kind == "speech" and not ref.every_item:
        if len(items) < 2:
            return Interval(0.0, 1.0, "one sentence: no interval (every value possible)")
        wer = bootstrap_ratio([i["word_errors"] for i in items], [i["words"] for i in items])
        return Interval(max(0.0, 1.0 - wer.high), min(1.0, 1.0 - wer.low), wer.method)
    return exact(value)


def cpu_isa() -> str:
    """The widest x86 vector ISA /proc/cpuinfo advertises (kernels are chosen by it)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return "unknown"
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "other"


def current_conditions(run: ClientRun, ref: Reference) -> dict[str, str]:
    """This run's values of the conditions the reference names."""
    now: dict[str, str] = {}
    if "data" in ref.conditions or "generator" in ref.conditions:
        module = data._speech_module()
        now.update(data=module.dataset_identity(), generator=module.generator_version())
    now["cpu_isa"] = cpu_isa()
    env = run.spec.env_vars
    now["compute_type"] = str(env.get("WHISPER_COMPUTE_TYPE") or "int8") if run.kind == "speech" else "default"
    return {key: now[key] for key in ref.conditions if key in now}


def condition_differences(reference: dict[str, str], now: dict[str, str]) -> list[str]:
    return [f"{key}: {now.get(key, 'unknown')} here, {value} for the reference"
            for key, value in reference.items() if now.get(key) != value]


def run(run: ClientRun) -> int:
    ref = reference_for(run.kind, run.spec.model_name)
    command = shlex.join([sys.executable, "media_clients/run_media_evals.py", "--model-spec-json",
                          "RUN_DIR/model_spec.json", "--server-url", run.http.base_url])
    items: list[Any] = []
    error = None
    try:
        value, samples, items = EVALS[run.kind](run)
    except (EvalError, data.DataUnavailable) as exc:
        error = str(exc)
    records = [write_record(run, ref, command, None if error else (value, samples, items,
                                                                   score_interval(run.kind, ref, value, items)),
                            error, conditions=True)]
    if run.kind == "speech":
        records += diarization_records(run, command)
    run.write_outputs("evals", [path for pair in records for path in pair[1:]])
    # Inconclusive does not fail the step: the release verdict decides what an undecided score means.
    return EXIT_FAILED if any(status in (STATUS_FAILED, STATUS_ERROR) for status, *_ in records) else EXIT_OK


def write_record(run: ClientRun, ref: Reference, command: str, scored: tuple | None, error: str | None,
                 conditions: bool = False) -> tuple[str, Path, Path]:
    """One eval record (and its items) for `ref`: judged on its interval, or an error; (status, paths)."""
    task_dir = run.out_dir("evals") / ref.task
    task_dir.mkdir(parents=True, exist_ok=True)
    record = EvalRecord(model_id=run.model_id, task=ref.task, metric=ref.metric, mode=run.mode,
                        lm_eval_command=command, reference_score=ref.score, reference_source=ref.source,
                        tolerance=ref.tolerance)
    items: list[Any] = []
    if scored is None:
        record.status, record.error = STATUS_ERROR, error
        log(f"{ref.task}: error: {error}")
    else:
        value, samples, items, interval = scored
        record.value, record.samples = round(value, 6), samples
        decision = decide(interval, ref.target, higher_is_better=True)
        record.apply(AccuracyCheck(ref.score, ref.score, ref.tolerance, ref.target, interval, decision,
                                   round(value / ref.score, 6) if ref.score else None, None))
        if conditions:
            record.reference_conditions = dict(ref.conditions)
            record.condition_differences = condition_differences(ref.conditions, current_conditions(run, ref))
        for line in record.condition_differences:
            log(f"{ref.task}: this run differs from the reference score's measurement: {line}")
        log(f"{ref.task}: {value:.4f} (95% CI {interval.low:.4f}..{interval.high:.4f}, n={samples}; target "
            f"{ref.target:g} = reference {ref.score:g} * (1 - {ref.tolerance:g})) -> {record.status}")
    items_path = task_dir / "items.json"
    items_path.write_text(json.dumps({"task": ref.task, "items": items}, indent=2) + "\n")
    return str(record.status), record.write(task_dir / "eval_record.json"), items_path


def diarization_records(run: ClientRun, command: str) -> list[tuple[str, Path, Path]]:
    """DER (two and three speakers) and speaker-count records, when the spec allows preprocessing."""
    if not diarization_eval.preprocessing_allowed(run.spec.env_vars):
        log("speech diarization evals: not run, the spec sets ALLOW_AUDIO_PREPROCESSING=false")
        return []
    try:
        outcomes = diarization_eval.evaluate(run.http, run.served_model_name, run.mode)
    except (diarization_eval.DiarizationEvalError, data.DataUnavailable) as exc:
        return [write_record(run, ref, command, None, str(exc))
                for ref in (diarization_eval.TWO, diarization_eval.THREE, diarization_eval.COUNT)]
    for item in outcomes[-1].items:
        log(f"{item['conversation']}: {item['speakers_found']}/{item['speakers']} speakers, DER {item['der']:.3f} "
            f"(missed {item['missed_seconds']:.2f} s, false alarm {item['false_alarm_seconds']:.2f} s, confusion "
            f"{item['confusion_seconds']:.2f} s of {item['reference_seconds']:.1f} s)")
    return [write_record(run, o.reference, command, (o.value, o.samples, o.items, o.interval), None)
            for o in outcomes]


def main(argv: list[str] | None = None) -> int:
    return main_wrapper(run, argv, __doc__.splitlines()[0], "evals")


if __name__ == "__main__":
    sys.exit(main())
