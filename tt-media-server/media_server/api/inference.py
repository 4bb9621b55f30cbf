"""The legacy streaming inference API: JSON in, raw generated text out over chunked encoding.

``POST /inference`` (or ``/inference/{model}``) with
``{"text", "temperature", "top_k", "top_p", "max_tokens", "stop_sequence"}``; the answer is
``text/plain`` written chunk by chunk (HTTP/1.1 ``Transfer-Encoding: chunked``) as tokens are
generated, with no framing around the text. Ranges: 1 <= max_tokens <= 2048,
1 <= top_k <= 1000, 0.01 <= top_p <= 1, 0 <= temperature <= 10 (the documented 0.1-10; 0 = greedy).
Numbers may come as JSON numbers or as numeric strings (the documented requests send
``"temperature": "1", "max_tokens": "32"``). Malformed JSON or a bad value (a string that is not a
number, a value out of range) is 400 with ``{"status_code": 400, "message": "..."}`` naming the
field (this API's error shape), as are the scheduler's own refusals (429 queue full, 503 not ready).
"""
from __future__ import annotations

from typing import Any, AsyncIterator

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse

from media_server.api.common import run_request, scheduler_of
from media_server.api.legacy_body import parse_legacy
from media_server.api.text import merge_text_chunks
from media_server.auth import require_api_key
from media_server.errors import MediaError
from media_server.runners.text_params import InvalidTextRequest

router = APIRouter()
KIND = "text"


def legacy_error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"status_code": status, "message": message},
                        headers=headers)


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
