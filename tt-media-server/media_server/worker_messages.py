"""The messages a device worker and the server exchange over the worker's pipe, one class each.

Why typed: the pipe used to carry tuples whose meaning sat in their position ("results" at [1],
seconds at [2]); a field name says what it is on both sides, and a message of an unknown class
is a bug the receiver can name. Each class is a small frozen dataclass with ``__slots__``: it
pickles about as cheaply as the tuple it replaces (the scheduler's per-request overhead is
measured by benchmarks/scheduler_overhead.py).

Server -> worker:
    RunBatch      batch runners: run these (request_id, payload) pairs together (with their X-Request-IDs)
    AddRequest    streaming runners: admit one request (with its X-Request-ID)
    CancelRequest streaming runners: drop it (its client went away)
    Stop          close the runner and exit
Worker -> server:
    Ready         loaded and warm, with the worker's capacity and largest batch
    LoadFailed    could not load (one line; the process then exits)
    BatchResults  one result (or ItemError) per request of a RunBatch, and the batch's seconds
    StreamEvents  streaming: (request_id, type, data) events of one or more steps
"""
from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True, slots=True)
class RunBatch:
    """items: (request_id, payload) pairs the runner's run_batch takes in one call; http_request_ids:
    the X-Request-ID behind each item (comma-joined when several requests share it; None outside a
    request), for the worker's log lines of this batch. Why apart from request_id: that one routes the
    answer and must be unique in the server, which a client's X-Request-ID need not be."""

    items: list[tuple[str, Any]]
    http_request_ids: tuple[str | None, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class AddRequest:
    """request_id: the id its events carry; payload: the runner input; http_request_id: its X-Request-ID,
    for the worker's log lines of this request (see RunBatch)."""

    request_id: str
    payload: Any
    http_request_id: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class CancelRequest:
    """request_id: the streaming request to drop."""

    request_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class Stop:
    """Close the runner and exit (also what the worker tells itself when the pipe closes)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Ready:
    """pid: the worker process; capacity: requests it runs at once (streaming slots, 1 for batch
    runners); max_batch: most requests in one RunBatch (1 for streaming runners)."""

    pid: int
    capacity: int
    max_batch: int


@dataclasses.dataclass(frozen=True, slots=True)
class LoadFailed:
    """reason: one line naming what is missing or broken."""

    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class BatchResults:
    """results: (request_id, result or ItemError) in batch order; seconds: run_batch wall time;
    batch_size: how many requests the batch held."""

    results: list[tuple[str, Any]]
    seconds: float
    batch_size: int


@dataclasses.dataclass(frozen=True, slots=True)
class StreamEvents:
    """events: (request_id, "chunk" | "done" | "error", data) in order; seconds: the last step's
    wall time (0 when the events came from admission, not a step)."""

    events: list[tuple[str, str, Any]]
    seconds: float


ToWorker = RunBatch | AddRequest | CancelRequest | Stop
FromWorker = Ready | LoadFailed | BatchResults | StreamEvents
