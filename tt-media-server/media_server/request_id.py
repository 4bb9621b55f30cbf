"""Request IDs: ``X-Request-ID`` accepted (or generated), echoed, and stamped on every log line.

Why: a slow or failed request seen by a client must be findable in the server log. The client's
``X-Request-ID`` is kept when it is a sane token (1-128 characters of ``A-Za-z0-9._:-``); any other
value, or none, gets a generated ``req-<hex>``. The id is

- echoed as the ``X-Request-ID`` header of every response (errors, 413s from the body limit and
  server-sent event streams included: the header goes out with the status line);
- in every error body (``{"error": {..., "request_id"}}``, see ``errors.py``);
- logged once per request when it ends (``METHOD /path -> status in N ms``; errors at INFO,
  the rest and the polled probes at DEBUG);
- appended as ``request_id=<id>`` to every log line written while the request is handled (the
  server's own loggers and uvicorn's access line), through a context variable that the asyncio
  tasks of the request inherit;
- carried to the device workers with the work (``Pending.http_request_id``, ``RunBatch`` and
  ``AddRequest``), whose log lines for that work carry it the same way. Work shared by several
  requests (an embeddings micro-batch) carries all their ids, comma-separated
  (``bound_request_ids``): a grep for one id finds every line of the work it waited on.

Pure ASGI (not Starlette's BaseHTTPMiddleware) so streaming responses pass through unbuffered.
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import re
import time
import uuid
from typing import Iterable, Iterator

HEADER = "x-request-id"
PROBE_PATHS = frozenset({"/health", "/tt-liveness", "/ping", "/metrics"})  # polled: their 503s are not news
_VALID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
log = logging.getLogger("media_server.request")


def current_request_id() -> str | None:
    """The id of the request being handled in this task, or None outside a request."""
    return _current.get()


def joined_request_ids(ids: Iterable[str | None]) -> str | None:
    """The distinct ids of ``ids`` (each may itself be a comma-joined list), in order, comma-joined;
    None when there are none."""
    seen = dict.fromkeys(part for value in ids if value for part in value.split(",") if part)
    return ",".join(seen) or None


@contextlib.contextmanager
def bound_request_ids(ids: Iterable[str | None] | str | None) -> Iterator[str | None]:
    """Mark what is logged (and admitted) meanwhile, in this task or thread, with the request id(s) of
    the work at hand: the embeddings batcher's micro-batch of several requests, a worker's batch or step.
    ``ids``: the ids, or a string already joined (``joined_request_ids``) or None."""
    token = _current.set(ids if ids is None or isinstance(ids, str) else joined_request_ids(ids))
    try:
        yield _current.get()
    finally:
        _current.reset(token)


def new_request_id() -> str:
    return f"req-{uuid.uuid4().hex}"


def accept_request_id(value: str | None) -> str:
    """The client's id when it is a sane token, otherwise a generated one."""
    if value and _VALID.fullmatch(value):
        return value
    return new_request_id()


class RequestIdMiddleware:
    """Sets the request's id for its handling, adds the header to the response start message.

    A fault nothing else turned into a response is answered here: 500 with the id in header and
    body (the traceback is logged with the id), instead of a plain-text 500 without it.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        given = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == HEADER.encode()), None)
        request_id = accept_request_id(given)
        token = _current.set(request_id)
        started = False
        status = 0
        began = time.monotonic()

        async def send_with_id(message):
            nonlocal started, status
            if message["type"] == "http.response.start":
                started = True
                status = int(message.get("status", 0))
                headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != HEADER.encode()]
                headers.append((HEADER.encode(), request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:  # noqa: BLE001 - the last place a fault can still get an answer with its id
            log.exception("unhandled fault in %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            body = json.dumps({"error": {"message": "internal server error", "type": "internal_error",
                                         "code": 500, "request_id": request_id}}).encode()
            await send({"type": "http.response.start", "status": 500,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode()),
                                    (HEADER.encode(), request_id.encode())]})
            await send({"type": "http.response.body", "body": body})
            status = 500
        finally:
            # One line per request (errors at INFO, the rest and the probes at DEBUG): id, route, outcome.
            loud = status >= 400 and scope.get("path") not in PROBE_PATHS
            log.log(logging.INFO if loud else logging.DEBUG, "%s %s -> %s in %.1f ms",
                    scope.get("method"), scope.get("path"), status or "no response",
                    (time.monotonic() - began) * 1000)
            _current.reset(token)


class RequestIdLogFilter(logging.Filter):
    """Marks a record logged while a request is handled with that request's id."""

    def filter(self, record: logging.LogRecord) -> bool:
        request_id = _current.get()
        if request_id and not getattr(record, "request_id", None):
            record.request_id = request_id
        return True


class RequestIdFormatter(logging.Formatter):
    """Wraps a handler's formatter: its line, then `` request_id=<id>`` for a marked record.

    Why a wrapper and not a new format string: uvicorn's access formatter reads the record's
    arguments itself, so the id is added after the line is formatted, whatever the formatter.
    A record of several lines (a traceback under it) gets the id on its first line, the one a grep
    for the id should find."""

    def __init__(self, inner: logging.Formatter | None):
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        line = self.inner.format(record)
        request_id = getattr(record, "request_id", None)
        if not request_id:
            return line
        head, newline, rest = line.partition("\n")
        return f"{head} request_id={request_id}{newline}{rest}"


_FILTER = RequestIdLogFilter()


def install_log_filter(logger_names: tuple[str, ...] = ("", "uvicorn", "uvicorn.access", "uvicorn.error")) -> None:
    """Mark and format request ids on the handlers of the root logger and uvicorn's (idempotent)."""
    for name in logger_names:
        for handler in logging.getLogger(name).handlers:
            if _FILTER not in handler.filters:
                handler.addFilter(_FILTER)
            if not isinstance(handler.formatter, RequestIdFormatter):
                handler.setFormatter(RequestIdFormatter(handler.formatter))
