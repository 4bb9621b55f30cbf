"""Unit tests of the speech logic that needs no model: formats, streaming events, chunking, input limits."""

from __future__ import annotations

import base64
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

MEDIA_ROOT = Path(__file__).resolve().parents[2] / "tt-media-server"
if str(MEDIA_ROOT) not in sys.path:
    sys.path.insert(0, str(MEDIA_ROOT))

from media_server.speech import chunking, formats  # noqa: E402
from media_server.speech.audio_input import AudioInputError, AudioLimits, check_size, decode_base64  # noqa: E402
from media_server.speech.records import Segment, Transcript, TranscriptionOptions, Word  # noqa: E402
from media_server.speech.streaming import TranscriptStream, parse_sse  # noqa: E402

SR = chunking.SAMPLE_RATE


def _segment(index: int, start: float, end: float, text: str, words: list[Word] | None = None) -> Segment:
    return Segment(id=index, start=start, end=end, text=text, words=words or [])


def _transcript() -> Transcript:
    words = [Word(" Hello", 0.0, 0.4), Word(" world.", 0.4, 1.1)]
    return Transcript(language="en", duration=3661.25, segments=[
        _segment(0, 0.0, 1.1, " Hello world.", words),
        _segment(1, 1.5, 3661.2, " Second part.", [Word(" Second", 1.5, 2.0), Word(" part.", 2.0, 3661.2)])])


def _srt_times(text: str) -> list[tuple[str, str]]:
    return re.findall(r"^(\d\d:\d\d:\d\d,\d\d\d) --> (\d\d:\d\d:\d\d,\d\d\d)$", text, re.M)


def test_records_round_trip_and_text_has_no_leading_space():
    transcript = _transcript()
    again = Transcript.from_dict(json.loads(json.dumps(transcript.to_dict())))
    assert again == transcript
    assert transcript.text == "Hello world. Second part."
    assert TranscriptionOptions.from_dict({"task": "translate", "unknown": 1}).task == "translate"
    with pytest.raises(ValueError, match="schema"):
        Transcript.from_dict({"schema": "other/1", "language": "en", "duration": 1})


def test_timestamps_format_hours_minutes_and_millis():
    assert formats.format_timestamp(3661.2346, ",") == "01:01:01,235"
    assert formats.format_timestamp(0.0, ".") == "00:00:00.000"
    assert formats.format_timestamp(-1.0, ".") == "00:00:00.000"


def test_srt_and_vtt_shapes():
    transcript = _transcript()
    srt = formats.render(transcript, "srt", []).body
    blocks = srt.strip().split("\n\n")
    assert [block.splitlines()[0] for block in blocks] == ["1", "2"]
    assert _srt_times(srt) == [("00:00:00,000", "00:00:01,100"), ("00:00:01,500", "01:01:01,200")]
    assert blocks[1].splitlines()[2] == "Second part."
    vtt = formats.render(transcript, "vtt", []).body
    assert vtt.startswith("WEBVTT\n\n")
    assert "00:00:01.500 --> 01:01:01.200\nSecond part.\n" in vtt


def test_json_text_and_verbose_json():
    transcript = _transcript()
    assert json.loads(formats.render(transcript, "json", []).body) == {
        "text": "Hello world. Second part.", "usage": {"type": "duration", "seconds": 3662}}
    assert formats.render(transcript, "text", []).body == "Hello world. Second part.\n"
    verbose = json.loads(formats.render(transcript, "verbose_json", ["word"]).body)
    assert verbose["language"] == "english" and verbose["task"] == "transcribe"
    assert [word["word"] for word in verbose["words"]] == ["Hello", "world.", "Second", "part."]
    assert "segments" not in verbose
    both = json.loads(formats.render(transcript, "verbose_json", ["word", "segment"]).body)
    assert len(both["segments"]) == 2 and len(both["words"]) == 4
    plain = json.loads(formats.render(transcript, "verbose_json", []).body)
    assert [segment["id"] for segment in plain["segments"]] == [0, 1] and "words" not in plain


@pytest.mark.parametrize("response_format, granularities, message", [
    ("xml", [], "response_format"), ("verbose_json", ["char"], "timestamp_granularities"),
    ("json", ["word"], "verbose_json")])
def test_bad_format_combinations_are_refused(response_format, granularities, message):
    with pytest.raises(formats.FormatError, match=message):
        formats.validate_format(response_format, granularities)
    assert formats.needs_word_timestamps("verbose_json", ["word"])
    assert not formats.needs_word_timestamps("verbose_json", ["segment"])


