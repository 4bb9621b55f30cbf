#!/usr/bin/env python3
"""Synthesize the project's speech test set: known English sentences spoken by espeak-ng, as WAV and MP3.

Why synthesized: a word error rate needs audio whose words are known exactly, and the project
ships no recordings. espeak-ng (Debian package) speaks each sentence, sox resamples it to 16 kHz
mono 16-bit WAV (what Whisper hears), and ffmpeg encodes the same audio as MP3, so every test can
check that the two containers give the same text. A long file (every sentence, separated by
silence) exercises the server's long-audio chunking.

Nothing binary is committed: the files are made on first use, in a cache directory keyed by the
sentences, the voice and the espeak-ng version, and re-used afterwards (a few hundred KB in all).

Usage:
    python3 scripts/make_speech_data.py [--out DIR]     # prints the manifest path

Stdlib only (imported by the tests in the dev venv and by the benchmarks in the media-server venv).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

TOOLS = ("espeak-ng", "sox", "ffmpeg")
APT_PACKAGES = "espeak-ng sox ffmpeg"
VOICE = "en-us"
WORDS_PER_MINUTE = 150
SILENCE_SECONDS = 0.6
SCHEMA = "tt-speech-data/1"

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Please call Stella and ask her to bring these things with her from the store.",
    "The weather today is sunny with a light breeze from the west.",
    "Open the window and let some fresh air into the room.",
    "She sells seashells by the seashore every summer morning.",
    "We will meet at the library at three o'clock tomorrow afternoon.",
    "A large number of people waited patiently in the rain for the bus.",
    "The server answered every request in less than one second.",
    "My favorite color is green because it reminds me of the forest.",
    "He turned off the lights and went to sleep early last night.",
    "The children played football in the park after school.",
    "Please send me the report before the end of the week.",
    "The train to the city leaves every twenty minutes.",
    "My brother bought a new car last month.",
    "The coffee in this cafe is strong and very hot.",
    "We need more paper for the printer in the office.",
    "The doctor told him to drink more water every day.",
    "There are seven days in a week and twelve months in a year.",
    "The old bridge was closed for repairs during the winter.",
    "She wrote a long letter to her friend in Canada.",
    "The music was so loud that nobody could hear the phone.",
    "Turn left at the next corner and walk two blocks.",
    "The garden is full of red and yellow flowers in spring.",
    "I forgot my keys on the kitchen table this morning.",
    "The teacher asked the students to read the first chapter.",
    "Fresh bread from the bakery smells wonderful.",
    "The plane landed safely despite the strong wind.",
    "They moved to a small house near the river.",
    "Remember to save your work before you close the computer.",
    "The museum is open from nine in the morning until five.",
)
#: The long clip (every sentence of it in one file, for chunking and streaming tests): the first ten.
LONG_CLIP_SENTENCES = 10


class SpeechDataError(RuntimeError):
    """The test set cannot be made (a tool is missing or failed); the message says what to install."""


@dataclass(frozen=True)
class SpeechClip:
    """One synthesized utterance and the text it speaks."""

    clip_id: str
    text: str
    wav: Path
    mp3: Path
    duration_seconds: float


@dataclass(frozen=True)
class SpeechSet:
    """The sentences, one clip each, and the long clip that joins them all."""

    directory: Path
    clips: tuple[SpeechClip, ...]
    long_clip: SpeechClip

    @property
    def total_seconds(self) -> float:
        return sum(clip.duration_seconds for clip in self.clips)


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def default_directory() -> Path:
    root = Path(os.environ.get("TT_SPEECH_DATA_DIR") or Path.home() / ".cache" / "tt-inference-server" / "speech-data")
    return root / _cache_key()


def generator_version() -> str:
    """espeak-ng's own version line (the synthesized audio depends on it), or 'none'."""
    if not shutil.which("espeak-ng"):
        return "none"
    return _run(["espeak-ng", "--version"]).strip().split("  Data at:")[0].strip()


def dataset_identity() -> str:
    """What the set's words and voice are, independent of the synthesizer build: 'N sentences, voice,
    wpm (sha256 ...)'. Scores measured on one identity are comparable with another run's only when
    it matches."""
    material = json.dumps({"sentences": SENTENCES, "voice": VOICE, "wpm": WORDS_PER_MINUTE,
                           "silence": SILENCE_SECONDS, "schema": SCHEMA, "long": LONG_CLIP_SENTENCES})
    digest = hashlib.sha256(material.encode()).hexdigest()[:12]
    return f"speech set {len(SENTENCES)} sentences, {VOICE}, {WORDS_PER_MINUTE} wpm (sha256 {digest})"


