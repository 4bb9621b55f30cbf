"""OpenAI-compatible text routes: ``POST /v1/chat/completions`` and ``POST /v1/completions``.

Served by a streaming runner of kind ``text`` (``text-slots``). Streaming answers are SSE
(``data: {...}\\n\\n`` ... ``data: [DONE]``), each token's text sent as soon as the worker
emits it; with ``stream_options.include_usage`` a last chunk with empty ``choices`` carries
``usage``. Non-streaming answers are one JSON body.

What is refused with 400 (and why): ``n`` other than 1 (one slot per request), ``tools`` /
``functions`` / ``tool_choice`` and a ``response_format`` other than text (no constrained
decoding here), ``logprobs`` (not computed). A client that disconnects mid-stream has its
request cancelled: the worker frees its slot before its next decode step.

The request's first event (its first token, or its error) is awaited before the response
starts, so a prompt too long for the context is a real 400, not an error inside a 200 stream.
"""
from __future__ import annotations

import json
import time
import uuid
from typing import Any, AsyncIterator

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse

from media_server.api.common import check_text_chars, run_request, scheduler_of
from media_server.auth import require_api_key
from media_server.errors import BadInput, MediaError
from media_server.runners.text_params import InvalidTextRequest, TextRequest

router = APIRouter()
KIND = "text"
_REJECTED_FIELDS = {
    "tools": "tool calling is not supported by this server",
    "functions": "function calling is not supported by this server",
    "tool_choice": "tool calling is not supported by this server",
    "logprobs": "logprobs are not supported by this server",
    "top_logprobs": "logprobs are not supported by this server",
    "best_of": "best_of is not supported (n=1 only)",
}


@router.post("/v1/chat/completions", tags=["text"], dependencies=[Depends(require_api_key)])
async def chat_completions(request: Request):
    """Chat completion over the served text model; SSE when ``stream`` is true."""
    body = await _json_body(request)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadInput("messages: expected a non-empty list of {role, content}")
    messages = [_flatten_message(i, m) for i, m in enumerate(messages)]
    check_text_chars(request, "messages", ["".join(str(m.get("content", "")) for m in messages)])
    text_request = _text_request(body, TextRequest(messages=messages))
    return await _respond(request, body, text_request, chat=True)


@router.post("/v1/completions", tags=["text"], dependencies=[Depends(require_api_key)])
async def completions(request: Request):
    """Text completion over the served text model; SSE when ``stream`` is true."""
    body = await _json_body(request)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str) or not prompt:
        raise BadInput("prompt: expected a non-empty string (one prompt per request)")
    if body.get("echo"):
        raise BadInput("echo: not supported by this server")
    check_text_chars(request, "prompt", [prompt])
    text_request = _text_request(body, TextRequest(prompt=prompt))
    return await _respond(request, body, text_request, chat=False)


