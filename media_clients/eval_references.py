"""Reference scores of the media evals: what a healthy server scores on these small sets.

Scores are fractions (higher is better), judged like every eval record: the target is
``score * (1 - tolerance)`` and the decision is made on the score's 95% interval
(``contracts.intervals.decide``). Two kinds of claim:

* an estimate (speech): the score is a sample of how the model does on speech like this, so its
  interval comes from a bootstrap over sentences and a few sentences decide little;
* ``every_item``: the claim is about a fixed set of unambiguous items (both photos in the top 5,
  every paraphrase closer than an unrelated sentence), checked exactly; nothing is estimated.

``conditions`` say what a reference depends on (data set, the program that made it, CPU ISA,
compute type); the eval records where this run differs, so a moved score can be read rightly.
A model without its own entry uses its kind's default.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Reference:
    task: str
    metric: str
    score: float
    source: str
    tolerance: float = 0.05
    every_item: bool = False
    conditions: dict[str, str] = field(default_factory=dict)

    @property
    def target(self) -> float:
        return round(self.score * (1 - self.tolerance), 6)


KIND_TASKS: dict[str, Reference] = {
    "speech": Reference("speech_word_accuracy", "1 - WER (word error rate) on the espeak-ng sentence set",
                        0.9, "default for speech models: at most ~10% word errors on clear synthetic speech", 0.15),
    "cnn": Reference("photo_top5", "share of photos (cat, coffee) whose ImageNet class is in the top 5",
                     1.0, "both photos are unambiguous ImageNet classes", every_item=True),
    "embedding": Reference("paraphrase_retrieval", "share of sentence triples where the paraphrase scores "
                           "closer to the anchor than the unrelated sentence (cosine)", 1.0,
                           "every pair is an obvious paraphrase next to an unrelated topic", every_item=True),
    "image": Reference("image_consistency", "share of checks passed: PNG of the requested size, same seed -> "
                       "same image, other seed -> other image", 1.0,
                       "a deterministic pipeline passes every check (content is not judged)", 0.0, every_item=True),
    "vision": Reference("vision_consistency", "share of checks passed: image tokens counted in prompt_tokens, two "
                        "images -> twice the image tokens, bigger image -> more, greedy repeats, streaming with an "
                        "image", 1.0, "a correct server passes every check (the words are not judged: the CPU "
                        "model is a random-weight fake)", 0.0, every_item=True),
}

#: Per-model overrides, measured on the CPU machine class (2-core AVX2 EPYC).
MODEL_REFERENCES: dict[str, dict[str, Reference]] = {
    "whisper-tiny.en": {"speech_word_accuracy": Reference(
        "speech_word_accuracy", KIND_TASKS["speech"].metric, 0.8746,
        "measured 2026-11-25 on the CPU machine class: faster-whisper int8, greedy, 30 espeak-ng sentences one "
        "request each, WER 39/311 = 0.125 scored by media_clients/scoring.py (jiwer; numbers compared as words, "
        "so '20' matches 'twenty'; the robotic voice costs words like 'seashells'); 95% bootstrap "
        "interval 0.801..0.939. Tolerance 0.15: the target (0.743, about 26% word errors) is the floor a serving "
        "bug (wrong sample rate, truncated audio, wrong language) falls through; sampling noise is in the "
        "interval, not in the tolerance",
        0.15,
        conditions={"data": "speech set 30 sentences, en-us, 150 wpm (sha256 6d6a937817fe)",
                    "generator": "eSpeak NG text-to-speech: 1.51", "cpu_isa": "avx512",
                    "compute_type": "int8"})},
}


def reference_for(kind: str, model_name: str) -> Reference:
    default = KIND_TASKS[kind]
    return MODEL_REFERENCES.get(model_name, {}).get(default.task, default)
