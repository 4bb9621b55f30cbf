"""Read and check a request trace before anything is sent (stdlib only).

Two shapes are accepted, told apart by their content, not their name:

* Mooncake JSONL, one request per line: ``{"timestamp": ms, "input_length": N, "output_length": M,
  "hash_ids": [..]}``; ``hash_ids`` (optional) name the prompt's blocks of ``block_tokens`` tokens,
  and requests that share a leading run of ids share that prompt prefix.
* Plain JSONL or CSV of (timestamp, input tokens, output tokens). JSONL keys: ``timestamp`` (ms)
  or ``timestamp_s``; ``input_length``/``input_tokens``; ``output_length``/``output_tokens``. CSV: a
  header naming the same columns, or three bare numeric columns read as (timestamp ms, input, output).

Why refuse instead of repair: a trace that is unsorted, misses a field or asks for more tokens
than the model's context is not the traffic its author meant; sending it would measure something
else. Every problem names the file and line (``TraceError``, exit 2 in the workflow), and nothing
is sent.
"""
from __future__ import annotations

import csv
import json
import math
import os
import stat
from dataclasses import dataclass, field

MAX_TRACE_ROWS = 1_000_000
_TS_KEYS = (("timestamp", 1e-3), ("timestamp_ms", 1e-3), ("timestamp_s", 1.0))
_IN_KEYS = ("input_length", "input_tokens", "isl")
_OUT_KEYS = ("output_length", "output_tokens", "osl")


class TraceError(ValueError):
    """A trace that cannot be replayed as written; the message names file and line."""


@dataclass
class TraceRequest:
    """One row of the trace: when it leaves (s after the first row) and how many tokens in and out."""

    line: int
    at_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: list[int] = field(default_factory=list)


@dataclass
class Trace:
    path: str
    shape: str                       # mooncake | jsonl | csv
    requests: list[TraceRequest]

    @property
    def span_s(self) -> float:
        return self.requests[-1].at_s if self.requests else 0.0

    @property
    def name(self) -> str:
        base = os.path.basename(self.path)
        return base.rsplit(".", 1)[0] if "." in base else base


