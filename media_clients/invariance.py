"""Correctness under load for media kinds: an answer must not depend on what else is in flight.

A media server batches requests (the scheduler's batch window, micro-batched embeddings, several
workers): a request's answer must be the one it gets alone. Each case sends the same inputs one
at a time, then all at once, and compares:

- embeddings: cosine of every vector alone vs in one batched request and vs 8 concurrent requests
  >= ``MIN_COSINE`` (float sums in another order may move the last bits, never the direction);
- speech: the transcript of the same clip alone and 4 times at once is identical;
- cnn: the top-5 classes of each photo alone and all photos at once are identical, in order.

Each comparison of one answer alone vs under load counts once; the share that differs is the
divergence rate, decided against ``allowed`` (the spec's ``max_batch_divergence``, default 0) on its
95% Wilson interval (``contracts.intervals.decide_share``, the rule the report's check uses). A case
returns its counts (``Divergence``) or raises ``Diverged``, an AssertionError naming the first input
that differs and how, carrying the counts, so the tests record holds the rate either way.
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from contracts.intervals import FAIL, decide_share
from media_clients import data
from media_clients.transport import Answer, MediaHttp
from media_clients.workloads import CnnWorkload, EmbeddingWorkload, SpeechWorkload

MIN_COSINE = 0.9999
IN_FLIGHT = 8
SENTENCES = (
    "A cat sits on the warm windowsill.",
    "The stock market fell sharply on Monday.",
    "Bring an umbrella, it may rain later.",
    "Quantum computers use qubits instead of bits.",
    "She plays the violin in the city orchestra.",
    "The recipe needs two eggs and a cup of flour.",
    "Mount Everest is the highest mountain on Earth.",
    "He fixed the bicycle's flat tyre in ten minutes.",
)


@dataclass(frozen=True)
class Divergence:
    """Comparisons alone vs under load, and how many differed."""

    divergent: int
    compared: int


class Diverged(AssertionError):
    """The divergence rate clearly exceeds the allowance; the message names the first difference."""

    def __init__(self, message: str, divergence: Divergence) -> None:
        super().__init__(message)
        self.divergence = divergence


def _judged(differences: list[str], compared: int, allowed: float) -> Divergence:
    found = Divergence(len(differences), compared)
    if decide_share(found.divergent, compared, allowed)[0] == FAIL:
        raise Diverged(f"{differences[0]} ({found.divergent} of {compared} answers changed; allowed "
                       f"{allowed:g})", found)
    return found


def _at_once(send: Callable[[object], Answer], items, workers: int = IN_FLIGHT) -> list[Answer]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(send, items))


def _ok(answer: Answer, what: str) -> dict:
    if not answer.ok:
        raise AssertionError(f"{what}: HTTP {answer.status} {answer.error or answer.text(200)}")
    return answer.json()


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)) or 1.0)


def embedding_invariance(http: MediaHttp, model: str, allowed: float = 0.0) -> Divergence:
    """Each sentence's vector alone vs in one batched request and vs among 8 in flight: 16 comparisons."""
    w = EmbeddingWorkload({})
    alone = [_ok(w.embed(http, model, [s]), "one sentence alone")["data"][0]["embedding"] for s in SENTENCES]
    batched = [d["embedding"]
               for d in _ok(w.embed(http, model, list(SENTENCES)), "all sentences in one request")["data"]]
    concurrent = [_ok(a, "one sentence among 8 in flight")["data"][0]["embedding"]
                  for a in _at_once(lambda s: w.embed(http, model, [s]), SENTENCES)]
    differences = []
    for how, vectors in (("in one batched request", batched), (f"with {IN_FLIGHT} requests in flight", concurrent)):
        for i, sentence in enumerate(SENTENCES):
            cos = _cosine(alone[i], vectors[i])
            if cos < MIN_COSINE:
                differences.append(f"embedding of {sentence!r} alone vs {how}: cosine {cos:.6f} < {MIN_COSINE}")
    return _judged(differences, 2 * len(SENTENCES), allowed)


def speech_invariance(http: MediaHttp, model: str, allowed: float = 0.0) -> Divergence:
    """The shortest clip's transcript alone vs each of 4 sent at once: 4 comparisons."""
    w, clip = SpeechWorkload({}), min(data.speech_clips(), key=lambda c: c.seconds)
    alone = _ok(w.transcribe(http, model, clip), "the clip alone").get("text", "")
    together = [_ok(a, "the clip among 4 in flight").get("text", "")
                for a in _at_once(lambda _: w.transcribe(http, model, clip), range(4), workers=4)]
    differences = [f"transcript alone {alone!r} vs with 4 in flight {t!r}" for t in together if t != alone]
    return _judged(differences, len(together), allowed)


def cnn_invariance(http: MediaHttp, model: str, allowed: float = 0.0) -> Divergence:
    """Each photo's top-5 classes alone vs all photos at once: one comparison per photo."""
    w = CnnWorkload({})
    photos = w.photos

    def classes(answer: Answer, what: str) -> list:
        labels = _ok(answer, what).get("image_data", [])
        return [label.get("label", label) if isinstance(label, dict) else label for label in labels]

    alone = [classes(w.classify(http, model, p, top_k=5), f"{p.name} alone") for p in photos]
    together = [classes(a, "a photo among others in flight")
                for a in _at_once(lambda p: w.classify(http, model, p, top_k=5), photos)]
    differences = [f"top-5 classes of {photo.name} alone {a} vs with others in flight {b}"
                   for photo, a, b in zip(photos, alone, together) if a != b]
    return _judged(differences, len(photos), allowed)


Check = Callable[..., Divergence]
#: kind -> (case name, markers, check(http, model, allowed)) of the invariance cases.
INVARIANCE_CASES: dict[str, tuple[tuple[str, tuple[str, ...], Check], ...]] = {
    "embedding": (("embedding/batch_invariance", ("param", "invariance"), embedding_invariance),),
    "speech": (("speech/batch_invariance", ("param", "invariance"), speech_invariance),),
    "cnn": (("cnn/batch_invariance", ("param", "invariance"), cnn_invariance),),
}
