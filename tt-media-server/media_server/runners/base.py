"""The runner protocol: what a model runner implements so the scheduler can serve it.

A runner lives inside one worker process (``workers.py``), bound to one device group. The main
process never calls it directly: it sends messages carrying a request id and gets messages back
carrying the same id; the scheduler routes each to the waiting request (``scheduler.py``).
Payloads and results cross a process boundary, so they must be picklable plain data (dicts,
lists, bytes, numbers, strings, numpy arrays) — never open files, PIL images or tensors.

Two shapes of runner exist, chosen by the class attribute ``streaming``:

Batch runners (``streaming = False``; images, CNN, embeddings, Whisper chunks)
    The worker takes up to ``MAX_BATCH_SIZE`` queued requests (greedy, within
    ``MAX_BATCH_DELAY_TIME_MS``) and calls ``run_batch(payloads)`` once; it must return one
    result per payload, in order. A result may be an ``ItemError`` to fail only that item
    (e.g. an undecodable input: ``ItemError(400, "...")``); an exception fails the whole batch
    with 500. Batch runners may override ``max_batch_size()`` to cap the batch below the setting.
    An API route calls ``await scheduler.submit(model, payload)`` and gets the result.

Streaming runners (``streaming = True``; Whisper segments, text tokens)
    The worker keeps a continuous loop: between two ``step()`` calls it admits new requests
    (``add(request_id, payload)``, up to ``capacity()`` at once) and applies cancellations
    (``cancel(request_id)``, sent by the main process when a client disconnects or gives up).
    ``step()`` advances every active request by one unit of work and returns the events it
    produced: ``StreamEvent.chunk(rid, data)`` any number of times, then exactly one terminal
    ``StreamEvent.done(rid, data)`` or ``StreamEvent.error(rid, status, message)``; after its
    terminal event a request is forgotten by the runner. ``has_work()`` tells the loop whether
    to call ``step()`` or block waiting for messages. A runner whose requests are independent
    iterators can subclass ``GeneratorStreamingRunner`` and write only ``start(payload)``
    returning an iterator of chunks (its ``return`` value becomes the ``done`` data).
    An API route calls ``scheduler.stream(model, payload)`` — an async iterator of events — and
    must ``aclose()`` it (or leave the ``async for``) when the client disconnects: that sends the
    cancel message. For streaming requests the deadline bounds the gap between two events.

Every runner
    ``name`` (registry key, ``MODEL_RUNNER`` / ``MODELS`` value), ``kind`` (``image``, ``cnn``,
    ``audio``, ``embedding``, ``text`` — routes look models up by kind), ``model_id`` (the name
    ``/v1/models`` shows). ``preflight(settings)`` runs in the main process before any worker
    starts and raises ``RunnerUnavailable`` with ONE clear line when a dependency (the TT stack,
    torchvision, weights) is missing — the server then exits at start-up instead of failing
    per request. ``load()`` runs in the worker: load weights, warm up; ``close()`` frees the
    device. Runners read their knobs from ``self.settings`` (``config.Settings``) and the device
    group from ``self.device``.

Adding a model: one file in ``runners/`` with a subclass, and one line in ``runners/registry.py``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Iterator

from media_server.config import DeviceGroup, Settings


class RunnerUnavailable(RuntimeError):
    """A runner cannot start here (missing stack, package or weights); the message is one line."""


@dataclasses.dataclass(frozen=True)
class ItemError:
    """A failure of one item of a batch, returned in place of its result.

    status: the HTTP status the waiting request gets (400 bad input, 500 runner fault).
    message: what went wrong, shown to the client.
    """

    status: int
    message: str


@dataclasses.dataclass(frozen=True)
class StreamEvent:
    """One event a streaming runner emits for one request.

    request_id: the id the request was added with.
    type: "chunk" (more follows), "done" (last, data is the final summary) or "error".
    data: the chunk or final payload (picklable); for errors a dict {"status", "message"}.
    """

    request_id: str
    type: str
    data: Any = None

    @staticmethod
    def chunk(request_id: str, data: Any) -> "StreamEvent":
        return StreamEvent(request_id, "chunk", data)

    @staticmethod
    def done(request_id: str, data: Any = None) -> "StreamEvent":
        return StreamEvent(request_id, "done", data)

    @staticmethod
    def error(request_id: str, status: int, message: str) -> "StreamEvent":
        return StreamEvent(request_id, "error", {"status": status, "message": message})


class BaseRunner:
    """Common part of every runner: identity, settings, device group, lifecycle."""

    name: ClassVar[str] = ""
    kind: ClassVar[str] = ""
    model_id: ClassVar[str] = ""
    streaming: ClassVar[bool] = False
    # Whether this runner places its model on MODEL_DEVICE (cuda, mps); the others run on the CPU whatever it says,
    # and start-up says so in one line (media_server.app).
    uses_model_device: ClassVar[bool] = False

    def __init__(self, settings: Settings, device: DeviceGroup):
        self.settings = settings
        self.device = device

    @classmethod
    def preflight(cls, settings: Settings) -> None:
        """Raise RunnerUnavailable (one line) when this runner cannot start on this host."""

    @classmethod
    def model_card(cls, model_id: str) -> dict[str, Any]:
        """Extra fields /v1/models shows for this model (e.g. an embedding's dimension)."""
        return {}

    def load(self) -> None:
        """Load weights and warm up; runs in the worker before it reports ready."""

    def close(self) -> None:
        """Release the device; runs in the worker on shutdown."""


class BatchRunner(BaseRunner):
    """A runner that maps a batch of payloads to a batch of results."""

    streaming: ClassVar[bool] = False

    def max_batch_size(self) -> int:
        """The largest batch this runner accepts (the setting caps it further)."""
        return self.settings.max_batch_size

    def run_batch(self, payloads: list[Any]) -> list[Any]:
        """One result (or ItemError) per payload, in order."""
        raise NotImplementedError


class StreamingRunner(BaseRunner):
    """A runner with a continuous step loop over several active requests."""

    streaming: ClassVar[bool] = True

    def capacity(self) -> int:
        """How many requests may be active at once (user slots)."""
        return max(1, self.settings.max_batch_size)

    def add(self, request_id: str, payload: Any) -> None:
        raise NotImplementedError

    def cancel(self, request_id: str) -> None:
        raise NotImplementedError

    def has_work(self) -> bool:
        raise NotImplementedError

    def step(self) -> list[StreamEvent]:
        raise NotImplementedError


class GeneratorStreamingRunner(StreamingRunner):
    """A streaming runner whose requests are independent iterators of chunks.

    Subclasses write ``start(payload) -> Iterator``; each ``step()`` advances every active
    iterator by one item. A ``return value`` in the generator becomes the ``done`` data;
    ``ItemError`` raised as an exception (``raise StreamItemError(400, "...")``) becomes an
    ``error`` event; any other exception an ``error`` event with status 500.
    """

    def __init__(self, settings: Settings, device: DeviceGroup):
        super().__init__(settings, device)
        self._active: dict[str, Iterator[Any]] = {}

    def start(self, payload: Any) -> Iterator[Any]:
        raise NotImplementedError

    def add(self, request_id: str, payload: Any) -> None:
        self._active[request_id] = self.start(payload)

    def cancel(self, request_id: str) -> None:
        iterator = self._active.pop(request_id, None)
        close = getattr(iterator, "close", None)
        if close is not None:
            close()

    def has_work(self) -> bool:
        return bool(self._active)

    def step(self) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for request_id, iterator in list(self._active.items()):
            try:
                events.append(StreamEvent.chunk(request_id, next(iterator)))
            except StopIteration as stop:
                del self._active[request_id]
                events.append(StreamEvent.done(request_id, stop.value))
            except StreamItemError as exc:
                del self._active[request_id]
                events.append(StreamEvent.error(request_id, exc.status, str(exc)))
            except Exception as exc:  # a runner fault fails this request only
                del self._active[request_id]
                events.append(StreamEvent.error(request_id, 500, f"{type(exc).__name__}: {exc}"))
        return events


class StreamItemError(Exception):
    """Raised inside a generator to end one streaming request with a given status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
