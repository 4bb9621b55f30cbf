"""Typed records of a transcription: what a speech runner returns and what every response format renders.

Why records and not the engine's own objects: a transcript crosses a process boundary (worker ->
server) and is stitched together from chunks that different workers transcribed. Plain dataclasses
that turn into dicts of JSON types travel through any queue and are the one place the fields are
named. Stdlib only, so the server, the runners and the unit tests all read the same definition.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

SCHEMA = "tt-transcript/1"


def _described(description: str, **kwargs: Any) -> Any:
    return field(metadata={"description": description}, **kwargs)


@dataclass
class Word:
    """One recognised word with its time span in the whole audio."""

    word: str = _described("the word as decoded, with its leading space")
    start: float = _described("seconds from the start of the audio")
    end: float = _described("seconds from the start of the audio")
    probability: float = _described("the decoder's probability of this word", default=1.0)

    def to_dict(self) -> dict[str, Any]:
        return {"word": self.word, "start": self.start, "end": self.end, "probability": self.probability}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Word":
        return cls(word=str(data["word"]), start=float(data["start"]), end=float(data["end"]),
                   probability=float(data.get("probability", 1.0)))

    def shifted(self, offset: float) -> "Word":
        return dataclasses.replace(self, start=self.start + offset, end=self.end + offset)


@dataclass
class Segment:
    """One decoded segment (a phrase Whisper emitted with its own timestamps)."""

    id: int = _described("position of the segment in the whole transcript, from 0")
    start: float = _described("seconds from the start of the audio")
    end: float = _described("seconds from the start of the audio")
    text: str = _described("the segment's text, with Whisper's leading space")
    avg_logprob: float = _described("mean log probability of the segment's tokens", default=0.0)
    compression_ratio: float = _described("gzip compression ratio of the text (high = repetitive)", default=0.0)
    no_speech_prob: float = _described("probability that the segment holds no speech", default=0.0)
    temperature: float = _described("sampling temperature the segment was decoded at", default=0.0)
    tokens: list[int] = _described("the segment's token ids", default_factory=list)
    words: list[Word] = _described("word timings (empty unless word timestamps were asked for)",
                                   default_factory=list)
    speaker: str | None = _described("diarized speaker label (A, B, ...); None unless preprocessing was on",
                                     default=None)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "start": self.start, "end": self.end, "text": self.text,
                "avg_logprob": self.avg_logprob, "compression_ratio": self.compression_ratio,
                "no_speech_prob": self.no_speech_prob, "temperature": self.temperature,
                "tokens": list(self.tokens), "words": [word.to_dict() for word in self.words],
                **({"speaker": self.speaker} if self.speaker is not None else {})}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Segment":
        return cls(id=int(data["id"]), start=float(data["start"]), end=float(data["end"]),
                   text=str(data["text"]), avg_logprob=float(data.get("avg_logprob", 0.0)),
                   compression_ratio=float(data.get("compression_ratio", 0.0)),
                   no_speech_prob=float(data.get("no_speech_prob", 0.0)),
                   temperature=float(data.get("temperature", 0.0)),
                   tokens=[int(token) for token in data.get("tokens", [])],
                   words=[Word.from_dict(word) for word in data.get("words", [])],
                   speaker=None if data.get("speaker") is None else str(data["speaker"]))

    def shifted(self, offset: float, new_id: int) -> "Segment":
        """The same segment placed `offset` seconds later in a longer audio, renumbered."""
        return dataclasses.replace(self, id=new_id, start=self.start + offset, end=self.end + offset,
                                   words=[word.shifted(offset) for word in self.words])


@dataclass
class Transcript:
    """The transcription of one audio (or of one chunk of it, before the chunks are joined)."""

    language: str = _described("language code the audio was decoded as")
    duration: float = _described("length of the audio in seconds")
    segments: list[Segment] = _described("segments in time order", default_factory=list)
    task: str = _described("transcribe or translate", default="transcribe")

    @property
    def text(self) -> str:
        """The whole text: the pieces streamed as deltas, joined (see `text_pieces`)."""
        return "".join(text_pieces(self.segments))

    @property
    def words(self) -> list[Word]:
        return [word for segment in self.segments for word in segment.words]

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "language": self.language, "duration": self.duration, "task": self.task,
                "segments": [segment.to_dict() for segment in self.segments]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Transcript":
        schema = data.get("schema", SCHEMA)
        if schema != SCHEMA:
            raise ValueError(f"not a transcript record: schema {schema!r}, expected {SCHEMA!r}")
        return cls(language=str(data["language"]), duration=float(data["duration"]),
                   task=str(data.get("task", "transcribe")),
                   segments=[Segment.from_dict(segment) for segment in data.get("segments", [])])


def text_pieces(segments: list[Segment]) -> list[str]:
    """The visible text of each segment, in order, such that joining them gives the transcript text.

    Whisper starts every segment with a space; the first piece drops it so the joined text has no
    leading blank, and empty segments give no piece. Streaming sends exactly these pieces as deltas,
    which is why the final `done` text always equals the joined deltas.
    """
    pieces: list[str] = []
    for segment in segments:
        piece = segment.text if pieces else segment.text.lstrip()
        if piece.strip():
            pieces.append(piece)
    return pieces


@dataclass
class TranscriptionOptions:
    """What a client asked for, as the runner needs it (the response format is the server's business)."""

    task: str = _described("transcribe or translate (to English)", default="transcribe")
    language: str | None = _described("ISO-639-1 language of the audio; None lets the model detect it",
                                      default=None)
    prompt: str | None = _described("text that conditions the decoder (names, spelling, style)", default=None)
    temperature: float = _described("sampling temperature; 0 is greedy decoding", default=0.0)
    word_timestamps: bool = _described("whether the runner computes word timings", default=False)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TranscriptionOptions":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})