def _positive_int(where: str, key: str, value, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TraceError(f"{where}: {key}={value!r} is not a whole number")
    try:
        number = float(value)
    except ValueError:
        raise TraceError(f"{where}: {key}={value!r} is not a whole number") from None
    if not math.isfinite(number) or number != int(number) or number < minimum:
        raise TraceError(f"{where}: {key}={value!r} must be a whole number >= {minimum}")
    return int(number)


def _timestamp(where: str, row: dict) -> float:
    for key, scale in _TS_KEYS:
        if key in row and row[key] not in (None, ""):
            try:
                value = float(row[key])
            except (TypeError, ValueError):
                raise TraceError(f"{where}: {key}={row[key]!r} is not a number") from None
            if not math.isfinite(value) or value < 0:
                raise TraceError(f"{where}: {key}={row[key]!r} must be a finite number >= 0")
            return value * scale
    raise TraceError(f"{where}: missing field 'timestamp' (ms; or timestamp_s)")


def _first(where: str, row: dict, keys: tuple[str, ...], minimum: int) -> int:
    for key in keys:
        if key in row and row[key] not in (None, ""):
            return _positive_int(where, key, row[key], minimum=minimum)
    raise TraceError(f"{where}: missing field {keys[0]!r}")


def _row(where: str, line: int, row: dict) -> TraceRequest:
    hash_ids = row.get("hash_ids") or []
    if not isinstance(hash_ids, list) or any(isinstance(h, bool) or not isinstance(h, int) for h in hash_ids):
        raise TraceError(f"{where}: hash_ids must be a list of integers")
    return TraceRequest(line=line, at_s=_timestamp(where, row), input_tokens=_first(where, row, _IN_KEYS, 1),
                        output_tokens=_first(where, row, _OUT_KEYS, 1), hash_ids=list(hash_ids))


def _read_jsonl(path: str, lines: list[str]) -> tuple[str, list[TraceRequest]]:
    out, mooncake = [], False
    for lineno, text in enumerate(lines, 1):
        if not text.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            row = json.loads(text)
        except ValueError as exc:
            raise TraceError(f"{where}: not JSON ({exc})") from None
        if not isinstance(row, dict):
            raise TraceError(f"{where}: expected a JSON object per line")
        mooncake = mooncake or "hash_ids" in row
        out.append(_row(where, lineno, row))
    return ("mooncake" if mooncake else "jsonl"), out


def _read_csv(path: str, lines: list[str]) -> list[TraceRequest]:
    rows = list(csv.reader(lines))
    if not rows:
        return []
    header = [h.strip().lower() for h in rows[0]]
    known = {k for k, _ in _TS_KEYS} | set(_IN_KEYS) | set(_OUT_KEYS)
    named = any(h in known for h in header)
    if not named:
        header = ["timestamp", "input_length", "output_length"]
    out = []
    for lineno, cells in enumerate(rows[1:] if named else rows, 2 if named else 1):
        if not any(c.strip() for c in cells):
            continue
        where = f"{path}:{lineno}"
        if len(cells) < len(header) and not named:
            raise TraceError(f"{where}: expected 3 columns (timestamp ms, input tokens, output tokens), "
                             f"got {len(cells)}")
        out.append(_row(where, lineno, {h: c.strip() for h, c in zip(header, cells)}))
    return out


#: The largest trace file read: 1M requests (the reader's row limit) of Mooncake lines with long hash_ids
#: lists fit; the reader holds the whole file in memory, so a bigger one is refused before it is opened.
MAX_TRACE_BYTES = 256 * 1024 * 1024


def trace_file_problem(path: str) -> str | None:
    """Why ``path`` cannot be a trace to replay, or None. Only a regular file of bounded size is read:
    /dev/zero or a FIFO would be read forever (the run hangs before any server starts), a huge file
    would fill the memory. ``os.stat`` follows links and never blocks, not even on a FIFO."""
    try:
        info = os.stat(path)
    except OSError as exc:
        return f"cannot read the trace ({exc.strerror or exc})"
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a device, pipe or socket"
        return f"is {kind}, not a regular file; give a JSONL or CSV trace file"
    if info.st_size > MAX_TRACE_BYTES:
        return (f"is {info.st_size / 2**20:.0f} MiB; at most {MAX_TRACE_BYTES // 2**20} MiB is read "
                f"(split the trace)")
    return None


def read_trace(path: str, *, max_context: int | None = None, time_scale: float = 1.0) -> Trace:
    """The checked trace: times relative to its first row, divided by ``time_scale`` (2 = twice as fast).

    Raises ``TraceError`` naming the file and line of the first problem: unreadable, not JSON/CSV,
    a missing or non-numeric field, timestamps that go backwards, or input + output tokens over
    ``max_context``; or, before opening it, a path that is not a regular file of at most
    ``MAX_TRACE_BYTES`` (``trace_file_problem``)."""
    problem = trace_file_problem(path)
    if problem:
        raise TraceError(f"{path} {problem}")
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: cannot read the trace ({exc})") from None
    first = next((t.strip() for t in lines if t.strip()), "")
    if first.startswith("{"):
        shape, reqs = _read_jsonl(path, lines)
    else:
        shape, reqs = "csv", _read_csv(path, lines)
    if not reqs:
        raise TraceError(f"{path}: the trace has no requests")
    if len(reqs) > MAX_TRACE_ROWS:
        raise TraceError(f"{path}: {len(reqs)} requests; at most {MAX_TRACE_ROWS} are replayed in one point")
    for prev, cur in zip(reqs, reqs[1:]):
        if cur.at_s < prev.at_s:
            raise TraceError(f"{path}:{cur.line}: timestamp goes backwards ({cur.at_s * 1000:g} ms after "
                             f"{prev.at_s * 1000:g} ms on line {prev.line}); the trace must be sorted by time")
    if max_context:
        for r in reqs:
            if r.input_tokens + r.output_tokens > max_context:
                raise TraceError(f"{path}:{r.line}: input {r.input_tokens} + output {r.output_tokens} tokens "
                                 f"exceed the model's context of {max_context}")
    if not time_scale > 0 or not math.isfinite(time_scale):
        raise TraceError(f"time_scale={time_scale!r} must be a finite number > 0")
    t0 = reqs[0].at_s
    for r in reqs:
        r.at_s = (r.at_s - t0) / time_scale
    return Trace(path=path, shape=shape, requests=reqs)
