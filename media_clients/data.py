"""The small real inputs the media clients send: photos, synthesized speech, sentence pairs.

- Photos: scikit-image's cat (chelsea) and coffee photos, read as the PNG files the package
  ships (nothing is decoded or re-encoded here), with the ImageNet labels a good classifier
  puts in its top 5.
- Speech: the project's espeak-ng test set (``scripts/make_speech_data.py``): known sentences,
  so a word error rate means something.
- Sentence pairs: paraphrases and unrelated sentences for the embeddings retrieval check.
"""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from contracts import REPO_ROOT


class DataUnavailable(RuntimeError):
    """An input set cannot be produced here; the message says what to install."""


@dataclass(frozen=True)
class Photo:
    name: str
    png: bytes
    #: Substrings of ImageNet labels that count as a correct answer in the top 5.
    expected: tuple[str, ...]


PHOTO_LABELS = {
    "chelsea": ("tabby", "tiger cat", "egyptian cat", "cat"),
    "coffee": ("espresso", "cup", "coffee mug", "coffeepot"),
}


def photos() -> list[Photo]:
    try:
        import skimage  # only for the location of its data files
    except ImportError:
        raise DataUnavailable("scikit-image is not installed in this venv (it ships the cat and coffee photos)") \
            from None
    data_dir = Path(skimage.__file__).parent / "data"
    out = []
    for name, expected in PHOTO_LABELS.items():
        path = data_dir / f"{name}.png"
        if not path.is_file():
            raise DataUnavailable(f"{path} is missing from scikit-image's install")
        out.append(Photo(name, path.read_bytes(), expected))
    return out


@dataclass(frozen=True)
class Clip:
    clip_id: str
    text: str
    wav: bytes
    seconds: float


def _speech_module():
    path = REPO_ROOT / "scripts" / "make_speech_data.py"
    spec = importlib.util.spec_from_file_location("make_speech_data", path)
    if spec is None or spec.loader is None:
        raise DataUnavailable(f"{path} not found")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def speech_clips() -> list[Clip]:
    """The synthesized sentences as 16 kHz WAV clips (made once, then cached)."""
    module = _speech_module()
    try:
        speech = module.ensure_speech_data()
    except module.SpeechDataError as exc:
        raise DataUnavailable(str(exc)) from None
    return [Clip(c.clip_id, c.text, Path(c.wav).read_bytes(), float(c.duration_seconds)) for c in speech.clips]


#: (anchor, paraphrase, unrelated): the paraphrase must score closer to the anchor than the unrelated sentence.
SENTENCE_TRIPLES: tuple[tuple[str, str, str], ...] = (
    ("The cat is sleeping on the sofa.", "A cat naps on the couch.", "Interest rates rose again this quarter."),
    ("How do I reset my password?", "What are the steps to change a forgotten password?",
     "The train to Boston leaves at noon."),
    ("It is raining heavily outside.", "There is a downpour outdoors.", "She plays the violin in an orchestra."),
    ("The restaurant serves excellent pasta.", "That place has really good spaghetti.",
     "The satellite entered orbit around Mars."),
    ("He bought a new laptop for work.", "He purchased a new computer for his job.",
     "Tulips bloom in the spring."),
    ("The meeting was moved to Friday.", "We rescheduled the meeting for Friday.",
     "Penguins live in the southern hemisphere."),
    ("Drink plenty of water when exercising.", "Stay hydrated during workouts.",
     "The museum opens a new exhibit on Roman coins."),
    ("The stock market fell sharply today.", "Share prices dropped steeply today.",
     "My grandmother knits warm scarves."),
)

IMAGE_PROMPTS = ("a red bicycle leaning against a brick wall", "a lighthouse on a cliff at sunset",
                 "a bowl of fruit on a wooden table", "a snowy mountain village at night")
