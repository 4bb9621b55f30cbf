"""OpenAI-compatible text routes: ``POST /v1/chat/completions`` and ``POST /v1/completions``.

Served by a streaming runner of kind ``text`` (``text-slots``). Streaming answers are SSE
(``data: {...}\\n\\n`` ... ``data: [DONE]``), each token's text sent as soon as the worker
emits it; with ``stream_options.include_usage`` a last chunk with empty ``choices`` carries
``usage``. Non-streaming answers are one JSON body.

Requests are pydantic models (malformed JSON, wrong types: 400 naming the field). Chat content
may be a string or a list of ``text`` / ``image_url`` parts; images (``data:`` URLs, or http(s)
URLs fetched under ``vision/images.py``'s rules) go only to a model whose runner takes them, and
their tokens are counted in ``usage.prompt_tokens`` (``prompt_tokens_details.image_tokens``).

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
from typing import Any, AsyncIterator, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from media_server.api.common import check_text_chars, run_request, scheduler_of
from media_server.auth import require_api_key
from media_server.errors import BadInput, MediaError
from media_server.runners.text_params import InvalidTextRequest, TextRequest
from media_server.vision.images import load_image
from media_server.vision.settings import vision_settings

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


class ImageUrl(BaseModel):
    """OpenAI's ``image_url`` object (``detail`` accepted; the model's processor decides the size)."""

    url: str = Field(..., min_length=1, description="data:image/...;base64,... or http(s)://...")
    detail: str | None = None


class ContentPart(BaseModel):
    """One part of a message's content: ``{"type": "text", "text"}`` or ``{"type": "image_url", "image_url"}``."""

    type: Literal["text", "image_url"]
    text: str | None = None
    image_url: ImageUrl | str | None = None


class ChatMessage(BaseModel):
    role: StrictStr
    content: StrictStr | list[ContentPart] | None = None
    name: str | None = None


class StreamOptions(BaseModel):
    include_usage: bool = False


class _Sampling(BaseModel):
    """What both OpenAI routes take. Numbers are strict (a string is a 400, not a quiet conversion);
    ranges are checked by ``TextRequest.validate`` so the routes and the runner agree."""

    model: str | None = Field(None, max_length=200)
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    max_tokens: StrictInt | None = None
    max_completion_tokens: StrictInt | None = None
    stop: StrictStr | list[StrictStr] | None = None
    temperature: StrictFloat | StrictInt | None = None
    top_p: StrictFloat | StrictInt | None = None
    top_k: StrictInt | None = None
    seed: StrictInt | None = None
    ignore_eos: StrictBool = False
    min_tokens: StrictInt | None = None
    n: StrictInt | None = 1
    response_format: dict[str, Any] | None = None
    # Refused with a reason when set (see _REJECTED_FIELDS).
    tools: Any = None
    functions: Any = None
    tool_choice: Any = None
    logprobs: Any = None
    top_logprobs: Any = None
    best_of: Any = None


class ChatRequest(_Sampling):
    messages: list[ChatMessage] = Field(..., min_length=1, description="[{role, content}]; content a string "
                                        "or text / image_url parts")


class CompletionRequest(_Sampling):
    prompt: StrictStr | list[StrictStr] = Field(..., description="one prompt (a one-element list is accepted)")
    echo: Any = None


@router.post("/v1/chat/completions", tags=["text"], dependencies=[Depends(require_api_key)])
async def chat_completions(request: Request, body: ChatRequest):
    """Chat completion over the served text or vision model; SSE when ``stream`` is true."""
    pool = scheduler_of(request).pool(body.model, KIND)
    messages, parts, image_urls = _split_messages(body.messages)
    check_text_chars(request, "messages", ["".join(m["content"] for m in messages)])
    text_request = _text_request(body, TextRequest(messages=messages))
    if image_urls:
        if not getattr(pool.runner_cls, "takes_images", False):
            raise BadInput(f"{image_urls[0][0]}: model {pool.model_id} takes no images (text only)")
        text_request.extra = await _vision_payload(request, parts, image_urls)
    return await _respond(request, body, text_request, chat=True, pool=pool)


@router.post("/v1/completions", tags=["text"], dependencies=[Depends(require_api_key)])
async def completions(request: Request, body: CompletionRequest):
    """Text completion over the served text model; SSE when ``stream`` is true."""
    prompt = body.prompt
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if not isinstance(prompt, str) or not prompt:
        raise BadInput("prompt: expected a non-empty string (one prompt per request)")
    if body.echo:
        raise BadInput("echo: not supported by this server")
    check_text_chars(request, "prompt", [prompt])
    text_request = _text_request(body, TextRequest(prompt=prompt))
    return await _respond(request, body, text_request, chat=False)


