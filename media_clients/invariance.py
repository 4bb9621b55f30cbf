"""Correctness under load for media kinds: an answer must not depend on what else is in flight.

A media server batches requests (the scheduler's batch window, micro-batched embeddings, several
workers): a request's answer must be the one it gets alone. Each case sends the same inputs one
at a time, then all at once, and compares:

- embeddings: cosine of every vector alone vs in one batched request and vs 8 concurrent requests
  >= ``MIN_COSINE`` (float sums in another order may move the last bits, never the direction);
- speech: the transcript of the same clip alone and 4 times at once is identical;
- cnn: the top-5 classes of each photo alone and all photos at once are identical, in order.

A case raises AssertionError naming the first input that differs and how.
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

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


def embedding_invariance(http: MediaHttp, model: str) -> None:
    w = EmbeddingWorkload({})
    alone = [_ok(w.embed(http, model, [s]), "one sentence alone")["data"][0]["embedding"] for s in SENTENCES]
    batched = [d["embedding"] for d in _ok(w.embed(http, model, list(SENTENCES)), "all sentences in one request")["data"]]
    concurrent = [_ok(a, "one sentence among 8 in flight")["data"][0]["embedding"]
                  for a in _at_once(lambda s: w.embed(http, model, [s]), SENTENCES)]
    for how, vectors in (("in one batched request", batched), (f"with {IN_FLIGHT} requests in flight", concurrent)):
        worst = min(range(len(SENTENCES)), key=lambda i: _cosine(alone[i], vectors[i]))
        cos = _cosine(alone[worst], vectors[worst])
        if cos < MIN_COSINE:
            raise AssertionError(f"embedding of {SENTENCES[worst]!r} alone vs {how}: cosine {cos:.6f} < {MIN_COSINE}")


def speech_invariance(http: MediaHttp, model: str) -> None:
    w, clip = SpeechWorkload({}), min(data.speech_clips(), key=lambda c: c.seconds)
    alone = _ok(w.transcribe(http, model, clip), "the clip alone").get("text", "")
    together = [_ok(a, "the clip among 4 in flight").get("text", "")
                for a in _at_once(lambda _: w.transcribe(http, model, clip), range(4), workers=4)]
    differ = [t for t in together if t != alone]
    if differ:
        raise AssertionError(f"transcript alone {alone!r} vs with 4 in flight {differ[0]!r}")


def cnn_invariance(http: MediaHttp, model: str) -> None:
    w = CnnWorkload({})
    photos = w.photos

    def classes(answer: Answer, what: str) -> list:
        labels = _ok(answer, what).get("image_data", [])
        return [label.get("label", label) if isinstance(label, dict) else label for label in labels]

    alone = [classes(w.classify(http, model, p, top_k=5), f"{p.name} alone") for p in photos]
    together = [classes(a, "a photo among others in flight")
                for a in _at_once(lambda p: w.classify(http, model, p, top_k=5), photos)]
    for photo, a, b in zip(photos, alone, together):
        if a != b:
            raise AssertionError(f"top-5 classes of {photo.name} alone {a} vs with others in flight {b}")


#: kind -> (case name, markers, check(http, model)) of the invariance cases.
INVARIANCE_CASES: dict[str, tuple[tuple[str, tuple[str, ...], Callable[[MediaHttp, str], None]], ...]] = {
    "embedding": (("embedding/batch_invariance", ("param", "invariance"), embedding_invariance),),
    "speech": (("speech/batch_invariance", ("param", "invariance"), speech_invariance),),
    "cnn": (("cnn/batch_invariance", ("param", "invariance"), cnn_invariance),),
}