# ---- request parsing ---------------------------------------------------------------------------
async def _json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadInput(f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadInput("request body must be a JSON object")
    return body


def _flatten_message(index: int, message: Any) -> dict[str, str]:
    """{"role", "content"} with text content; a list of text parts is joined."""
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise BadInput(f"messages[{index}]: expected an object with a string 'role'")
    content = message.get("content", "")
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise BadInput(f"messages[{index}].content: only text parts are supported")
            parts.append(str(part.get("text", "")))
        content = "".join(parts)
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise BadInput(f"messages[{index}].content: expected a string or a list of text parts")
    return {"role": message["role"], "content": content}


def _text_request(body: dict[str, Any], base: TextRequest) -> TextRequest:
    for field, reason in _REJECTED_FIELDS.items():
        if body.get(field) not in (None, False, [], 0):
            raise BadInput(f"{field}: {reason}")
    response_format = body.get("response_format")
    if response_format not in (None, {}) and not (
            isinstance(response_format, dict) and response_format.get("type") == "text"):
        raise BadInput("response_format: only {'type': 'text'} is supported by this server "
                       "(no JSON or schema-constrained output)")
    n = body.get("n", 1)
    if n != 1:
        raise BadInput(f"n: only n=1 is supported, got {n!r}")
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    elif stop is None:
        stop = []
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    temperature = body.get("temperature", 1.0)
    top_p = body.get("top_p", 1.0)
    base.max_tokens = max_tokens
    base.stop = stop
    base.temperature = 1.0 if temperature is None else temperature
    base.top_p = 1.0 if top_p is None else top_p
    base.top_k = body.get("top_k") or None
    if base.top_k == -1:
        base.top_k = None
    base.seed = body.get("seed")
    base.ignore_eos = bool(body.get("ignore_eos", False))
    base.min_tokens = body.get("min_tokens") or 0
    try:
        return base.validate(cap_max_tokens=False)
    except InvalidTextRequest as exc:
        raise BadInput(str(exc)) from None


# ---- responses -----------------------------------------------------------------------------------
async def _respond(request: Request, body: dict[str, Any], text_request: TextRequest, chat: bool):
    scheduler = scheduler_of(request)
    model = body.get("model") or None
    pool = scheduler.pool(model, KIND)
    served = pool.model_id
    stream = bool(body.get("stream", False))
    events = scheduler.stream(served, KIND, text_request.to_dict(), merge=merge_text_chunks)
    if not stream:
        return JSONResponse(await run_request(request, _collect(events, served, chat)))
    include_usage = bool((body.get("stream_options") or {}).get("include_usage", False))
    first = await run_request(request, _first_event(events))
    return StreamingResponse(_sse(events, first, served, chat, include_usage),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def merge_text_chunks(data: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """Two queued text chunks of one request as one (a lagging reader sends them in one write)."""
    return {"text": data["text"] + later["text"], "tokens": data.get("tokens", 1) + later.get("tokens", 1)}


async def _first_event(events: AsyncIterator) -> Any:
    try:
        return await events.__anext__()
    except BaseException:
        await events.aclose()
        raise


async def _collect(events: AsyncIterator, model: str, chat: bool) -> dict[str, Any]:
    parts: list[str] = []
    summary: dict[str, Any] = {}
    try:
        async for event in events:
            if event.type == "chunk":
                parts.append(event.data["text"])
            else:
                summary = event.data or {}
    finally:
        await events.aclose()
    text = "".join(parts) + summary.get("text", "")
    finish = summary.get("finish_reason", "stop")
    usage = _usage(summary)
    created = int(time.time())
    if chat:
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": created,
                "model": model, "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                             "finish_reason": finish, "logprobs": None}],
                "usage": usage}
    return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": created,
            "model": model, "choices": [{"index": 0, "text": text, "finish_reason": finish,
                                         "logprobs": None}],
            "usage": usage}


def _usage(summary: dict[str, Any]) -> dict[str, int]:
    prompt = int(summary.get("prompt_tokens", 0))
    completion = int(summary.get("completion_tokens", 0))
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


class _SseFormat:
    """Pre-rendered JSON around each delta, so a token costs one json.dumps of its text."""

    def __init__(self, model: str, chat: bool):
        created = int(time.time())
        if chat:
            head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk",
                    "created": created, "model": model}
        else:
            head = {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion",
                    "created": created, "model": model}
        self.chat = chat
        self.head = head
        prefix = json.dumps(head)[:-1]
        if chat:
            self._open = (f'data: {prefix}, "choices": [{{"index": 0, "delta": {{"content": ').encode()
            self._close = b'}, "logprobs": null, "finish_reason": null}]}\n\n'
        else:
            self._open = f'data: {prefix}, "choices": [{{"index": 0, "text": '.encode()
            self._close = b', "logprobs": null, "finish_reason": null}]}\n\n'

    def delta(self, text: str) -> bytes:
        return self._open + json.dumps(text).encode() + self._close

    def role(self) -> bytes:
        return self._event({"index": 0, "delta": {"role": "assistant", "content": ""},
                            "logprobs": None, "finish_reason": None})

    def finish(self, reason: str) -> bytes:
        choice = ({"index": 0, "delta": {}, "logprobs": None, "finish_reason": reason} if self.chat
                  else {"index": 0, "text": "", "logprobs": None, "finish_reason": reason})
        return self._event(choice)

    def usage(self, usage: dict[str, int]) -> bytes:
        return b"data: " + json.dumps({**self.head, "choices": [], "usage": usage}).encode() + b"\n\n"

    def _event(self, choice: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps({**self.head, "choices": [choice]}).encode() + b"\n\n"


def _error_chunk(exc: MediaError) -> bytes:
    return b"data: " + json.dumps({"error": exc.body()}).encode() + b"\n\n"


async def _sse(events: AsyncIterator, first: Any, model: str, chat: bool,
               include_usage: bool) -> AsyncIterator[bytes]:
    fmt = _SseFormat(model, chat)
    summary: dict[str, Any] = {}
    try:
        if chat:
            yield fmt.role()
        event = first
        while True:
            if event.type == "chunk":
                yield fmt.delta(event.data["text"])
            else:
                summary = event.data or {}
                break
            event = await events.__anext__()
        if summary.get("text"):
            yield fmt.delta(summary["text"])
        yield fmt.finish(summary.get("finish_reason", "stop"))
        if include_usage:
            yield fmt.usage(_usage(summary))
    except MediaError as exc:  # the stream already started: report in-band, then end it
        yield _error_chunk(exc)
    except StopAsyncIteration:
        pass
    finally:
        await events.aclose()
    yield b"data: [DONE]\n\n"
