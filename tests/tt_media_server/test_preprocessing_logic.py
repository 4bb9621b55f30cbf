"""Unit tests of speech preprocessing that need no model: VAD chunk planning, speaker counts and
labels, segments cut at speaker changes, diarized_json and the streamed speaker events, the pyannote
annotation reader (fed a named fake annotation: the real pipeline's weights are on the Hub)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

MEDIA_ROOT = Path(__file__).resolve().parents[2] / "tt-media-server"
if str(MEDIA_ROOT) not in sys.path:
    sys.path.insert(0, str(MEDIA_ROOT))

from media_server.speech import formats  # noqa: E402
from media_server.speech.chunking import PIECE_GAP_SECONDS, SAMPLE_RATE as SR, join_transcripts  # noqa: E402
from media_server.speech.diarization import (SpeakerCount, SpeakerTurn, relabel_in_order, speaker_at,  # noqa: E402
                                             speaker_label, split_by_speaker)
from media_server.speech.diarize_pyannote import annotation_turns  # noqa: E402
from media_server.speech.records import Segment, Transcript, Word  # noqa: E402
from media_server.speech.streaming import TranscriptStream, parse_sse  # noqa: E402
from media_server.speech.vad import SpeechRegion, plan_speech_chunks  # noqa: E402
from tests.tt_media_server.conftest import run_media_script  # noqa: E402


def _regions(*spans: tuple[float, float]) -> list[SpeechRegion]:
    return [SpeechRegion(int(a * SR), int(b * SR)) for a, b in spans]


def test_speech_chunks_skip_long_silences_and_keep_absolute_offsets():
    samples = np.arange(120 * SR, dtype=np.float32)  # sample i holds i: what is sent can be checked
    regions = _regions((1.0, 4.0), (4.5, 8.0), (60.0, 70.0), (110.0, 112.0), (112.5, 114.0))
    chunks = plan_speech_chunks(samples, regions, chunk_seconds=18.0)
    # packed up to 18 s of samples sent; the 52 s and 40 s silences are never sent
    assert [[(a / SR, b / SR) for a, b in c.pieces] for c in chunks] == [
        [(1.0, 4.0), (4.5, 8.0), (60.0, 70.0)], [(110.0, 112.0), (112.5, 114.0)]]
    gap = PIECE_GAP_SECONDS
    assert chunks[0].duration_seconds == pytest.approx(3.0 + gap + 3.5 + gap + 10.0)
    sent = chunks[0].samples_of(samples)
    assert len(sent) == int(round(chunks[0].duration_seconds * SR))
    assert sent[0] == 1.0 * SR and sent[3 * SR] == 0.0 and sent[int((3.0 + gap) * SR)] == 4.5 * SR
    # times in the chunk map back to the upload's timeline
    assert chunks[0].to_absolute(0.5) == pytest.approx(1.5)
    assert chunks[0].to_absolute(3.0 + gap / 2) == pytest.approx(4.0)  # in a gap: the end of the piece before
    assert chunks[0].to_absolute(3.0 + gap + 3.5 + gap + 2.0) == pytest.approx(62.0)
    part = Transcript("en", chunks[0].duration_seconds, [
        Segment(0, 0.5, 2.0, " hello", words=[Word(" hello", 0.5, 2.0)]),
        Segment(1, 3.0 + 2 * gap + 3.5 + 1.0, 3.0 + 2 * gap + 3.5 + 4.0, " there")])
    joined = join_transcripts(chunks, [part, Transcript("en", 1.0, [])], 120.0)
    assert [(s.start, s.end) for s in joined.segments] == [(pytest.approx(1.5), pytest.approx(3.0)),
                                                          (pytest.approx(61.0), pytest.approx(64.0))]
    assert (joined.segments[0].words[0].start, joined.segments[0].words[0].end) == (pytest.approx(1.5),
                                                                                    pytest.approx(3.0))


def test_a_long_speech_region_is_cut_below_the_chunk_length():
    rng = np.random.default_rng(0)
    samples = (rng.standard_normal(80 * SR) * 0.1).astype(np.float32)
    chunks = plan_speech_chunks(samples, _regions((5.0, 75.0)), chunk_seconds=30.0)
    assert len(chunks) == 3 and not any(c.pieces for c in chunks)
    assert chunks[0].start == 5 * SR and chunks[-1].end == 75 * SR
    assert all(c.duration_seconds <= 30.0 for c in chunks)
    assert all(a.end == b.start for a, b in zip(chunks, chunks[1:]))


def test_no_speech_gives_no_chunks():
    assert plan_speech_chunks(np.zeros(SR, dtype=np.float32), [], 30.0) == []
    assert join_transcripts([], [], 1.0).text == ""


@pytest.mark.parametrize("count, message", [
    (SpeakerCount(num_speakers=0), "num_speakers"), (SpeakerCount(max_speakers=99), "max_speakers"),
    (SpeakerCount(min_speakers=3, max_speakers=2), "min_speakers=3"),
    (SpeakerCount(num_speakers=4, max_speakers=3), "num_speakers=4")])
def test_impossible_speaker_counts_are_refused_naming_the_field(count, message):
    with pytest.raises(ValueError, match=message):
        count.validate()


def test_speaker_count_bounds():
    assert SpeakerCount().validate().bounds() == (1, 16)
    assert SpeakerCount(num_speakers=2).bounds() == (2, 2)
    assert SpeakerCount(min_speakers=2, max_speakers=3).bounds() == (2, 3)


def test_labels_follow_first_appearance():
    turns = relabel_in_order([SpeakerTurn("7", 5.0, 6.0), SpeakerTurn("3", 0.0, 1.0), SpeakerTurn("7", 2.0, 3.0),
                              SpeakerTurn("3", 4.0, 5.0)])
    assert [(t.speaker, t.start) for t in turns] == [("A", 0.0), ("B", 2.0), ("A", 4.0), ("B", 5.0)]
    assert speaker_label(0) == "A" and speaker_label(25) == "Z" and speaker_label(26) == "S26"


def test_speaker_at_takes_the_longest_overlap_else_the_nearest_turn():
    turns = [SpeakerTurn("A", 0.0, 2.0), SpeakerTurn("B", 2.0, 5.0)]
    assert speaker_at(turns, 1.5, 3.0) == "B"
    assert speaker_at(turns, 0.0, 2.4) == "A"
    assert speaker_at(turns, 7.0, 8.0) == "B"
    assert speaker_at([], 0.0, 1.0) is None


def test_a_segment_across_a_turn_is_cut_at_the_speaker_change():
    words = [Word(" I", 0.0, 0.3), Word(" did.", 0.3, 0.9), Word(" The", 1.2, 1.4), Word(" numbers", 1.4, 2.0)]
    segment = Segment(0, 0.0, 2.0, " I did. The numbers", tokens=[1, 2, 3], words=words)
    pieces = split_by_speaker(segment, [SpeakerTurn("A", 0.0, 1.0), SpeakerTurn("B", 1.1, 2.2)])
    assert [(p.speaker, p.text, p.start, p.end) for p in pieces] == [("A", " I did.", 0.0, 0.9),
                                                                      ("B", " The numbers", 1.2, 2.0)]
    assert "".join(p.text for p in pieces) == segment.text
    whole = split_by_speaker(segment, [SpeakerTurn("B", 0.0, 3.0)])
    assert [(p.speaker, p.text, p.tokens) for p in whole] == [("B", segment.text, [1, 2, 3])]
    assert split_by_speaker(segment, []) == [segment]


def test_a_word_that_lasts_no_time_never_becomes_a_zero_length_piece():
    turns = [SpeakerTurn("A", 0.0, 1.0), SpeakerTurn("B", 1.1, 2.2)]
    # Whisper gives " uh" start == end at 1.05, nearer B's turn: alone it would be a 0 s piece
    words = [Word(" I", 0.0, 0.4), Word(" uh", 1.05, 1.05), Word(" did.", 0.5, 0.9), Word(" Then", 1.2, 2.0)]
    pieces = split_by_speaker(Segment(0, 0.0, 2.0, " I uh did. Then", words=words), turns)
    assert [(p.speaker, p.text) for p in pieces] == [("A", " I uh did."), ("B", " Then")]
    assert all(p.end > p.start for p in pieces)
    first = [Word(" um", 0.0, 0.0), Word(" Then", 1.2, 2.0)]   # an instant first word joins the run after it
    pieces = split_by_speaker(Segment(0, 0.0, 2.0, " um Then", words=first), [SpeakerTurn("A", -1, 0.0),
                                                                                 SpeakerTurn("B", 1.1, 2.2)])
    assert [(p.speaker, p.text) for p in pieces] == [("B", " um Then")]


def test_speaker_survives_the_process_boundary_and_is_absent_when_not_diarized():
    plain = Segment(0, 0.0, 1.0, " hi")
    assert "speaker" not in plain.to_dict()
    labelled = Segment(0, 0.0, 1.0, " hi", speaker="B")
    assert Segment.from_dict(json.loads(json.dumps(labelled.to_dict()))).speaker == "B"


def _diarized() -> Transcript:
    return Transcript("en", 4.0, [Segment(0, 0.0, 1.5, " Hello there.", speaker="A"),
                                  Segment(1, 1.5, 1.6, " ", speaker="A"),
                                  Segment(2, 2.0, 3.5, " Hi.", speaker="B")])


def test_diarized_json_is_openais_shape():
    body = json.loads(formats.render(_diarized(), "diarized_json", []).body)
    assert body["task"] == "transcribe" and body["duration"] == 4.0 and body["text"] == "Hello there. Hi."
    assert body["segments"] == [
        {"type": "transcript.text.segment", "id": "seg_0", "start": 0.0, "end": 1.5, "text": "Hello there.",
         "speaker": "A"},
        {"type": "transcript.text.segment", "id": "seg_2", "start": 2.0, "end": 3.5, "text": "Hi.", "speaker": "B"}]
    assert body["usage"] == {"type": "duration", "seconds": 4}
    with pytest.raises(formats.FormatError):
        formats.validate_format("diarized_json", ["word"])


def test_verbose_json_gains_speaker_only_when_diarized():
    diarized = json.loads(formats.render(_diarized(), "verbose_json", []).body)
    assert [s["speaker"] for s in diarized["segments"]] == ["A", "A", "B"]
    plain = Transcript("en", 2.0, [Segment(0, 0.0, 1.0, " Hello.")])
    assert "speaker" not in json.loads(formats.render(plain, "verbose_json", []).body)["segments"][0]


def test_streamed_deltas_carry_the_speaker_and_a_segment_event_follows():
    stream = TranscriptStream()
    events = parse_sse("".join(stream.feed(_diarized().segments)) + stream.done(4.0))
    deltas = [e for e in events if e["type"] == "transcript.text.delta"]
    assert [(d["delta"], d["speaker"]) for d in deltas] == [("Hello there.", "A"), (" Hi.", "B")]
    segments = [e for e in events if e["type"] == "transcript.text.segment"]
    assert [(s["id"], s["speaker"], s["start"]) for s in segments] == [("seg_0", "A", 0.0), ("seg_2", "B", 2.0)]
    assert events[-1]["text"] == "".join(d["delta"] for d in deltas)
    plain = TranscriptStream()
    assert parse_sse("".join(plain.feed([Segment(0, 0.0, 1.0, " Hi.")]))) == [
        {"type": "transcript.text.delta", "delta": "Hi."}]


class FakeSegment:
    """Stands in for pyannote.core.Segment (pyannote.audio is not installed here)."""

    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end


class FakeAnnotation:
    """Stands in for pyannote.core.Annotation: itertracks(yield_label=True) -> (segment, track, label)."""

    def __init__(self, tracks):
        self.tracks = tracks

    def itertracks(self, yield_label: bool = False):
        assert yield_label
        return iter(self.tracks)


def test_pyannote_annotations_become_turns_labelled_in_order():
    annotation = FakeAnnotation([(FakeSegment(3.0, 5.0), "a", "SPEAKER_01"), (FakeSegment(0.5, 2.5), "b", "SPEAKER_00"),
                                 (FakeSegment(5.5, 5.5), "c", "SPEAKER_00")])
    turns = annotation_turns(annotation)
    assert [(t.speaker, t.start, t.end) for t in turns] == [("A", 0.5, 2.5), ("B", 3.0, 5.0)]

    class Output:  # pyannote.audio 4 wraps the annotation
        speaker_diarization = annotation

    assert annotation_turns(Output()) == turns


# --- the offline backend's planning and clustering, on made-up embeddings (the encoder is exercised by
# the server tests, on real speech) --------------------------------------------------------------------
from media_server.speech import diarize_embeddings as emb  # noqa: E402


def test_windows_cover_every_region_and_short_regions_are_one_window():
    windows = emb.speech_windows(_regions((0.0, 1.0), (2.0, 4.0)))
    assert windows[0] == (0, SR)
    rest = windows[1:]
    assert rest[0][0] == 2 * SR and rest[-1][1] == 4 * SR
    assert all(end - start == int(emb.WINDOW_SECONDS * SR) for start, end in rest)


def _two_voices(rng, count: int) -> np.ndarray:
    """Unit vectors around two directions: windows 0..count-1 of voice 0, then of voice 1."""
    centres = np.eye(8)[:2]
    vectors = np.concatenate([centres[0] + rng.normal(0, 0.15, (count, 8)),
                              centres[1] + rng.normal(0, 0.15, (count, 8))])
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_clustering_finds_two_voices_and_honours_the_requested_count():
    rng = np.random.default_rng(0)
    embeddings = _two_voices(rng, 12)
    pieces = [[i, i + 1] for i in range(0, 24, 2)]
    labels = emb.cluster(embeddings, pieces, SpeakerCount())
    assert len(set(labels[:12])) == 1 and len(set(labels[12:])) == 1 and labels[0] != labels[12]
    assert set(emb.cluster(embeddings, pieces, SpeakerCount(num_speakers=1)).tolist()) == {0}
    assert len(set(emb.cluster(embeddings, pieces, SpeakerCount(num_speakers=3)).tolist())) >= 2
    # one voice: pieces scattered around one direction (as one real voice's are: split in two, its
    # halves' centroids lie closer than MIN_SPEAKER_DISTANCE) are one speaker, unless two are asked for
    one_voice = np.eye(8)[0] + rng.normal(0, 0.05, (12, 8))
    one_voice /= np.linalg.norm(one_voice, axis=1, keepdims=True)
    single = [[i] for i in range(12)]
    assert set(emb.cluster(one_voice, single, SpeakerCount()).tolist()) == {0}
    assert len(set(emb.cluster(one_voice, single, SpeakerCount(min_speakers=2)).tolist())) >= 2


def test_frame_turns_follow_the_window_labels_and_drop_flickers():
    regions = _regions((0.0, 6.0))
    windows = emb.speech_windows(regions)
    centres = np.array([(a + b) / 2 / SR for a, b in windows])
    labels = np.where(centres < 3.0, 0, 1)
    labels[np.argmin(np.abs(centres - 1.5))] = 1  # one window's flicker: shorter than MIN_TURN_SECONDS
    turns = relabel_in_order(emb.frame_turns(regions, windows, labels))
    assert [t.speaker for t in turns] == ["A", "B"]
    assert turns[0].start == 0.0 and turns[-1].end == pytest.approx(6.0)
    assert turns[0].end == pytest.approx(3.0, abs=emb.HOP_SECONDS)


# --- HF_TOKEN (documented for the original server's diarization models) on a host without pyannote.audio ---
_BACKEND_SCRIPT = """
import logging, sys
import numpy as np
from media_server.speech import preprocessing
from media_server.speech.diarization import DiarizationError, SpeakerCount
from media_server.speech.settings import SpeechSettings
from media_server.speech.vad import SpeechRegion
logging.basicConfig(stream=sys.stdout, format="LOG %(levelname)s %(message)s")
tone = (np.sin(np.arange(3 * 16000, dtype=np.float32) * 0.1) * 0.1).astype(np.float32)
auto = preprocessing.diarizer(SpeechSettings(hf_token="hf_documented_token"))
turns = auto.diarize(tone, [SpeechRegion(0, len(tone))], SpeakerCount())
print("AUTO", auto.name, sorted({t.speaker for t in turns}))
preprocessing.diarizer_for.cache_clear()
explicit = preprocessing.diarizer(SpeechSettings(hf_token="hf_documented_token", diarization_backend="pyannote"))
try:
    explicit.load()
    print("EXPLICIT loaded")
except DiarizationError as error:
    print("EXPLICIT", error)
"""


def test_hf_token_without_pyannote_falls_back_to_the_offline_backend_with_one_warning(tmp_path):
    """Real backends in the media-server venv, which has no pyannote.audio: ``auto`` with HF_TOKEN picks
    pyannote, cannot load it, and diarizes with the offline encoder (was: every such request 503);
    an explicit DIARIZATION_BACKEND=pyannote stays an error naming the missing package."""
    done = run_media_script(_BACKEND_SCRIPT, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    warnings = [line for line in lines if line.startswith("LOG WARNING")]
    assert len(warnings) == 1 and "pyannote.audio" in warnings[0] and "offline embeddings backend" in warnings[0]
    assert "AUTO embeddings ['A']" in lines
    assert any(line.startswith("EXPLICIT ") and "pyannote.audio" in line for line in lines), lines
