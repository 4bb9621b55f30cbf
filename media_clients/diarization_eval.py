"""Speaker diarization evals of a speech server: DER on two- and three-speaker conversations, speaker count.

The espeak-ng conversation set (``scripts/make_diarization_data.py``: known turn times, pauses and
short overlaps) is sent to ``/v1/audio/transcriptions`` with ``response_format=diarized_json``;
each answer's segments (speaker, start, end) are scored against the reference turns with
``diarization_scoring.score`` (collar 0.25 s). Three eval records, shown beside the WER record:

- ``speech_diarization_two_speakers`` / ``_three_speakers``: 1 - DER over the set's conversations
  (pooled: total errors / total reference speech), its 95% interval a bootstrap over conversations;
  targets are the goals DER <= 10% and <= 20%;
- ``speech_speaker_count``: the share of conversations whose number of speakers was found, a claim
  about this fixed set checked exactly (target: at most one conversation in five wrong).

A server that does not allow preprocessing (``ALLOW_AUDIO_PREPROCESSING=false`` in the spec) is
not asked: the evals are not run and say so.
"""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from typing import Any

from contracts import REPO_ROOT
from contracts.intervals import Interval, bootstrap_ratio, exact
from media_clients.data import DataUnavailable
from media_clients.diarization_scoring import Span, score
from media_clients.eval_references import Reference

COLLAR_S = 0.25
OFF_VALUES = frozenset({"0", "false", "no", "off"})

TWO = Reference("speech_diarization_two_speakers",
                "1 - DER (diarization error rate: missed + false alarm + speaker confusion over reference speech, "
                "collar 0.25 s) on the two-speaker espeak-ng conversations", 1.0,
                "the goal: DER at most 10% on two speakers", 0.10)
THREE = Reference("speech_diarization_three_speakers",
                  "1 - DER (missed + false alarm + speaker confusion, collar 0.25 s) on the three-speaker espeak-ng "
                  "conversations", 1.0, "the goal: DER at most 20% on three speakers", 0.20)
COUNT = Reference("speech_speaker_count", "share of the espeak-ng conversations whose number of speakers the "
                  "server found (diarized_json, no count given)", 1.0,
                  "every conversation's voices are distinct; at most one in five may be miscounted", 0.20,
                  every_item=True)


@dataclass(frozen=True)
class Outcome:
    """One scored eval: its reference, value, item count, items and interval."""

    reference: Reference
    value: float
    samples: int
    items: list[dict]
    interval: Interval


class DiarizationEvalError(RuntimeError):
    """A conversation could not be diarized (request failed, answer malformed); one line."""


def preprocessing_allowed(env_vars: dict[str, Any]) -> bool:
    return str(env_vars.get("ALLOW_AUDIO_PREPROCESSING", "true")).strip().lower() not in OFF_VALUES


def conversations() -> list:
    path = REPO_ROOT / "scripts" / "make_diarization_data.py"
    for name in ("make_speech_data", "make_diarization_data"):
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" / f"{name}.py")
            if spec is None or spec.loader is None:
                raise DataUnavailable(f"{path} not found")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
    module = sys.modules["make_diarization_data"]
    try:
        return module.ensure_conversations()
    except sys.modules["make_speech_data"].SpeechDataError as exc:
        raise DataUnavailable(str(exc)) from None


def diarize(http, model: str, conversation) -> tuple[dict, float]:
    """The server's diarized_json for one conversation, and the request's seconds."""
    answer = http.post_form("/v1/audio/transcriptions", {"model": model, "response_format": "diarized_json"},
                            {"file": (f"{conversation.conversation_id}.wav", conversation.wav.read_bytes(),
                                      "audio/wav")})
    if not answer.ok:
        raise DiarizationEvalError(f"{conversation.conversation_id}: HTTP {answer.status} {answer.text(200)}")
    body = answer.json()
    segments = body.get("segments") if isinstance(body, dict) else None
    if not isinstance(segments, list) or not all(isinstance(s, dict) and {"speaker", "start", "end"} <= set(s)
                                                 for s in segments):
        raise DiarizationEvalError(f"{conversation.conversation_id}: no diarized segments in the answer")
    return body, answer.elapsed_s


def score_conversation(conversation, body: dict, latency_s: float) -> dict:
    reference = [Span(t.speaker, t.start, t.end) for t in conversation.turns]
    hypothesis = [Span(str(s["speaker"]), float(s["start"]), float(s["end"])) for s in body["segments"]]
    result = score(reference, hypothesis, collar=COLLAR_S)
    found = len({span.speaker for span in hypothesis})
    return {"conversation": conversation.conversation_id, "speakers": conversation.speaker_count,
            "speakers_found": found, "seconds": conversation.duration_seconds, "latency_s": round(latency_s, 3),
            "errors_seconds": round(result.errors_seconds, 3), **result.as_dict()}


def _accuracy_interval(errors: list[float], speech: list[float]) -> Interval:
    """1 - DER's 95% interval, a bootstrap over conversations; one conversation (smoke) cannot show
    its own spread, so it gets the whole range and the check stays inconclusive."""
    if len(errors) < 2:
        return Interval(0.0, 1.0, "one conversation: no interval (every value possible)")
    spread = bootstrap_ratio(errors, speech)
    return Interval(max(0.0, 1.0 - spread.high), min(1.0, 1.0 - spread.low), spread.method)


def evaluate(http, model: str, mode: str) -> list[Outcome]:
    """Every conversation diarized and scored (smoke: one of each speaker count)."""
    chosen = conversations()
    if mode == "smoke":
        chosen = [next(c for c in chosen if c.speaker_count == n) for n in (2, 3)]
    items = [score_conversation(c, *diarize(http, model, c)) for c in chosen]
    outcomes = []
    for ref, count in ((TWO, 2), (THREE, 3)):
        group = [i for i in items if i["speakers"] == count]
        errors = [i["errors_seconds"] for i in group]
        speech = [i["reference_seconds"] for i in group]
        der = sum(errors) / sum(speech)
        outcomes.append(Outcome(ref, 1.0 - der, len(group), group, _accuracy_interval(errors, speech)))
    right = sum(1 for i in items if i["speakers_found"] == i["speakers"])
    outcomes.append(Outcome(COUNT, right / len(items), len(items), items, exact(right / len(items))))
    return outcomes