# ---- request parsing ---------------------------------------------------------------------------
def _split_messages(messages: list[ChatMessage]):
    """(text-only messages, messages with typed parts, [(where, url)] of the image parts in order).

    The text-only form ({"role", "content": str}) is what a text model gets; the parts keep each
    image's place for a vision model's chat template."""
    flat: list[dict[str, str]] = []
    with_parts: list[dict[str, Any]] = []
    images: list[tuple[str, str]] = []
    for index, message in enumerate(messages):
        content = message.content
        if content is None or isinstance(content, str):
            flat.append({"role": message.role, "content": content or ""})
            with_parts.append({"role": message.role, "content": [{"type": "text", "text": content or ""}]})
            continue
        texts, parts = [], []
        for number, part in enumerate(content):
            where = f"messages[{index}].content[{number}]"
            if part.type == "text":
                if part.text is None:
                    raise BadInput(f"{where}.text: a text part needs its text")
                texts.append(part.text)
                parts.append({"type": "text", "text": part.text})
                continue
            url = part.image_url.url if isinstance(part.image_url, ImageUrl) else part.image_url
            if not url:
                raise BadInput(f"{where}.image_url: an image_url part needs {{\"url\": ...}}")
            images.append((f"{where}.image_url", url))
            parts.append({"type": "image"})
        flat.append({"role": message.role, "content": "".join(texts)})
        with_parts.append({"role": message.role, "content": parts})
    return flat, with_parts, images


async def _vision_payload(request: Request, parts: list[dict[str, Any]],
                          image_urls: list[tuple[str, str]]) -> dict[str, Any]:
    """The images of a chat request as bytes (fetched or decoded, each checked), with the typed parts."""
    settings = request.app.state.settings
    if len(image_urls) > settings.max_images_per_request:
        raise BadInput(f"messages: {len(image_urls)} images; at most MAX_IMAGES_PER_REQUEST="
                       f"{settings.max_images_per_request} per request")
    knobs = vision_settings()
    images = [await load_image(where, url, knobs, settings.max_image_dimension) for where, url in image_urls]
    return {"vision_messages": parts, "images": images}


def _text_request(body: _Sampling, base: TextRequest) -> TextRequest:
    for field, reason in _REJECTED_FIELDS.items():
        if getattr(body, field) not in (None, False, [], 0):
            raise BadInput(f"{field}: {reason}")
    response_format = body.response_format
    if response_format not in (None, {}) and response_format.get("type") != "text":
        raise BadInput("response_format: only {'type': 'text'} is supported by this server "
                       "(no JSON or schema-constrained output)")
    if body.n not in (None, 1):
        raise BadInput(f"n: only n=1 is supported, got {body.n!r}")
    stop = body.stop
    base.stop = [stop] if isinstance(stop, str) else list(stop or [])
    base.max_tokens = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
    base.temperature = 1.0 if body.temperature is None else body.temperature
    base.top_p = 1.0 if body.top_p is None else body.top_p
    base.top_k = None if body.top_k in (None, 0, -1) else body.top_k
    base.seed = body.seed
    base.ignore_eos = body.ignore_eos
    base.min_tokens = body.min_tokens or 0
    try:
        return base.validate(cap_max_tokens=False)
    except InvalidTextRequest as exc:
        raise BadInput(str(exc)) from None


# ---- responses -----------------------------------------------------------------------------------
async def _respond(request: Request, body: _Sampling, text_request: TextRequest, chat: bool, pool=None):
    scheduler = scheduler_of(request)
    pool = pool or scheduler.pool(body.model, KIND)
    served = pool.model_id
    stream = body.stream
    events = scheduler.stream(served, KIND, text_request.to_dict(), merge=merge_text_chunks)
    if not stream:
        return JSONResponse(await run_request(request, _collect(events, served, chat)))
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
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


def _usage(summary: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's usage; a vision model's prompt_tokens include the image tokens, which
    prompt_tokens_details counts apart (image_tokens, and the images they came from)."""
    prompt = int(summary.get("prompt_tokens", 0))
    completion = int(summary.get("completion_tokens", 0))
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion}
    if "image_tokens" in summary:
        usage["prompt_tokens_details"] = {"image_tokens": int(summary["image_tokens"]),
                                          "images": int(summary.get("images", 0))}
    return usage


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
