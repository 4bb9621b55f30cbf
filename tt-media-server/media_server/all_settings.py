"""Every settings class of the server together: ``config.Settings`` and each component's own.

Why apart from config.py: the components' classes (speech, embeddings, text, vision, CNN) live
with their code, above the server's settings, which every layer reads; only the start-up checks
need them all at once (each class validated, a misspelt variable named), so these checks sit on
top, beside the app that runs them, and config.py imports no component.
"""
from __future__ import annotations

import difflib
import os
from typing import Iterable

from pydantic import ValidationError
from pydantic_settings import BaseSettings

from media_server.config import ConfigError, Settings, validation_lines
from media_server.embeddings.settings import EmbeddingSettings
from media_server.runners.text_slots import TextSettings
from media_server.speech.settings import SpeechSettings
from media_server.vision.cnn_settings import CnnSettings
from media_server.vision.settings import VisionSettings


def component_settings_classes() -> list[type[BaseSettings]]:
    """The settings classes of the routes and runners (speech, embeddings, text, vision, CNN), imported here
    so that every class is validated at start-up, whichever runner is served: a typo in a knob
    of a runner not served today must not wait to surface until the day it is."""
    return [SpeechSettings, EmbeddingSettings, TextSettings, VisionSettings, CnnSettings]


def check_component_settings() -> None:
    """ConfigError naming each bad variable of the component settings classes."""
    lines: list[str] = []
    for settings_cls in component_settings_classes():
        try:
            settings_cls()
        except ValidationError as exc:
            lines.extend(validation_lines(exc, settings_cls))
    if lines:
        raise ConfigError("invalid settings: " + "; ".join(dict.fromkeys(lines)))


# Variables of the environment that are read by name elsewhere (not settings fields) and so
# must not be reported as unknown.
OTHER_KNOWN_VARIABLES = {"PROMETHEUS_MULTIPROC_DIR", "TT_METAL_CACHE_ROOT", "HF_TOKEN", "HF_HOME",
                         "HF_HUB_CACHE", "HF_HUB_OFFLINE", "AUTO_DOWNLOAD_MODELS", "TT_INFERENCE_CACHE"}


def known_setting_names() -> set[str]:
    names = {name.upper() for name in Settings.model_fields}
    for settings_cls in component_settings_classes():
        names.update(name.upper() for name in settings_cls.model_fields)
    return names | OTHER_KNOWN_VARIABLES


def _dotenv_names() -> list[str]:
    """Variable names in ./.env, which the settings classes read too."""
    if not os.path.isfile(".env"):
        return []
    from dotenv import dotenv_values

    return [name for name in dotenv_values(".env") if name]


def unknown_setting_warnings(environ: Iterable[str] | None = None) -> list[str]:
    """Environment variables that look like a misspelt setting: 'NAME (did you mean KNOWN?)'.

    pydantic-settings ignores variables it does not know (the environment holds many unrelated
    ones), so a typo such as SD_3_5_FST would otherwise change nothing without a word.
    """
    known = known_setting_names()
    if environ is None:
        environ = set(os.environ) | set(_dotenv_names())
    found = []
    for name in sorted(environ):
        upper = name.upper()
        if upper in known:
            continue
        match = difflib.get_close_matches(upper, known, n=1, cutoff=0.85)
        if match:
            found.append(f"{name} (did you mean {match[0]}?)")
    return found
