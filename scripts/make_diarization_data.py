#!/usr/bin/env python3
"""Synthesize the project's speaker-diarization test set: conversations of two and three espeak-ng voices.

Why synthesized: a diarization error rate needs audio whose speaker turns are known to the
millisecond, and the project ships no recordings. Every line of a conversation is spoken by
espeak-ng in its speaker's voice, trimmed of leading and trailing silence by sox (so the turn's
start and end are the first and last audible sample), and placed on the conversation's timeline
after a pause, or before the previous line ends (a short overlap, where both voices are heard).
sox mixes the placed lines into one 16 kHz mono WAV; the reference turns (speaker, start, end)
are written beside it in the manifest.

The set is made on first use in a cache directory keyed by the conversations and the espeak-ng
version (a few MB), like ``make_speech_data.py``, whose helpers it shares. Other voices and
texts (a conversation nobody in the project recorded) go through the same ``build_conversation``.

Usage:
    python3 scripts/make_diarization_data.py [--out DIR]     # prints the manifest path

Stdlib only (imported by the tests in the dev venv, the evals in the media-clients venv and the
benchmarks in the media-server venv).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# make_speech_data: scripts/ is first on the import path when run by path; loaders by file register it first
from make_speech_data import (APT_PACKAGES, WORDS_PER_MINUTE, SpeechDataError, _duration, _run,  # noqa: E402
                              generator_version, missing_tools)

SCHEMA = "tt-diarization-data/1"
SAMPLE_RATE = 16_000


@dataclass(frozen=True)
class LineSpec:
    """One line of a conversation as written: who says what, and the gap before it.

    ``gap_seconds`` is the time between the end of the previous line and the start of this one;
    a negative gap starts this line before the previous one ends (an overlap)."""

    speaker: str
    text: str
    gap_seconds: float = 0.6


@dataclass(frozen=True)
class ConversationSpec:
    """A conversation to synthesize: its speakers' espeak-ng voices and its lines in order."""

    conversation_id: str
    voices: dict[str, str]
    lines: tuple[LineSpec, ...]

    @property
    def speaker_count(self) -> int:
        return len(self.voices)


@dataclass(frozen=True)
class Turn:
    """A reference speaker turn: the speaker's audible span on the conversation's timeline."""

    speaker: str
    start: float
    end: float
    text: str


@dataclass(frozen=True)
class Conversation:
    """A synthesized conversation, its reference turns and its WAV file."""

    conversation_id: str
    speakers: tuple[str, ...]
    turns: tuple[Turn, ...]
    wav: Path
    duration_seconds: float

    @property
    def speaker_count(self) -> int:
        return len(self.speakers)


def _lines(speakers: str, texts: tuple[str, ...], gaps: tuple[float, ...]) -> tuple[LineSpec, ...]:
    """Lines from a speaker letter per line ("ABAB..."), their texts and gaps."""
    return tuple(LineSpec(speaker, text, gap) for speaker, text, gap in zip(speakers, texts, gaps, strict=True))


_DIALOG = (
    "Good morning, did you get a chance to look at the quarterly report?",
    "I did, and the numbers for the northern region look much better than last year.",
    "That is great news, what do you think made the difference?",
    "Mostly the new delivery routes, they cut our costs by almost a third.",
    "We should present that at the meeting on Thursday.",
    "Agreed, I will prepare a few slides tonight.",
    "Please include the chart with the monthly sales as well.",
    "Sure, and I will add the customer survey results too.",
    "Perfect, let us meet again tomorrow to review everything.",
    "Sounds good, see you at ten o'clock.",
)
_TRIO = (
    "Welcome everyone, today we are planning the summer picnic.",
    "I can bring sandwiches and a big bowl of fruit salad.",
    "I will take care of the drinks and the ice.",
    "Should we hold it at the lake or in the city park?",
    "The lake is nicer, but the park is easier to reach by bus.",
    "Let us vote on it at the end of the week.",
    "Good idea, I will send a message to the whole team.",
    "Do not forget to ask who needs a ride.",
    "I have room for four people in my car.",
    "Then we are almost done, thank you all for coming.",
)

