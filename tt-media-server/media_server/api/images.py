"""Image generation: `POST /v1/images/generations` (base64 JSON) and legacy `/image/generations` (PNG)."""
from __future__ import annotations

import base64
import re
import time
from typing import Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from media_server.api.common import run_request, scheduler_of
from media_server.auth import require_api_key
from media_server.errors import BadInput

router = APIRouter(dependencies=[Depends(require_api_key)], tags=["images"])


class ImageGenerationRequest(BaseModel):
    """Fields of an image generation request (OpenAI-style plus the diffusion knobs)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    model: str | None = Field(None, max_length=200, description="Served model id; default: the image model")
    prompt: str = Field(..., min_length=1, max_length=4000, description="What to draw")
    negative_prompt: str | None = Field(None, max_length=4000, description="What to avoid")
    num_inference_steps: int | None = Field(
        None, validation_alias=AliasChoices("num_inference_steps", "num_inference_step"),
        description="Denoising steps (MIN_INFERENCE_STEPS..MAX_INFERENCE_STEPS); default NUM_INFERENCE_STEPS")
    seed: int | None = Field(None, ge=0, le=2**32 - 1, description="Random seed for reproducible images")
    guidance_scale: float | None = Field(None, ge=0.0, le=50.0, description="Classifier-free guidance")
    number_of_images: int = Field(1, validation_alias=AliasChoices("number_of_images", "n"),
                                  description="Images to generate (1..MAX_IMAGES_PER_REQUEST)")
    size: str | None = Field(None, max_length=20, description="WIDTHxHEIGHT, multiples of 8; default IMAGE_SIZE")
    response_format: Literal["b64_json", "png"] | None = Field(
        None, description="b64_json (JSON with base64 PNGs) or png (raw bytes, one image)")


def _payload(body: ImageGenerationRequest, settings) -> dict:
    steps = body.num_inference_steps if body.num_inference_steps is not None else settings.num_inference_steps
    if not settings.min_inference_steps <= steps <= settings.max_inference_steps:
        raise BadInput(f"num_inference_steps: {steps} is outside "
                       f"{settings.min_inference_steps}..{settings.max_inference_steps}")
    if not 1 <= body.number_of_images <= settings.max_images_per_request:
        raise BadInput(f"number_of_images: {body.number_of_images} is outside "
                       f"1..{settings.max_images_per_request}")
    width = height = settings.image_size
    if body.size:
        match = re.fullmatch(r"\s*(\d{1,5})\s*[xX]\s*(\d{1,5})\s*", body.size)
        if not match:
            raise BadInput(f"size: {body.size!r} is not WIDTHxHEIGHT")
        width, height = int(match.group(1)), int(match.group(2))
        limit = settings.max_image_dimension
        if not (8 <= width <= limit and 8 <= height <= limit) or width % 8 or height % 8:
            raise BadInput(f"size: {width}x{height}; each side must be a multiple of 8 in 8..{limit}")
    return {"prompt": body.prompt, "negative_prompt": body.negative_prompt or "",
            "num_inference_steps": steps, "seed": body.seed,
            "guidance_scale": body.guidance_scale, "number_of_images": body.number_of_images,
            "width": width, "height": height}


async def _generate(request: Request, body: ImageGenerationRequest, default_format: str,
                    extra_headers: dict[str, str] | None = None) -> Response:
    settings = request.app.state.settings
    payload = _payload(body, settings)
    response_format = body.response_format or default_format
    if response_format == "png" and body.number_of_images != 1:
        raise BadInput("response_format: png returns one image; use b64_json for number_of_images > 1")
    scheduler = scheduler_of(request)
    pool = scheduler.pool(body.model, "image")
    images: list[bytes] = await run_request(request, scheduler.submit(pool.model_id, "image", payload))
    headers = dict(extra_headers or {})
    if response_format == "png":
        return Response(images[0], media_type="image/png", headers=headers)
    return JSONResponse({"created": int(time.time()), "model": pool.model_id,
                         "data": [{"b64_json": base64.b64encode(png).decode()} for png in images]},
                        headers=headers)


@router.post("/v1/images/generations",
             responses={200: {"content": {"image/png": {}}, "description": "JSON or PNG"}})
async def images_generations(request: Request, body: ImageGenerationRequest) -> Response:
    """Generate images; JSON with base64 PNGs by default, raw PNG with response_format=png."""
    return await _generate(request, body, "b64_json")


@router.post("/image/generations", deprecated=True,
             responses={200: {"content": {"image/png": {}}, "description": "PNG or JSON"}})
async def legacy_image_generations(request: Request, body: ImageGenerationRequest) -> Response:
    """Legacy path: raw PNG by default, JSON with base64 PNGs when the client accepts JSON and not PNG
    (``accept: application/json``, as the documented example sends). Use /v1/images/generations."""
    return await _generate(request, body, legacy_default_format(request.headers.get("accept", "")), {
        "Deprecation": "true", "Link": '</v1/images/generations>; rel="successor-version"'})


def legacy_default_format(accept: str) -> str:
    """``b64_json`` when the Accept header names JSON and no image type, else ``png`` (the legacy default)."""
    kinds = {part.split(";")[0].strip().lower() for part in accept.split(",") if part.strip()}
    wants_json = "application/json" in kinds
    takes_png = bool(kinds & {"image/png", "image/*", "*/*"})
    return "b64_json" if wants_json and not takes_png else "png"
