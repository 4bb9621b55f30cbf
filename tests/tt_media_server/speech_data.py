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


def speech_data_module():
    name = "make_speech_data"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" / "make_speech_data.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def speech_set():
    module = speech_data_module()
    missing = module.missing_tools()
    if missing:
        message = f"speech tools missing ({', '.join(missing)}): apt-get install {module.APT_PACKAGES}"
        if os.environ.get("REQUIRE_SPEECH_TOOLS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return module.ensure_speech_data()

