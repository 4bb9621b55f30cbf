"""The legacy streaming inference API: JSON in, raw generated text out over chunked encoding.

``POST /inference`` (or ``/inference/{model}``) with
``{"text", "temperature", "top_k", "top_p", "max_tokens", "stop_sequence"}``; the answer is
``text/plain`` written chunk by chunk (HTTP/1.1 ``Transfer-Encoding: chunked``) as tokens are
generated, with no framing around the text. Ranges: 1 <= max_tokens <= 2048,
1 <= top_k <= 1000, 0.01 <= top_p <= 1, 0 <= temperature <= 2 (0 = greedy). Malformed JSON or a
bad value is 400 with ``{"status_code": 400, "message": "..."}`` (this API's error shape),
as are the scheduler's own refusals (429 queue full, 503 not ready) in the same shape.
"""
from __future__ import annotations

import json
from typing import Any, AsyncIterator

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse

from media_server.api.common import run_request, scheduler_of
from media_server.api.text import merge_text_chunks
from media_server.auth import require_api_key
from media_server.errors import MediaError
from media_server.runners.text_params import InvalidTextRequest, TextRequest

router = APIRouter()
KIND = "text"
DEFAULTS = {"temperature": 1.0, "top_k": 20, "top_p": 0.9, "max_tokens": 128}
FIELDS = ("text", "temperature", "top_k", "top_p", "max_tokens", "stop_sequence")


def legacy_error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"status_code": status, "message": message},
                        headers=headers)


def parse_legacy(raw: bytes) -> TextRequest:
    """The request record for a legacy body; InvalidTextRequest names the bad field."""
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidTextRequest(f"malformed JSON: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidTextRequest("the body must be a JSON object")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise InvalidTextRequest(f"unknown field(s): {', '.join(unknown)}; expected "
                                 + ", ".join(FIELDS))
    text = body.get("text")
    if not isinstance(text, str) or not text:
        raise InvalidTextRequest("text: expected a non-empty string")
    values = {key: body.get(key, default) for key, default in DEFAULTS.items()}
    for key, value in values.items():
        if value is None:
            raise InvalidTextRequest(f"{key}: must not be null")
    stop = body.get("stop_sequence")
    if stop is None or stop == "":
        stops = []
    elif isinstance(stop, str):
        stops = [stop]
    elif isinstance(stop, list):
        stops = stop
    else:
        raise InvalidTextRequest("stop_sequence: expected a string or a list of strings")
    request = TextRequest(prompt=text, max_tokens=values["max_tokens"], stop=stops,
                          temperature=values["temperature"], top_k=values["top_k"],
                          top_p=values["top_p"])
    if isinstance(request.top_k, int) and not isinstance(request.top_k, bool) and request.top_k < 1:
        raise InvalidTextRequest(f"top_k: {request.top_k} is out of range [1, 1000]")
    return request.validate()


async def _inference(request: Request, model: str | None):
    try:
        text_request = parse_legacy(await request.body())
    except InvalidTextRequest as exc:
        return legacy_error(400, str(exc))
    scheduler = scheduler_of(request)
    try:
        pool = scheduler.pool(model, KIND)
        events = scheduler.stream(pool.model_id, KIND, text_request.to_dict(), merge=merge_text_chunks)
        first = await run_request(request, _first(events))
    except MediaError as exc:
        headers = {"Retry-After": str(max(1, int(exc.retry_after)))} if exc.retry_after else None
        return legacy_error(exc.status, exc.message, headers)
    return StreamingResponse(_raw_text(events, first), media_type="text/plain; charset=utf-8",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


@router.post("/inference", tags=["text"], dependencies=[Depends(require_api_key)])
async def inference(request: Request):
    """Generate from ``text``; the response body is the generated text, streamed."""
    return await _inference(request, None)


@router.post("/inference/{model}", tags=["text"], dependencies=[Depends(require_api_key)])
async def inference_model(model: str, request: Request):
    """Same as ``/inference`` for a named model."""
    return await _inference(request, model)


async def _first(events: AsyncIterator) -> Any:
    try:
        return await events.__anext__()
    except BaseException:
        await events.aclose()
        raise


async def _raw_text(events: AsyncIterator, first: Any) -> AsyncIterator[bytes]:
    try:
        event = first
        while event.type == "chunk":
            yield event.data["text"].encode("utf-8")
            event = await events.__anext__()
        tail = (event.data or {}).get("text")
        if tail:
            yield tail.encode("utf-8")
    except (MediaError, StopAsyncIteration):
        pass  # the status line is sent; the stream just ends (the client sees a short body)
    finally:
        await events.aclose()
