"""In-memory LRU of embeddings keyed by (model, text).

Why: embedding traffic repeats itself (the same queries, the same documents re-indexed). A hit
skips the queue, the batch window and the model, and returns the very vector computed the first
time, so a cached answer is identical to the computed one. Hits and misses (decided by the
batcher, which also knows about texts already being computed) are counted through
callbacks so the server can export them as Prometheus counters without this module importing
prometheus_client (it stays importable and testable with the stdlib and numpy alone).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Embedding:
    """One text's vector (float32, as the model produced it) and its token count."""

    vector: np.ndarray
    tokens: int


CacheKey = tuple[str, str]


class EmbeddingCache:
    """A bounded LRU; capacity 0 disables it (every lookup is a miss, nothing is stored)."""

    def __init__(self, capacity: int, on_hit: Callable[[str, int], None] | None = None,
                 on_miss: Callable[[str, int], None] | None = None):
        if capacity < 0:
            raise ValueError(f"EMBEDDING_CACHE_SIZE must be >= 0, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[CacheKey, Embedding] = OrderedDict()
        self._on_hit = on_hit or (lambda model, count: None)
        self._on_miss = on_miss or (lambda model, count: None)
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, model: str, texts: list[str]) -> dict[str, Embedding]:
        """The cached embeddings among `texts`, refreshed as most recently used (nothing counted)."""
        found: dict[str, Embedding] = {}
        for text in texts:
            entry = self._entries.get((model, text))
            if entry is not None:
                self._entries.move_to_end((model, text))
                found[text] = entry
        return found

    def count(self, model: str, hits: int, misses: int) -> None:
        """Record texts answered without a forward pass (hits) and texts sent to the model (misses)."""
        self.hits += hits
        self.misses += misses
        if hits:
            self._on_hit(model, hits)
        if misses:
            self._on_miss(model, misses)

    def store(self, model: str, text: str, embedding: Embedding) -> None:
        if self.capacity == 0:
            return
        key = (model, text)
        self._entries[key] = embedding
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
