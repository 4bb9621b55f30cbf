"""Speech to text: `POST /v1/audio/transcriptions`, `/v1/audio/translations`, legacy `/audio/transcriptions`.

OpenAI's multipart form (file, model, language, prompt, temperature, response_format json | text |
srt | vtt | verbose_json | diarized_json, timestamp_granularities[] segment | word, stream). With `stream=true`
the answer is server-sent events: `transcript.text.delta` per decoded segment, then one
`transcript.text.done` whose text is the deltas joined. The legacy route takes the same fields
as JSON with the audio base64-encoded in `file` (or the same multipart form).

Preprocessing (`is_preprocessing_enabled=true`, or `response_format=diarized_json`): Silero VAD
keeps only the speech (long silences are never transcribed; timestamps stay those of the upload),
the diarization backend labels speakers (`num_speakers`, `min_speakers`, `max_speakers` bound the
count), and segments are cut at speaker changes by their word timings, so every segment has one
speaker: verbose_json segments gain `speaker`, streamed deltas carry it. Asked for
while ALLOW_AUDIO_PREPROCESSING=false: 400 saying so. Not asked for: the responses are as before.

Limits: MAX_AUDIO_SIZE_BYTES and MAX_AUDIO_DURATION_SECONDS give 413; audio FFmpeg cannot decode
gives 400 naming the field. An English-only model (whisper-tiny.en) cannot translate: the
translations route then returns the English transcription of English speech.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from typing import Any, AsyncIterator

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, Field, ValidationError

from media_server import transcription
from media_server.api.common import run_request, scheduler_of
from media_server.auth import require_api_key
from media_server.errors import BadInput, MediaError, NotReady, PayloadTooLarge
from media_server.speech import preprocessing
from media_server.speech.audio_input import AudioInputError, check_size, decode_audio, decode_base64
from media_server.speech.diarization import MAX_SPEAKERS, DiarizationError, SpeakerCount
from media_server.speech.formats import DIARIZED_FORMATS, FormatError, needs_word_timestamps, render, validate_format
from media_server.speech.records import TranscriptionOptions
from media_server.speech.settings import speech_settings
from media_server.speech.streaming import SSE_MEDIA_TYPE, TranscriptStream

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def _warm_preprocessing(app):
    """Load the VAD and the diarization backend in the background when an audio model is served and
    preprocessing is allowed, so the first request that asks for it does not wait for the load."""
    scheduler = getattr(app.state, "scheduler", None)
    pools = getattr(scheduler, "pools", {}) if scheduler is not None else {}
    if speech_settings().allow_audio_preprocessing and any(
            getattr(pool, "kind", None) == transcription.KIND for pool in pools.values()):
        threading.Thread(target=_load_preprocessing, name="preprocessing-warm-up", daemon=True).start()
    yield


def _load_preprocessing() -> None:
    try:
        preprocessing.warm_up(speech_settings())
    except Exception as error:  # noqa: BLE001 - reported again, as a 503, by the request that needs it
        log.warning("audio preprocessing could not be loaded: %s: %s", type(error).__name__, error)


router = APIRouter(dependencies=[Depends(require_api_key)], tags=["audio"], lifespan=_warm_preprocessing)

_FORMAT_DOC = "json | text | srt | vtt | verbose_json | diarized_json"


def _input_error(error: AudioInputError) -> MediaError:
    return PayloadTooLarge(error.message) if error.status_code == 413 else BadInput(error.message)


class TranscriptionForm(BaseModel):
    """The fields shared by every transcription route, however they arrived."""

    model: str | None = Field(None, max_length=200, description="served audio model; default: the first one")
    language: str | None = Field(None, max_length=16, description="ISO-639-1 code of the speech")
    prompt: str | None = Field(None, max_length=4000, description="text that guides spelling and style")
    temperature: float = Field(0.0, ge=0.0, le=1.0, description="0: greedy with fallback")
    response_format: str = Field("json", description=_FORMAT_DOC)
    timestamp_granularities: list[str] = Field(default_factory=list, description="segment and/or word")
    stream: bool = Field(False, description="answer with transcript.text.delta / .done events")
    is_preprocessing_enabled: bool = Field(False, description="VAD + speaker diarization before transcription "
                                           "(segments gain `speaker`)")
    num_speakers: int | None = Field(None, ge=1, le=MAX_SPEAKERS, description="exact speaker count (preprocessing)")
    min_speakers: int | None = Field(None, ge=1, le=MAX_SPEAKERS, description="fewest speakers (preprocessing)")
    max_speakers: int | None = Field(None, ge=1, le=MAX_SPEAKERS, description="most speakers (preprocessing)")

    @property
    def wants_preprocessing(self) -> bool:
        return self.is_preprocessing_enabled or self.response_format in DIARIZED_FORMATS

    def speaker_count(self) -> SpeakerCount:
        """The speaker-count options, checked against each other (BadInput naming the field)."""
        try:
            return SpeakerCount(self.num_speakers, self.min_speakers, self.max_speakers).validate()
        except ValueError as error:
            raise BadInput(str(error)) from None


async def _respond(request: Request, audio: bytes, field: str, form: TranscriptionForm, task: str) -> Response:
    try:
        validate_format(form.response_format, form.timestamp_granularities)
    except FormatError as error:
        raise BadInput(str(error)) from None
    settings = speech_settings()
    if form.wants_preprocessing and not settings.allow_audio_preprocessing:
        asked = ("is_preprocessing_enabled=true" if form.is_preprocessing_enabled
                 else f"response_format={form.response_format}")
        raise BadInput(f"{asked} asks for audio preprocessing (VAD + speaker diarization), which this server "
                       f"does not allow: ALLOW_AUDIO_PREPROCESSING=false")
    count = form.speaker_count()
    scheduler = scheduler_of(request)
    pool = scheduler.pool(form.model, transcription.KIND)  # 404 naming the served models, before decoding
    try:
        decoded = await asyncio.to_thread(decode_audio, audio, field, settings.audio_limits)
    except AudioInputError as error:
        raise _input_error(error) from None
    options = TranscriptionOptions(task=task, language=form.language, prompt=form.prompt,
                                   temperature=form.temperature,
                                   word_timestamps=needs_word_timestamps(form.response_format,
                                                                         form.timestamp_granularities))
    chunks = turns = None
    if form.wants_preprocessing:
        seconds = transcription.chunk_seconds(scheduler, pool.model_id, decoded.duration_seconds, form.stream)
        try:
            prepared = await asyncio.to_thread(preprocessing.preprocess, decoded.samples, count, seconds, settings)
        except DiarizationError as error:
            raise NotReady(f"speaker diarization is unavailable: {error}") from None
        chunks, turns = prepared.chunks, prepared.turns
        options.word_timestamps = True  # segments are cut at speaker changes by their words' times
    job = transcription.plan_job(scheduler, pool.model_id, decoded.samples, decoded.duration_seconds, options,
                                 streaming=form.stream, chunks=chunks, turns=turns)
    if form.stream:
        return StreamingResponse(_events(scheduler, job), media_type=SSE_MEDIA_TYPE,
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    transcript = await run_request(request, transcription.transcribe(scheduler, job))
    rendered = render(transcript, form.response_format, form.timestamp_granularities)
    return Response(rendered.body, media_type=rendered.media_type)


async def _events(scheduler, job: transcription.TranscriptionJob) -> AsyncIterator[str]:
    """SSE body: deltas in audio order, then done (or one error event if a chunk fails)."""
    stream = TranscriptStream()
    try:
        async for segment in transcription.stream_segments(scheduler, job):
            for event in stream.feed([segment]):
                yield event
    except MediaError as error:
        yield stream.error(error.status, error.message)
        return
    yield stream.done(job.duration_seconds)


async def _read_upload(upload: UploadFile, field: str) -> bytes:
    limit = speech_settings().audio_limits
    if upload.size is not None:
        try:
            check_size(upload.size, limit, field)
        except AudioInputError as error:
            raise _input_error(error) from None
    return await upload.read()


def _form(**fields: Any) -> TranscriptionForm:
    try:
        return TranscriptionForm(**{key: value for key, value in fields.items() if value is not None})
    except ValidationError as error:
        first = error.errors()[0]
        raise BadInput(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None


@router.post("/v1/audio/transcriptions")
async def transcriptions(
        request: Request,
        file: UploadFile = File(..., description="the audio file (wav, mp3, flac, ogg, m4a, ...)"),
        model: str | None = Form(None), language: str | None = Form(None), prompt: str | None = Form(None),
        temperature: float | None = Form(None), response_format: str | None = Form(None),
        timestamp_granularities: list[str] | None = Form(None, alias="timestamp_granularities[]"),
        stream: bool | None = Form(None), is_preprocessing_enabled: bool | None = Form(None),
        num_speakers: int | None = Form(None), min_speakers: int | None = Form(None),
        max_speakers: int | None = Form(None)) -> Response:
    """Transcribe speech in its own language (OpenAI-compatible; diarized_json labels speakers)."""
    form = _form(model=model, language=language, prompt=prompt, temperature=temperature,
                 response_format=response_format, timestamp_granularities=timestamp_granularities, stream=stream,
                 is_preprocessing_enabled=is_preprocessing_enabled, num_speakers=num_speakers,
                 min_speakers=min_speakers, max_speakers=max_speakers)
    return await _respond(request, await _read_upload(file, "file"), "file", form, task="transcribe")


@router.post("/v1/audio/translations")
async def translations(
        request: Request,
        file: UploadFile = File(..., description="the audio file (wav, mp3, flac, ogg, m4a, ...)"),
        model: str | None = Form(None), prompt: str | None = Form(None), temperature: float | None = Form(None),
        response_format: str | None = Form(None)) -> Response:
    """Speech in any language -> English text (English-only models transcribe English speech)."""
    form = _form(model=model, prompt=prompt, temperature=temperature, response_format=response_format)
    return await _respond(request, await _read_upload(file, "file"), "file", form, task="translate")


class LegacyTranscriptionRequest(TranscriptionForm):
    """JSON body of the legacy route: the audio file base64-encoded in `file`."""

    file: str = Field(..., description="base64 of an audio file (wav, mp3, ...)")


_LEGACY_DOC = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": LegacyTranscriptionRequest.model_json_schema()},
    "multipart/form-data": {"schema": {"type": "object", "required": ["file"], "properties": {
        "file": {"type": "string", "format": "binary"}, "model": {"type": "string"},
        "response_format": {"type": "string"}, "stream": {"type": "boolean"},
        "is_preprocessing_enabled": {"type": "boolean"}, "num_speakers": {"type": "integer"},
        "min_speakers": {"type": "integer"}, "max_speakers": {"type": "integer"}}}}}}}


@router.post("/audio/transcriptions", deprecated=True, openapi_extra=_LEGACY_DOC)
async def legacy_transcriptions(request: Request) -> Response:
    """Legacy path: JSON `{"file": <base64>, "stream": bool, ...}` or the multipart form of the v1 route."""
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        audio, form = await _legacy_multipart(request)
    else:
        audio, form = await _legacy_json(request)
    response = await _respond(request, audio, "file", form, task="transcribe")
    response.headers["Deprecation"] = "true"
    response.headers["Link"] = '</v1/audio/transcriptions>; rel="successor-version"'
    return response


async def _legacy_json(request: Request) -> tuple[bytes, TranscriptionForm]:
    try:
        body = LegacyTranscriptionRequest.model_validate(json.loads(await request.body() or b"null"))
    except (ValueError, TypeError) as error:
        if isinstance(error, ValidationError) and error.errors():
            first = error.errors()[0]
            raise BadInput(f"{'.'.join(map(str, first['loc'])) or 'body'}: {first['msg']}") from None
        raise BadInput('body: expected JSON {"file": <base64 audio>, ...}') from None
    try:
        audio = decode_base64(body.file, "file", speech_settings().audio_limits)
    except AudioInputError as error:
        raise _input_error(error) from None
    return audio, TranscriptionForm(**body.model_dump(exclude={"file"}))


async def _legacy_multipart(request: Request) -> tuple[bytes, TranscriptionForm]:
    try:
        form = await request.form()
    except Exception as error:  # noqa: BLE001 - a malformed form is bad input
        raise BadInput(f"body: not a valid multipart form ({type(error).__name__})") from None
    upload = form.get("file")
    if upload is None or isinstance(upload, str):
        raise BadInput("file: expected a file part named 'file'")
    fields = {key: form.get(key) for key in ("model", "language", "prompt", "temperature", "response_format",
                                             "stream", "is_preprocessing_enabled", "num_speakers",
                                             "min_speakers", "max_speakers")}
    fields["timestamp_granularities"] = form.getlist("timestamp_granularities[]") or None
    return await _read_upload(upload, "file"), _form(**fields)
