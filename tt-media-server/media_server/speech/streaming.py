"""OpenAI streaming transcription events (`transcript.text.delta` / `transcript.text.done`) as SSE lines.

Why a small state machine: the final `done` event must carry exactly the text the client built
from the deltas. The stream keeps the pieces it sent and builds `done.text` from them, so the two
can never disagree (rebuilding the text from an already consumed generator would send it empty).
Stdlib only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from media_server.speech.records import Segment

SSE_MEDIA_TYPE = "text/event-stream"


def sse(payload: dict) -> str:
    """One server-sent event carrying a JSON object."""
    return f"data: {json.dumps(payload)}\n\n"


@dataclass
class TranscriptStream:
    """Turns segments, fed in audio order, into delta events and closes with the done event."""

    pieces: list[str] = field(default_factory=list)
    duration: float = 0.0

    def feed(self, segments: list[Segment]) -> list[str]:
        """Delta events for the next segments in audio order (one per non-empty segment).

        A diarized segment (preprocessing on) also says its speaker: the delta carries `speaker`
        and `segment_id`, and a `transcript.text.segment` event (OpenAI's, for its diarizing model)
        follows with the segment's times."""
        events = []
        for segment in segments:
            piece = segment.text if self.pieces else segment.text.lstrip()
            if not piece.strip():
                continue
            self.pieces.append(piece)
            if segment.speaker is None:
                events.append(sse({"type": "transcript.text.delta", "delta": piece}))
                continue
            events.append(sse({"type": "transcript.text.delta", "delta": piece, "speaker": segment.speaker,
                               "segment_id": f"seg_{segment.id}"}))
            events.append(sse({"type": "transcript.text.segment", "id": f"seg_{segment.id}",
                               "start": round(segment.start, 3), "end": round(segment.end, 3),
                               "text": segment.text.strip(), "speaker": segment.speaker}))
        return events

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    def done(self, duration_seconds: float) -> str:
        """The closing event; its text is the concatenation of every delta sent."""
        seconds = int(-(-duration_seconds // 1))
        return sse({"type": "transcript.text.done", "text": self.text,
                    "usage": {"type": "duration", "seconds": seconds}})

    @staticmethod
    def error(status_code: int, message: str) -> str:
        """Sent instead of `done` when the transcription fails after the stream started."""
        return sse({"type": "error", "error": {"code": status_code, "message": message}})


def parse_sse(body: str) -> list[dict]:
    """The JSON payloads of an SSE body (used by clients and tests)."""
    events = []
    for block in body.split("\n\n"):
        data = [line[len("data:"):].strip() for line in block.splitlines() if line.startswith("data:")]
        if data:
            events.append(json.loads("\n".join(data)))
    return events
