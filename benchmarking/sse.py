"""Turn a finished stream's raw bytes + per-read arrival stamps into a RequestRecord (stdlib only).

The transports do nothing per chunk except stamp the arrival time and keep the bytes, so the
timestamps are not delayed by JSON work on other streams; all parsing happens here, after the
response ended. Content chunks (non-empty ``choices``) are recognised by a byte check and only
parsed when needed (first chunks for TTFT rules, anything unusual, or all of them when the server
sent no usage and the text must be re-tokenized). A content chunk that does not start with
``data:`` or does not end in ``}`` is parsed too, so a broken event (invalid JSON, or a JSON line
that lost its ``data:`` field) is caught as malformed_sse.
"""
from __future__ import annotations

import json

from benchmarking.metrics import RequestRecord

_CONTENT_MARKS = (b'"choices":[{', b'"choices": [{')


def split_events(parts: list[bytes], stamps: list[float]) -> tuple[list[bytes], list[float]]:
    """SSE events (separated by a blank line) and the arrival time of the read that completed each."""
    times: list[float] = []
    prev_nl = False
    for p, t in zip(parts, stamps):
        n = p.count(b"\n\n")
        if prev_nl and p[:1] == b"\n":
            n += 1
        if n:
            times.extend([t] * n)
        prev_nl = p[-1:] == b"\n"
    events = b"".join(parts).split(b"\n\n")
    if len(events) > len(times):  # trailing remainder without terminator (incomplete / empty)
        events = events[:len(times)] if not events[-1].strip() else events
    return events, times


_SSE_FIELDS = (b"data:", b"event:", b"id:", b"retry:", b":")


def _data_of(event: bytes) -> bytes | None:
    """The data payload of one SSE event; None for comments/keep-alives or events without data."""
    if event.startswith(b"data:"):
        return event[5:].strip()
    if not event or event.startswith(b":"):
        return None
    for line in event.split(b"\n"):  # multi-line event (event:/id: fields before data:)
        if line.startswith(b"data:"):
            return line[5:].strip()
    return None


def _is_garbage(event: bytes) -> bool:
    """A non-blank event with a line that is no SSE field (e.g. a JSON chunk that lost its ``data:``)."""
    return any(line.strip() and not line.startswith(_SSE_FIELDS) for line in event.split(b"\n"))


def _choice_text(obj: dict, chat: bool) -> str:
    choice = obj["choices"][0]
    if chat:
        delta = choice.get("delta") or {}
        return (delta.get("content") or "") + (delta.get("reasoning_content") or delta.get("reasoning") or "")
    return choice.get("text") or ""


def _content_mark(events: list[bytes]) -> bytes:
    """The byte pattern of a non-empty choices array in this server's JSON style."""
    for ev in events[:4]:
        if _CONTENT_MARKS[1] in ev:
            return _CONTENT_MARKS[1]
    return _CONTENT_MARKS[0]


def finish_record(rec: RequestRecord, parts: list[bytes], stamps: list[float], *, chat: bool,
                  tokenizer=None, keep_text: bool = False) -> None:
    """Fill TTFT/E2EL/chunk times/token counts/error class of a 200 streaming response."""
    events, times = split_events(parts, stamps)
    t0 = rec.send_time
    mark = _content_mark(events)
    # fast classification in comprehensions: content chunks are recognised, not parsed
    is_c = [mark in ev and ev[-1:] == b"}" and ev[:5] == b"data:" for ev in events[:len(times)]]
    chunk_times = [t - t0 for t, c in zip(times, is_c) if c]
    content_idx = [i for i, c in enumerate(is_c) if c]
    usage = error = malformed = None
    incomplete = len(events) > len(times)
    for i, c in enumerate(is_c):
        if c:
            continue
        data = _data_of(events[i])
        if data is None and _is_garbage(events[i]):
            malformed = events[i][:120]
            continue
        if data is None or data == b"[DONE]":
            continue
        try:
            obj = json.loads(data)
        except ValueError:
            malformed = data[:120]
            continue
        if not isinstance(obj, dict):
            malformed = data[:120]
        elif obj.get("error"):
            error = obj["error"]
        elif obj.get("choices"):  # a content chunk in an unexpected style: count it in order
            content_idx.append(i)
            content_idx.sort()
            chunk_times = [times[j] - t0 for j in content_idx]
        if isinstance(obj, dict) and obj.get("usage"):
            usage = obj["usage"]
    first_nonempty = None
    texts: list[str] = []
    want_all = keep_text or (usage is None and tokenizer is not None)
    for j in content_idx:
        try:
            text = _choice_text(json.loads(_data_of(events[j])), chat)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            malformed = events[j][:120]
            break
        if want_all:
            texts.append(text)
        if first_nonempty is None and text:
            first_nonempty = times[j] - t0
            if not want_all:
                break
    rec.chunk_times = chunk_times
    rec.ttft_nonempty = first_nonempty
    if malformed is not None:
        rec.error_class, rec.error = "malformed_sse", f"unparseable SSE data: {malformed!r}"
    elif error is not None:
        rec.error_class, rec.error = "stream_error", f"error event in stream: {str(error)[:200]}"
    elif not chunk_times:
        rec.error_class, rec.error = "no_content", "stream ended without a chunk with non-empty choices"
    elif incomplete:
        rec.error_class, rec.error = "connection_reset", "stream ended mid-event"
    if rec.error_class:
        rec.success = False
        return
    rec.success = True
    rec.ttft = chunk_times[0]
    rec.latency = chunk_times[-1]
    if usage and usage.get("prompt_tokens") is not None:
        rec.input_tokens, rec.input_token_source = int(usage["prompt_tokens"]), "usage"
    else:
        rec.input_tokens, rec.input_token_source = rec.prompt_len, "dataset"
    if usage and usage.get("completion_tokens") is not None:
        rec.output_tokens, rec.output_token_source = int(usage["completion_tokens"]), "usage"
    elif tokenizer is not None:
        rec.output_tokens = len(tokenizer.encode("".join(texts)))
        rec.output_token_source = "tokenizer"
    else:
        rec.output_tokens, rec.output_token_source = len(chunk_times), "chunks"
    if keep_text:
        rec.generated_text = "".join(texts)
