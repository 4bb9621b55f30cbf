"""Scores of the media evals (stdlib only): word error rate, top-5 hits, retrieval order."""
from __future__ import annotations

import math
import re

_NUMBER_WORDS = {"0": "zero", "1": "one", "2": "two", "3": "three", "4": "four", "5": "five", "6": "six",
                 "7": "seven", "8": "eight", "9": "nine", "10": "ten", "11": "eleven", "12": "twelve"}


def normalise_words(text: str) -> list[str]:
    """Lower case, no punctuation, small numbers spelled out: "3 o'clock." -> ["three", "oclock"]."""
    words = re.sub(r"[^a-z0-9' ]+", " ", text.lower().replace("-", " ")).replace("'", "").split()
    return [_NUMBER_WORDS.get(w, w) for w in words]


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(substitutions + deletions + insertions, reference word count): Levenshtein over words."""
    ref, hyp = normalise_words(reference), normalise_words(hypothesis)
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        current = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h))
        previous = current
    return previous[-1], len(ref)


def corpus_wer(pairs: list[tuple[str, str]]) -> float:
    """Word error rate over all (reference, hypothesis) pairs: total errors / total reference words."""
    errors = words = 0
    for reference, hypothesis in pairs:
        e, n = word_errors(reference, hypothesis)
        errors, words = errors + e, words + n
    return errors / words if words else 1.0


def top_k_hit(labels: list[str], expected: tuple[str, ...], k: int = 5) -> bool:
    """True when one of the first k labels contains one of the expected names (case-insensitive)."""
    return any(name in str(label).lower() for label in labels[:k] for name in expected)


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0