#: The evaluation set: four two-speaker and three three-speaker conversations, each with pauses of
#: 0.3 to 1.2 s and two short overlaps (negative gaps). Voices differ in accent and variant.
CONVERSATIONS: tuple[ConversationSpec, ...] = (
    ConversationSpec("two_a", {"A": "en-us+m3", "B": "en-gb+f2"},
                     _lines("ABABABABAB", _DIALOG, (0.0, 0.6, 0.8, -0.3, 0.5, 1.0, 0.4, -0.25, 0.7, 0.9))),
    ConversationSpec("two_b", {"A": "en-gb-scotland+m1", "B": "en-us+f4"},
                     _lines("ABABABABAB", _DIALOG[::-1], (0.0, 0.5, -0.3, 0.9, 0.6, 0.4, -0.2, 1.2, 0.5, 0.8))),
    ConversationSpec("two_c", {"A": "en-us+f2", "B": "en-gb+m4"},
                     _lines("ABBABAABAB", _TRIO, (0.0, 0.7, 0.6, -0.3, 0.8, 0.5, 1.0, -0.25, 0.6, 0.4))),
    ConversationSpec("two_d", {"A": "en-029+m2", "B": "en-us+f5"},
                     _lines("AABABBABAB", _DIALOG[3:] + _TRIO[:3],
                            (0.0, 0.9, 0.5, -0.2, 0.7, 0.6, 0.4, 1.1, -0.3, 0.6))),
    ConversationSpec("three_a", {"A": "en-us+m3", "B": "en-gb+f2", "C": "en-gb-scotland+m6"},
                     _lines("ABCABCACBA", _TRIO, (0.0, 0.6, 0.8, -0.3, 0.5, 1.0, 0.4, -0.25, 0.7, 0.9))),
    ConversationSpec("three_b", {"A": "en-us+f4", "B": "en-029+m1", "C": "en-gb+f3"},
                     _lines("ABCBACABCA", _DIALOG, (0.0, 0.5, -0.3, 0.9, 0.6, 0.4, -0.2, 1.2, 0.5, 0.8))),
    ConversationSpec("three_c", {"A": "en-gb+m4", "B": "en-us+f2", "C": "en-us+m7"},
                     _lines("ABCCABCBAC", _TRIO[::-1], (0.0, 0.7, 0.6, -0.3, 0.8, 0.5, 1.0, -0.25, 0.6, 0.4))),
)


def dataset_identity(conversations: tuple[ConversationSpec, ...] = CONVERSATIONS) -> str:
    """What the set says and who says it, independent of the synthesizer build."""
    digest = hashlib.sha256(_material(conversations).encode()).hexdigest()[:12]
    twos = sum(1 for c in conversations if c.speaker_count == 2)
    return (f"diarization set {len(conversations)} conversations ({twos} two-speaker, "
            f"{len(conversations) - twos} three-speaker), {WORDS_PER_MINUTE} wpm (sha256 {digest})")


def _material(conversations: tuple[ConversationSpec, ...]) -> str:
    return json.dumps({"schema": SCHEMA, "wpm": WORDS_PER_MINUTE, "conversations": [
        {"id": c.conversation_id, "voices": c.voices,
         "lines": [[line.speaker, line.text, line.gap_seconds] for line in c.lines]} for c in conversations]})


def default_directory(conversations: tuple[ConversationSpec, ...] = CONVERSATIONS) -> Path:
    root = Path(os.environ.get("TT_SPEECH_DATA_DIR") or Path.home() / ".cache" / "tt-inference-server" / "speech-data")
    key = hashlib.sha256((_material(conversations) + generator_version()).encode()).hexdigest()[:16]
    return root / f"diarization-{key}"


def _speak_trimmed(voice: str, text: str, wav: Path) -> float:
    """espeak-ng -> 16 kHz mono WAV with leading and trailing silence removed; its duration."""
    raw = wav.with_suffix(".raw.wav")
    _run(["espeak-ng", "-v", voice, "-s", str(WORDS_PER_MINUTE), "-w", str(raw), text])
    # silence 1 0.01 0.5%: drop everything up to the first 10 ms above 0.5% of full scale; reversed
    # twice, the same from the end. What is left starts and ends with audible speech.
    _run(["sox", str(raw), "-r", str(SAMPLE_RATE), "-c", "1", "-b", "16", str(wav),
          "silence", "1", "0.01", "0.5%", "reverse", "silence", "1", "0.01", "0.5%", "reverse"])
    raw.unlink()
    return _duration(wav)


