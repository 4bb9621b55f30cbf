"""Scores of the media evals: word error rate (jiwer), top-5 hits, retrieval order.

Word error rate has one definition in this repository, here: jiwer's word alignment over texts
normalised by ``WER_TRANSFORM``. The media evals (``run_media_evals.py``) and the media server's
speech tests (``tests/tt_media_server``) both score through ``word_errors``/``word_error_rate``,
so a test's threshold and an eval's reference speak of the same number.

Why the normalisation: a transcript is judged on its words, not on how they are written. Whisper
writes numbers as digits ("every 20 minutes", "at 3 o'clock") where the sentence set spells them
("twenty", "three"); case, punctuation and hyphens differ the same way. Without normalising, every
such spelling would count as a word error that no listener would hear. Both sides go through the
same steps: lower case; hyphens and slashes split words; punctuation (apostrophes included) is
dropped; whole numbers are spelled out as English words (``spell_number``: "20" -> "twenty",
"21" -> "twenty one"). Spelling digits out, rather than turning words into digits, is the direction
that needs no parsing of number phrases; a year said as "nineteen ninety" still differs from
"1990" written as a number ("one thousand nine hundred ninety"), which the sentence set avoids.
jiwer ships no number normaliser, so ``spell_number`` is the one hand-written step.
"""
from __future__ import annotations

import math
import re

import jiwer

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
         "sixteen seventeen eighteen nineteen").split()
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_LARGE = ((10 ** 9, "billion"), (10 ** 6, "million"), (1000, "thousand"), (100, "hundred"))


def spell_number(n: int) -> str:
    """A whole number as English words without "and": 105 -> "one hundred five"."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + (f" {_ONES[ones]}" if ones else "")
    for size, name in _LARGE:
        if n >= size:
            head, rest = divmod(n, size)
            return f"{spell_number(head)} {name}" + (f" {spell_number(rest)}" if rest else "")
    raise AssertionError("unreachable")


class SpellOutNumbers(jiwer.AbstractTransform):
    """jiwer step: every run of digits (below 10^12) becomes its English words."""

    def process_string(self, s: str) -> str:
        return re.sub(r"\b\d{1,12}\b", lambda m: f" {spell_number(int(m.group()))} ", s)


#: The normalisation both sides of every word error rate go through (see the module docstring).
WER_TRANSFORM = jiwer.Compose([
    jiwer.ToLowerCase(),
    jiwer.SubstituteRegexes({r"(?<=\d),(?=\d{3})": "", r"[-/]": " "}),  # "1,000" -> "1000"; "well-known" -> 2 words
    jiwer.RemovePunctuation(),
    SpellOutNumbers(),
    jiwer.RemoveMultipleSpaces(),
    jiwer.Strip(),
    jiwer.ReduceToListOfListOfWords(),
])


def normalise_words(text: str) -> list[str]:
    """The words a word error rate compares: "Meet at 3 o'clock." -> ["meet", "at", "three", "oclock"]."""
    return WER_TRANSFORM(text)[0]


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(substitutions + deletions + insertions, reference word count) after ``WER_TRANSFORM``."""
    out = jiwer.process_words(reference, hypothesis, reference_transform=WER_TRANSFORM,
                              hypothesis_transform=WER_TRANSFORM)
    errors = out.substitutions + out.deletions + out.insertions
    return errors, out.substitutions + out.deletions + out.hits


def word_error_rate(reference: str | list[str], hypothesis: str | list[str]) -> float:
    """jiwer's WER after ``WER_TRANSFORM``; over lists, total errors / total reference words."""
    return jiwer.wer(reference, hypothesis, reference_transform=WER_TRANSFORM, hypothesis_transform=WER_TRANSFORM)


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
