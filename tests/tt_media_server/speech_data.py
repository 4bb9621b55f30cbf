"""The synthesized speech set for the audio tests and benchmarks (scripts/make_speech_data.py).

Skips when espeak-ng/sox/ffmpeg are missing, and fails instead under REQUIRE_SPEECH_TOOLS=1 (CI
installs the Debian packages and sets it), so a CI run can never pass by skipping.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def _script_module(name: str):
    """scripts/<name>.py loaded once as module `name` (the scripts are not a package)."""
    if name not in sys.modules:
        if str(REPO_ROOT / "scripts") not in sys.path:  # as running it by path would: its `import _repo` resolves
            sys.path.append(str(REPO_ROOT / "scripts"))
        spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def speech_data_module():
    return _script_module("make_speech_data")


def require_speech_tools():
    """Skip (fail under REQUIRE_SPEECH_TOOLS=1, as .ci/run sets) when espeak-ng, sox or ffmpeg is missing."""
    module = speech_data_module()
    missing = module.missing_tools()
    if missing:
        message = f"speech tools missing ({', '.join(missing)}): apt-get install {module.APT_PACKAGES}"
        if os.environ.get("REQUIRE_SPEECH_TOOLS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return module


def speech_set():
    return require_speech_tools().ensure_speech_data()


def diarization_data_module():
    """scripts/make_diarization_data.py (espeak-ng conversations with known speaker turns)."""
    speech_data_module()  # it imports make_speech_data's helpers by name
    return _script_module("make_diarization_data")


#: A two-voice conversation nobody in the project recorded: voices and lines that the evaluation set
#: (make_diarization_data.CONVERSATIONS) does not use, with pauses and two short overlaps.
HELD_OUT_VOICES = {"A": "en-gb-x-rp+m5", "B": "en-us+f1"}
HELD_OUT_LINES = (
    ("A", "Hi, is this the help desk for the new phone system?", 0.0),
    ("B", "Yes it is, how can I help you today?", 0.7),
    ("A", "My phone shows no dial tone since this morning.", 0.5),
    ("B", "Let me check your line, can you read me the number on the back?", -0.25),
    ("A", "It says four five six, seven eight nine.", 0.9),
    ("B", "Thanks, I see the problem, your line was switched off by mistake.", 0.6),
    ("A", "Oh, that explains it, can you turn it back on?", -0.3),
    ("B", "Done, please try to make a call now.", 0.8),
)


def held_out_conversation(directory: Path):
    """The held-out conversation synthesized into `directory` (skips like speech_set without the tools)."""
    speech_set()
    module = diarization_data_module()
    spec = module.ConversationSpec("held_out", dict(HELD_OUT_VOICES),
                                   tuple(module.LineSpec(s, t, g) for s, t, g in HELD_OUT_LINES))
    return module.build_conversation(spec, directory)