def test_stream_done_text_is_the_joined_deltas():
    stream = TranscriptStream()
    body = "".join(stream.feed([_segment(0, 0, 1, " Hello."), _segment(1, 1, 2, "  ")]))
    body += "".join(stream.feed([_segment(2, 2, 3, " Again.")]))
    body += stream.done(2.2)
    events = parse_sse(body)
    assert [event["type"] for event in events] == ["transcript.text.delta"] * 2 + ["transcript.text.done"]
    assert "".join(event["delta"] for event in events[:-1]) == events[-1]["text"] == "Hello. Again."
    assert events[-1]["usage"] == {"type": "duration", "seconds": 3}
    assert parse_sse(TranscriptStream.error(504, "late"))[0]["error"]["code"] == 504


def _speech_like(seconds: float, pauses: list[float]) -> np.ndarray:
    """Loud noise with 0.3 s silent gaps centred on `pauses` (seconds)."""
    samples = (np.random.default_rng(1).standard_normal(int(seconds * SR)) * 0.3).astype(np.float32)
    for pause in pauses:
        samples[int((pause - 0.15) * SR):int((pause + 0.15) * SR)] = 0.0
    return samples


def test_chunks_cover_every_sample_and_cut_in_pauses():
    samples = _speech_like(65.0, pauses=[18.7, 37.2, 55.5])
    chunks = chunking.plan_chunks(samples, chunk_seconds=20.0)
    assert chunks[0].start == 0 and chunks[-1].end == len(samples)
    assert all(a.end == b.start for a, b in zip(chunks, chunks[1:]))
    assert all(chunk.duration_seconds <= 20.0 for chunk in chunks)
    cuts = [chunk.start / SR for chunk in chunks[1:]]
    assert len(cuts) == 3
    for cut, pause in zip(cuts, [18.7, 37.2, 55.5]):
        assert abs(cut - pause) < 0.15, (cut, pause)
    assert chunking.plan_chunks(samples[: 5 * SR], 20.0) == [chunking.AudioChunk(0, 0, 5 * SR)]


def test_chunk_length_spreads_audio_over_workers():
    assert chunking.chunk_seconds_for(120.0, 1) == 30.0
    assert chunking.chunk_seconds_for(120.0, 6) == 20.0
    assert chunking.chunk_seconds_for(120.0, 64) == chunking.MIN_CHUNK_SECONDS


def test_join_puts_chunks_back_in_order_with_shifted_clamped_times():
    chunks = [chunking.AudioChunk(0, 0, 10 * SR), chunking.AudioChunk(1, 10 * SR, 18 * SR)]
    first = Transcript("en", 10.0, [_segment(0, 0.0, 4.0, " One."), _segment(1, 4.0, 10.4, " Two.")])
    second = Transcript("en", 8.0, [_segment(0, 0.5, 3.0, " Three.", [Word(" Three.", 0.5, 3.0)])])
    joined = chunking.join_transcripts(list(reversed(chunks)), [second, first], 18.0)
    assert joined.text == "One. Two. Three."
    assert [segment.id for segment in joined.segments] == [0, 1, 2]
    assert [(s.start, s.end) for s in joined.segments] == [(0.0, 4.0), (4.0, 10.0), (10.5, 13.0)]
    assert joined.words[0].start == 10.5 and joined.duration == 18.0
    with pytest.raises(ValueError):
        chunking.join_transcripts(chunks, [first], 18.0)


def test_size_limits_and_base64_errors_name_the_field():
    limits = AudioLimits(max_size_bytes=100, max_duration_seconds=10)
    with pytest.raises(AudioInputError, match="^file: .*MAX_AUDIO_SIZE_BYTES=100") as too_big:
        check_size(101, limits, "file")
    assert too_big.value.status_code == 413
    with pytest.raises(AudioInputError, match="empty") as empty:
        check_size(0, limits, "file")
    assert empty.value.status_code == 400
    assert decode_base64(base64.b64encode(b"abc").decode(), "file", limits) == b"abc"
    assert decode_base64("data:audio/wav;base64," + base64.b64encode(b"abc").decode(), "file", limits) == b"abc"
    with pytest.raises(AudioInputError, match="^file: not valid base64") as bad:
        decode_base64("***", "file", limits)
    assert bad.value.status_code == 400
    with pytest.raises(AudioInputError) as huge:
        decode_base64("A" * 400, "file", limits)
    assert huge.value.status_code == 413
