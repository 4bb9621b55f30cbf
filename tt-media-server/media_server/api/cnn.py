"""Image classification: `POST /v1/cnn/search-image` and legacy `/cnn/search-image`.

Accepts JSON `{"image": <base64>, "top_k": 3}` (`prompt` is the legacy name of `image`) or a
multipart form with an `image`/`file` part and a `top_k` field. Answers the top-k labels.
"""
from __future__ import annotations

import json

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from media_server.api.common import decode_base64, run_request, scheduler_of
from media_server.auth import require_api_key
from media_server.errors import BadInput
from media_server.vision.images import check_image

router = APIRouter(dependencies=[Depends(require_api_key)], tags=["cnn"])


class ClassifyRequest(BaseModel):
    """JSON body of a classification request."""

    model: str | None = Field(None, max_length=200, description="Served model id; default: the CNN model")
    image: str | None = Field(None, description="The image file (JPEG, PNG, ...), base64")
    prompt: str | None = Field(None, description="Legacy name of `image`")
    top_k: int | None = Field(None, ge=1, le=1000, description="How many labels to return; default CNN_TOP_K")


_BODY_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": ClassifyRequest.model_json_schema()},
            "multipart/form-data": {"schema": {
                "type": "object", "required": ["image"],
                "properties": {"image": {"type": "string", "format": "binary"},
                               "top_k": {"type": "integer", "minimum": 1, "maximum": 1000},
                               "model": {"type": "string"}}}},
        },
    },
    "responses": {"200": {"description": "Top-k labels with scores"}},
}


async def _parse(request: Request) -> tuple[str | None, str, bytes, int | None]:
    """(model, field name, image bytes, top_k) from a JSON or multipart body."""
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        try:
            form = await request.form()
        except Exception as exc:  # noqa: BLE001 - a malformed form is bad input
            raise BadInput(f"body: not a valid multipart form ({type(exc).__name__})") from None
        field = "image" if "image" in form else "file"
        upload = form.get(field)
        if upload is None or isinstance(upload, str):
            raise BadInput("image: expected a file part named 'image' (or 'file')")
        data = await upload.read()
        top_k = _int_field("top_k", form.get("top_k"))
        model = form.get("model") if isinstance(form.get("model"), str) else None
        return model or None, field, data, top_k
    try:
        raw = json.loads(await request.body() or b"null")
        body = ClassifyRequest.model_validate(raw)
    except (ValueError, TypeError) as exc:
        raise BadInput(f"body: expected JSON {{\"image\": base64, \"top_k\": int}} "
                       f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]})") from None
    field = "image" if body.image is not None else "prompt"
    text = body.image if body.image is not None else body.prompt
    if text is None:
        raise BadInput("image: required (base64 of an image file)")
    return body.model, field, decode_base64(field, text), body.top_k


def _int_field(name: str, value) -> int | None:
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BadInput(f"{name}: {value!r} is not an integer") from None
    if not 1 <= number <= 1000:
        raise BadInput(f"{name}: {number} is outside 1..1000")
    return number


async def _classify(request: Request) -> JSONResponse:
    settings = request.app.state.settings
    model, field, data, top_k = await _parse(request)
    if not data:
        raise BadInput(f"{field}: empty")
    check_image(field, data, settings.max_image_dimension)
    scheduler = scheduler_of(request)
    pool = scheduler.pool(model, "cnn")
    labels = await run_request(request, scheduler.submit(
        pool.model_id, "cnn", {"image": data, "top_k": top_k or settings.cnn_top_k}))
    return JSONResponse({"status": "success", "model": pool.model_id, "image_data": labels})


@router.post("/v1/cnn/search-image", openapi_extra=_BODY_DOC)
async def search_image(request: Request) -> JSONResponse:
    """Classify an image: top-k `{label, score, class_index}` (scores are softmax probabilities)."""
    return await _classify(request)


@router.post("/cnn/search-image", openapi_extra=_BODY_DOC, deprecated=True)
async def legacy_search_image(request: Request) -> JSONResponse:
    """Legacy path of /v1/cnn/search-image."""
    response = await _classify(request)
    response.headers["Deprecation"] = "true"
    response.headers["Link"] = '</v1/cnn/search-image>; rel="successor-version"'
    return response
