"""The six OpenAI transcription response formats, rendered from one Transcript.

Why one module: json, text, srt, vtt, verbose_json and diarized_json are six views of the same
record; keeping them side by side keeps their text identical (every format says exactly
`Transcript.text`) and their timestamps formatted one way each. Stdlib only.

Speakers: segments carry a speaker label only when preprocessing (diarization) ran; then
verbose_json segments gain `speaker`, and diarized_json (OpenAI's format for its diarizing model:
`segments[]` of type `transcript.text.segment` with `id`, `start`, `end`, `text`, `speaker`) lists
them. Without preprocessing every format is rendered exactly as before.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from media_server.speech.records import Segment, Transcript, text_pieces

RESPONSE_FORMATS = ("json", "text", "srt", "vtt", "verbose_json", "diarized_json")
#: Formats that need speaker labels, so preprocessing (VAD + diarization) runs for them.
DIARIZED_FORMATS = ("diarized_json",)
GRANULARITIES = ("segment", "word")

# Language names as OpenAI's verbose_json spells them; other codes are returned as the code.
_LANGUAGE_NAMES = {"en": "english", "de": "german", "fr": "french", "es": "spanish", "it": "italian",
                   "pt": "portuguese", "nl": "dutch", "ru": "russian", "zh": "chinese", "ja": "japanese",
                   "ko": "korean", "ar": "arabic", "hi": "hindi", "pl": "polish", "tr": "turkish"}


class FormatError(ValueError):
    """A response_format / timestamp_granularities combination a client may not ask for (HTTP 400)."""


@dataclass(frozen=True)
class RenderedResponse:
    """A response body and its media type."""

    body: str
    media_type: str


def validate_format(response_format: str, granularities: list[str]) -> None:
    """Refuse unknown formats and granularities, and word timings outside verbose_json."""
    if response_format not in RESPONSE_FORMATS:
        raise FormatError(f"response_format must be one of {', '.join(RESPONSE_FORMATS)}; got {response_format!r}")
    unknown = [value for value in granularities if value not in GRANULARITIES]
    if unknown:
        raise FormatError(f"timestamp_granularities[] values must be among {', '.join(GRANULARITIES)}; "
                          f"got {', '.join(map(repr, unknown))}")
    if granularities and response_format != "verbose_json":
        raise FormatError("timestamp_granularities[] needs response_format=verbose_json")


def needs_word_timestamps(response_format: str, granularities: list[str]) -> bool:
    return response_format == "verbose_json" and "word" in granularities


def render(transcript: Transcript, response_format: str, granularities: list[str]) -> RenderedResponse:
    """The body of a transcription response in the format asked for (call `validate_format` first)."""
    if response_format == "text":
        return RenderedResponse(transcript.text + "\n", "text/plain; charset=utf-8")
    if response_format == "srt":
        return RenderedResponse(to_srt(transcript.segments), "application/x-subrip; charset=utf-8")
    if response_format == "vtt":
        return RenderedResponse(to_vtt(transcript.segments), "text/vtt; charset=utf-8")
    if response_format == "verbose_json":
        return RenderedResponse(json.dumps(verbose_json(transcript, granularities)), "application/json")
    if response_format == "diarized_json":
        return RenderedResponse(json.dumps(diarized_json(transcript)), "application/json")
    return RenderedResponse(json.dumps({"text": transcript.text, "usage": duration_usage(transcript)}),
                            "application/json")


def duration_usage(transcript: Transcript) -> dict:
    """OpenAI's usage block for audio billed by duration (whole seconds, rounded up)."""
    return {"type": "duration", "seconds": int(math.ceil(transcript.duration))}


def verbose_json(transcript: Transcript, granularities: list[str]) -> dict:
    """OpenAI's verbose_json: segments unless only words were asked for, words when asked for."""
    body: dict = {"task": transcript.task, "language": _LANGUAGE_NAMES.get(transcript.language, transcript.language),
                  "duration": round(transcript.duration, 3), "text": transcript.text}
    wants_words = "word" in granularities
    wants_segments = not granularities or "segment" in granularities
    if wants_segments:
        body["segments"] = [_segment_json(segment) for segment in transcript.segments]
    if wants_words:
        body["words"] = [{"word": word.word.strip(), "start": round(word.start, 3), "end": round(word.end, 3)}
                         for word in transcript.words]
    body["usage"] = duration_usage(transcript)
    return body


def diarized_json(transcript: Transcript) -> dict:
    """OpenAI's diarized_json: the text and its segments, each with its speaker (A, B, ...)."""
    return {"task": "transcribe", "duration": round(transcript.duration, 3), "text": transcript.text,
            "segments": [diarized_segment(segment) for segment in transcript.segments if segment.text.strip()],
            "usage": duration_usage(transcript)}


def diarized_segment(segment: Segment) -> dict:
    """One `transcript.text.segment` (also the streamed event of that type, less its event fields)."""
    return {"type": "transcript.text.segment", "id": f"seg_{segment.id}", "start": round(segment.start, 3),
            "end": round(segment.end, 3), "text": segment.text.strip(), "speaker": segment.speaker or "A"}


def _segment_json(segment: Segment) -> dict:
    body = {"id": segment.id, "seek": 0, "start": round(segment.start, 3), "end": round(segment.end, 3),
            "text": segment.text, "tokens": segment.tokens, "temperature": segment.temperature,
            "avg_logprob": segment.avg_logprob, "compression_ratio": segment.compression_ratio,
            "no_speech_prob": segment.no_speech_prob}
    if segment.speaker is not None:
        body["speaker"] = segment.speaker
    return body


def format_timestamp(seconds: float, decimal_marker: str) -> str:
    """HH:MM:SS,mmm (SRT) or HH:MM:SS.mmm (WebVTT); negative times clamp to zero."""
    millis = max(0, int(round(seconds * 1000)))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{decimal_marker}{millis:03d}"


def _cues(segments: list[Segment]) -> list[tuple[float, float, str]]:
    """Non-empty segments as (start, end, text) with ends never before starts."""
    cues = []
    for segment in segments:
        text = segment.text.strip()
        if text:
            cues.append((segment.start, max(segment.start, segment.end), text))
    return cues


def to_srt(segments: list[Segment]) -> str:
    blocks = [f"{index}\n{format_timestamp(start, ',')} --> {format_timestamp(end, ',')}\n{text}\n"
              for index, (start, end, text) in enumerate(_cues(segments), start=1)]
    return "\n".join(blocks)


def to_vtt(segments: list[Segment]) -> str:
    blocks = [f"{format_timestamp(start, '.')} --> {format_timestamp(end, '.')}\n{text}\n"
              for start, end, text in _cues(segments)]
    return "WEBVTT\n\n" + "\n".join(blocks)


__all__ = ["RESPONSE_FORMATS", "DIARIZED_FORMATS", "GRANULARITIES", "diarized_json", "diarized_segment",
           "FormatError", "RenderedResponse", "validate_format",
           "needs_word_timestamps", "render", "verbose_json", "to_srt", "to_vtt", "format_timestamp",
           "duration_usage", "text_pieces"]