def build_conversation(spec: ConversationSpec, directory: Path) -> Conversation:
    """Synthesize one conversation into `directory` (WAV + its turns); returns it with its turns."""
    missing = missing_tools()
    if missing:
        raise SpeechDataError(f"missing {', '.join(missing)}: install the Debian packages {APT_PACKAGES}")
    unknown = sorted({line.speaker for line in spec.lines} - set(spec.voices))
    if unknown:
        raise ValueError(f"{spec.conversation_id}: lines of speakers without a voice: {', '.join(unknown)}")
    directory.mkdir(parents=True, exist_ok=True)
    turns: list[Turn] = []
    mix: list[str] = []
    previous_end = 0.0
    for index, line in enumerate(spec.lines):
        part = directory / f"{spec.conversation_id}.{index:02d}.wav"
        seconds = _speak_trimmed(spec.voices[line.speaker], line.text, part)
        start = round(max(0.0, previous_end + line.gap_seconds), 3)
        placed = directory / f"{spec.conversation_id}.{index:02d}.placed.wav"
        _run(["sox", str(part), str(placed), "pad", f"{start:.3f}", "0"])
        part.unlink()
        mix += ["-v", "1", str(placed)]
        turns.append(Turn(line.speaker, start, round(start + seconds, 3), line.text))
        previous_end = max(previous_end, start + seconds)
    wav = directory / f"{spec.conversation_id}.wav"
    # Silence of 0.5 s at each end, as a recording would have; every turn moves by the same 0.5 s.
    lead = 0.5
    inputs = mix if len(spec.lines) > 1 else mix + ["-v", "0", mix[-1]]
    _run(["sox", "-m", *inputs, "-r", str(SAMPLE_RATE), "-c", "1", "-b", "16", str(wav),
          "pad", f"{lead}", f"{lead}"])
    for placed in directory.glob(f"{spec.conversation_id}.*.placed.wav"):
        placed.unlink()
    shifted = tuple(Turn(t.speaker, round(t.start + lead, 3), round(t.end + lead, 3), t.text) for t in turns)
    return Conversation(spec.conversation_id, tuple(sorted(spec.voices)), shifted, wav, _duration(wav))


def _entry(conversation: Conversation) -> dict:
    return {"id": conversation.conversation_id, "speakers": list(conversation.speakers),
            "wav": conversation.wav.name, "duration_seconds": conversation.duration_seconds,
            "turns": [{"speaker": t.speaker, "start": t.start, "end": t.end, "text": t.text}
                      for t in conversation.turns]}


def _conversation(directory: Path, entry: dict) -> Conversation:
    turns = tuple(Turn(str(t["speaker"]), float(t["start"]), float(t["end"]), str(t["text"])) for t in entry["turns"])
    return Conversation(str(entry["id"]), tuple(entry["speakers"]), turns, directory / entry["wav"],
                        float(entry["duration_seconds"]))


def ensure_conversations(directory: Path | None = None,
                         conversations: tuple[ConversationSpec, ...] = CONVERSATIONS) -> list[Conversation]:
    """The conversations, made on first use (raises SpeechDataError naming missing Debian packages)."""
    directory = Path(directory) if directory else default_directory(conversations)
    if not (directory / "manifest.json").exists():
        directory.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".diarization-", dir=directory.parent))
        work.chmod(0o755)
        try:
            made = [build_conversation(spec, work) for spec in conversations]
            manifest = {"schema": SCHEMA, "identity": dataset_identity(conversations),
                        "conversations": [_entry(c) for c in made]}
            (work / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
            try:
                work.rename(directory)  # atomic: a concurrent maker either wins or finds the finished set
            except OSError:
                if not (directory / "manifest.json").exists():
                    raise
        finally:
            if work.exists():
                shutil.rmtree(work, ignore_errors=True)
    manifest = json.loads((directory / "manifest.json").read_text())
    if manifest.get("schema") != SCHEMA:
        raise SpeechDataError(f"{directory}/manifest.json is not a {SCHEMA} manifest")
    return [_conversation(directory, entry) for entry in manifest["conversations"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="directory for the set (default: a cache dir)")
    args = parser.parse_args(argv)
    try:
        conversations = ensure_conversations(args.out)
    except SpeechDataError as error:
        print(f"make_diarization_data: {error}", file=sys.stderr)
        return 1
    for c in conversations:
        print(f"{c.conversation_id}: {c.speaker_count} speakers, {len(c.turns)} turns, {c.duration_seconds:.1f} s",
              file=sys.stderr)
    print((args.out or default_directory()) / "manifest.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
