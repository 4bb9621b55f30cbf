"""Helpers every route uses: the scheduler, disconnect-aware waiting, input decoding.

``await run_request(request, scheduler.submit(...))`` waits for the result while watching the
connection: a client that disconnects has its request cancelled (dropped from the queue). Routes
that stream use ``scheduler.stream`` inside a StreamingResponse, which stops iterating (and so
cancels) on disconnect by itself.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
from typing import Any, Awaitable

from fastapi import Request

from media_server.errors import BadInput, MediaError, PayloadTooLarge
from media_server.scheduler import Scheduler


class ClientGone(MediaError):
    """The client disconnected; nobody reads this response."""

    status, type = 499, "client_closed_request"


def scheduler_of(request: Request) -> Scheduler:
    return request.app.state.scheduler


async def run_request(request: Request, work: Awaitable[Any]) -> Any:
    """Await `work`, cancelling it when the client disconnects first."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_wait_disconnect(request))
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        watcher.cancel()
        raise
    if task in done:
        watcher.cancel()
        return task.result()
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, MediaError):
        pass
    raise ClientGone("client disconnected; request cancelled")


async def _wait_disconnect(request: Request) -> None:
    """Returns when the ASGI server reports http.disconnect (the body is already read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def decode_base64(field: str, text: str) -> bytes:
    """Base64 (optionally a data: URL) -> bytes; BadInput naming the field otherwise."""
    if not isinstance(text, str) or not text:
        raise BadInput(f"{field}: expected a non-empty base64 string")
    if text.startswith("data:"):
        _, _, text = text.partition(",")
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise BadInput(f"{field}: not valid base64") from None


def check_text_chars(request: Request, field: str, texts: list[str]) -> None:
    """413 naming the field when a text is longer than MAX_TEXT_CHARS (0: no limit of its own;
    MAX_PAYLOAD_BYTES still bounds the body). A guard against one request holding a worker with
    a huge input, as in the small-model server."""
    limit = request.app.state.settings.max_text_chars
    if not limit:
        return
    for index, text in enumerate(texts):
        if len(text) > limit:
            where = field if len(texts) == 1 else f"{field}[{index}]"
            raise PayloadTooLarge(f"{where}: {len(text)} characters is over MAX_TEXT_CHARS={limit}")


def one_of(field: str, value: Any, alias: str, alias_value: Any) -> Any:
    """The value of a field that has a second name (TEI's ``texts`` for ``documents``, llama.cpp's
    ``input`` for ``content``); BadInput naming both when neither or both are given."""
    if (value is None) == (alias_value is None):
        raise BadInput(f"{field}: give {field} (or {alias}), exactly one of the two")
    return value if value is not None else alias_value
