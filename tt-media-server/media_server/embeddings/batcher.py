"""Micro-batching of embedding requests, with duplicates removed inside and across batches.

Why in the server process, before the scheduler: batching pays off only if texts from many
concurrent requests meet in one model call. Each request's texts are first answered from the LRU;
texts another request is already waiting for join that request's computation (no second forward
pass); the rest wait at most `window_ms` for company, are sorted by length (so a batch pads to
similar lengths) and go to a worker in batches of at most `max_size`, split evenly over the free
worker slots (so two idle workers each get half of a window's texts rather than one getting all of
them while the other waits). While `max_inflight` batches of the model (by default one per ready
worker) are already at the workers, a window that ends keeps collecting until one of them returns
(or `max_size` texts wait): under concurrency the requests answered by one batch come back spread
over the time the API process takes to answer them, longer than the window, and without this hold
the next batches would go out a few texts each, paying the model's per-call cost per few texts while
the worker is busy anyway. With batching off, each request's own distinct texts go out at once,
still sorted and split, still de-duplicated.

Counting rule, per input text: a text answered without its own forward pass (LRU hit, duplicate
inside the request, or joined computation) is a cache hit; a text sent to the model is a miss.
So `misses` equals the number of texts the model encoded, which a test can check.

Request ids: a micro-batch is sent with the X-Request-IDs of every request whose new text it holds
(``request_id.bound_request_ids`` around the scheduler call), so the worker's lines of that batch name
each request that waited on it, not only the one whose window it was.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Awaitable, Callable

from media_server.embeddings.cache import CacheKey, Embedding, EmbeddingCache
from media_server.request_id import bound_request_ids, current_request_id

EncodeBatch = Callable[[str, list[str]], Awaitable[list[Embedding]]]


@dataclass(frozen=True)
class BatchingConfig:
    """ENABLE_BATCHING, BATCH_WINDOW_MS, BATCH_WINDOW_MAX_SIZE and BATCH_MAX_INFLIGHT."""

    enabled: bool = True
    window_ms: float = 5.0
    max_size: int = 32
    max_inflight: int = 0  # batches of one model at the workers before a window's end waits for one back;
    #                        0: one per ready worker of the model

    def __post_init__(self) -> None:
        if self.window_ms < 0:
            raise ValueError(f"BATCH_WINDOW_MS must be >= 0, got {self.window_ms}")
        if self.max_size < 1:
            raise ValueError(f"BATCH_WINDOW_MAX_SIZE must be >= 1, got {self.max_size}")
        if self.max_inflight < 0:
            raise ValueError(f"BATCH_MAX_INFLIGHT must be >= 0 (0: one per ready worker), got {self.max_inflight}")


def length_sorted_batches(texts: list[str], max_size: int, at_least: int = 1) -> list[list[str]]:
    """Texts sorted by length (longest first), cut into contiguous batches of at most `max_size`:
    as few as that allows, but at least `at_least` (the free workers) while there are texts for
    them, with sizes differing by at most one (neighbours in length share a batch: little padding)."""
    ordered = sorted(texts, key=len, reverse=True)
    if not ordered:
        return []
    count = min(len(ordered), max(-(-len(ordered) // max_size), at_least))
    size, extra = divmod(len(ordered), count)
    batches, start = [], 0
    for index in range(count):
        end = start + size + (index < extra)
        batches.append(ordered[start:end])
        start = end
    return batches


class EmbeddingBatcher:
    """Answers `embed(model, texts)` from the cache, shared in-flight work, or new micro-batches."""

    def __init__(self, encode: EncodeBatch, cache: EmbeddingCache, config: BatchingConfig,
                 ready_workers: Callable[[str], int] = lambda model: 1):
        self._encode = encode
        self._ready_workers = ready_workers  # a model's workers able to take a batch now (its pool's count)
        self.cache = cache
        self.config = config
        self._inflight: dict[CacheKey, asyncio.Future] = {}
        self._pending: dict[str, list[str]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task] = set()
        self._running: dict[str, int] = {}  # batches of a model sent and not yet answered
        self._held: set[str] = set()  # models whose window ended while max_inflight batches ran
        self._requesters: dict[CacheKey, list[str | None]] = {}  # a text not yet sent -> X-Request-IDs waiting
        self.batches_sent = 0
        self.texts_sent = 0

    async def embed(self, model: str, texts: list[str]) -> list[Embedding]:
        """One embedding per input text, in input order (duplicates share one computation)."""
        distinct = list(dict.fromkeys(texts))
        found = self.cache.lookup(model, distinct)
        waiting: dict[str, asyncio.Future] = {}
        new: list[str] = []
        requester = current_request_id()
        for text in distinct:
            if text in found:
                continue
            future = self._inflight.get((model, text))
            if future is None:
                future = asyncio.get_running_loop().create_future()
                future.add_done_callback(_retrieve_exception)
                self._inflight[(model, text)] = future
                new.append(text)
                self._requesters[(model, text)] = [requester]
            elif (model, text) in self._requesters:  # joins a text still waiting for its batch
                self._requesters[(model, text)].append(requester)
            waiting[text] = future
        self.cache.count(model, hits=len(texts) - len(new), misses=len(new))
        if new:
            self._enqueue(model, new)
        if waiting:
            # shield: a request that goes away must not cancel work other requests share.
            results = await asyncio.gather(*(asyncio.shield(future) for future in waiting.values()))
            found.update(zip(waiting.keys(), results))
        return [found[text] for text in texts]

    def _enqueue(self, model: str, texts: list[str]) -> None:
        if not self.config.enabled:
            self._dispatch(model, texts)
            return
        pending = self._pending.setdefault(model, [])
        pending.extend(texts)
        if len(pending) >= self.config.max_size or self.config.window_ms == 0:
            self._flush(model)
        elif model not in self._timers and model not in self._held:
            loop = asyncio.get_running_loop()
            self._timers[model] = loop.call_later(self.config.window_ms / 1000.0, self._window_ended, model)

    def inflight_limit(self, model: str) -> int:
        """Batches of `model` that may be at the workers at once: BATCH_MAX_INFLIGHT, else its ready workers."""
        return self.config.max_inflight or max(1, self._ready_workers(model))

    def _window_ended(self, model: str) -> None:
        self._timers.pop(model, None)
        if self._running.get(model, 0) >= self.inflight_limit(model):
            self._held.add(model)  # flushed when a running batch returns (_run_batch)
        else:
            self._flush(model)

    def _flush(self, model: str) -> None:
        self._held.discard(model)
        timer = self._timers.pop(model, None)
        if timer is not None:
            timer.cancel()
        texts = self._pending.pop(model, [])
        if texts:
            self._dispatch(model, texts)

    def _dispatch(self, model: str, texts: list[str]) -> None:
        free = self.inflight_limit(model) - self._running.get(model, 0)
        for batch in length_sorted_batches(texts, self.config.max_size, at_least=max(1, free)):
            task = asyncio.get_running_loop().create_task(self._run_batch(model, batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run_batch(self, model: str, batch: list[str]) -> None:
        self.batches_sent += 1
        self.texts_sent += len(batch)
        self._running[model] = self._running.get(model, 0) + 1
        requesters = [rid for text in batch for rid in self._requesters.pop((model, text), ())]
        try:
            with bound_request_ids(requesters):
                embeddings = await self._encode(model, batch)
            if len(embeddings) != len(batch):
                raise RuntimeError(f"the runner returned {len(embeddings)} embeddings for {len(batch)} texts")
        except BaseException as error:  # every waiter must hear about it, even on cancellation
            for text in batch:
                future = self._inflight.pop((model, text), None)
                if future is not None and not future.done():
                    future.set_exception(error if isinstance(error, Exception) else RuntimeError(str(error)))
            if not isinstance(error, Exception):
                raise
            return
        finally:
            self._running[model] -= 1
            if model in self._held:
                self._flush(model)
        for text, embedding in zip(batch, embeddings):
            self.cache.store(model, text, embedding)
            future = self._inflight.pop((model, text), None)
            if future is not None and not future.done():
                future.set_result(embedding)

    async def close(self) -> None:
        """Cancel pending windows and running batches (server shutdown)."""
        for model in list(self._timers):
            self._timers.pop(model).cancel()
        self._held.clear()
        for model, texts in list(self._pending.items()):
            for text in texts:
                future = self._inflight.pop((model, text), None)
                if future is not None and not future.done():
                    future.set_exception(RuntimeError("the server is shutting down"))
        self._pending.clear()
        self._requesters.clear()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


def _retrieve_exception(future: asyncio.Future) -> None:
    """Mark a failed shared future's exception as seen (its waiters may all have gone away)."""
    if not future.cancelled():
        future.exception()