def _cache_key() -> str:
    version = _run(["espeak-ng", "--version"]).strip() if shutil.which("espeak-ng") else "none"
    material = json.dumps({"sentences": SENTENCES, "voice": VOICE, "wpm": WORDS_PER_MINUTE,
                           "silence": SILENCE_SECONDS, "espeak": version, "schema": SCHEMA,
                           "long": LONG_CLIP_SENTENCES})
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def _run(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SpeechDataError(f"{command[0]} failed: {error}") from None
    if done.returncode != 0:
        raise SpeechDataError(f"{' '.join(command[:3])} ... exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return done.stdout


def _duration(wav: Path) -> float:
    return float(_run(["soxi", "-D", str(wav)]).strip())


def _speak(text: str, wav: Path, work: Path) -> None:
    raw = work / (wav.stem + ".raw.wav")
    _run(["espeak-ng", "-v", VOICE, "-s", str(WORDS_PER_MINUTE), "-w", str(raw), text])
    _run(["sox", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(wav)])


def _to_mp3(wav: Path, mp3: Path) -> None:
    _run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-i", str(wav),
          "-codec:a", "libmp3lame", "-b:a", "32k", str(mp3)])


def _make(directory: Path) -> None:
    missing = missing_tools()
    if missing:
        raise SpeechDataError(f"missing {', '.join(missing)}: install the Debian packages {APT_PACKAGES}")
    directory.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".speech-", dir=directory.parent))
    work.chmod(0o755)
    try:
        entries = []
        for index, text in enumerate(SENTENCES):
            clip_id = f"s{index:02d}"
            wav, mp3 = work / f"{clip_id}.wav", work / f"{clip_id}.mp3"
            _speak(text, wav, work)
            _to_mp3(wav, mp3)
            entries.append({"id": clip_id, "text": text, "wav": wav.name, "mp3": mp3.name,
                            "duration_seconds": _duration(wav)})
        silence = work / "silence.wav"
        _run(["sox", "-n", "-r", "16000", "-c", "1", "-b", "16", str(silence), "trim", "0", str(SILENCE_SECONDS)])
        parts = []
        for entry in entries[:LONG_CLIP_SENTENCES]:
            parts += [str(work / entry["wav"]), str(silence)]
        long_wav, long_mp3 = work / "long.wav", work / "long.mp3"
        _run(["sox", *parts, str(long_wav)])
        _to_mp3(long_wav, long_mp3)
        long_entry = {"id": "long", "text": " ".join(SENTENCES[:LONG_CLIP_SENTENCES]), "wav": long_wav.name,
                      "mp3": long_mp3.name,
                      "duration_seconds": _duration(long_wav)}
        for leftover in work.glob("*.raw.wav"):
            leftover.unlink()
        silence.unlink()
        manifest = {"schema": SCHEMA, "voice": VOICE, "words_per_minute": WORDS_PER_MINUTE,
                    "clips": entries, "long": long_entry}
        (work / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        try:
            work.rename(directory)  # atomic: a concurrent maker either wins or finds the finished set
        except OSError:
            if not (directory / "manifest.json").exists():
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def _clip(directory: Path, entry: dict) -> SpeechClip:
    return SpeechClip(clip_id=entry["id"], text=entry["text"], wav=directory / entry["wav"],
                      mp3=directory / entry["mp3"], duration_seconds=float(entry["duration_seconds"]))


def ensure_speech_data(directory: Path | None = None) -> SpeechSet:
    """The test set, made on first use; raises SpeechDataError naming the missing Debian packages."""
    directory = Path(directory) if directory else default_directory()
    if not (directory / "manifest.json").exists():
        _make(directory)
    manifest = json.loads((directory / "manifest.json").read_text())
    if manifest.get("schema") != SCHEMA:
        raise SpeechDataError(f"{directory}/manifest.json is not a {SCHEMA} manifest")
    return SpeechSet(directory=directory, clips=tuple(_clip(directory, entry) for entry in manifest["clips"]),
                     long_clip=_clip(directory, manifest["long"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="directory for the set (default: a cache dir)")
    args = parser.parse_args(argv)
    try:
        speech = ensure_speech_data(args.out)
    except SpeechDataError as error:
        print(f"make_speech_data: {error}", file=sys.stderr)
        return 1
    print(f"{len(speech.clips)} clips, {speech.total_seconds:.1f} s of speech, long clip "
          f"{speech.long_clip.duration_seconds:.1f} s", file=sys.stderr)
    print(speech.directory / "manifest.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
