"""Reference scores of the media evals: what a healthy server scores on these small sets.

Scores are fractions (higher is better), judged like every eval record: passed when
score >= reference * (1 - tolerance). A model without its own entry uses its kind's default.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reference:
    task: str
    metric: str
    score: float
    source: str
    tolerance: float = 0.05


KIND_TASKS: dict[str, Reference] = {
    "speech": Reference("speech_word_accuracy", "1 - WER (word error rate) on the espeak-ng sentence set",
                        0.9, "default for speech models: at most ~10% word errors on clear synthetic speech"),
    "cnn": Reference("photo_top5", "share of photos (cat, coffee) whose ImageNet class is in the top 5",
                     1.0, "both photos are unambiguous ImageNet classes"),
    "embedding": Reference("paraphrase_retrieval", "share of sentence triples where the paraphrase scores "
                           "closer to the anchor than the unrelated sentence (cosine)", 1.0,
                           "every pair is an obvious paraphrase next to an unrelated topic"),
    "image": Reference("image_consistency", "share of checks passed: PNG of the requested size, same seed -> "
                       "same image, other seed -> other image", 1.0,
                       "a deterministic pipeline passes every check (content is not judged)", 0.0),
}

#: Per-model overrides, measured on the CPU machine class (2-core AVX2 EPYC).
MODEL_REFERENCES: dict[str, dict[str, Reference]] = {
    "whisper-tiny.en": {"speech_word_accuracy": Reference(
        "speech_word_accuracy", KIND_TASKS["speech"].metric, 0.86,
        "measured 2026-11-23 on the CPU machine class: faster-whisper int8, greedy, 10 espeak-ng sentences, "
        "WER 0.14 (the robotic voice costs words like 'seashells')")},
}


def reference_for(kind: str, model_name: str) -> Reference:
    default = KIND_TASKS[kind]
    return MODEL_REFERENCES.get(model_name, {}).get(default.task, default)
