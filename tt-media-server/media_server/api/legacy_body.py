"""The legacy ``POST /inference`` body -> a ``TextRequest`` (no web framework, so it is tested alone).

Fields ``text`` (required), ``temperature``, ``top_k``, ``top_p``, ``max_tokens``, ``stop_sequence``;
numbers as JSON numbers or as numeric strings, the way the documented requests send them.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

from media_server.runners.text_params import LEGACY_LIMITS, InvalidTextRequest, TextRequest

DEFAULTS = {"temperature": 1.0, "top_k": 20, "top_p": 0.9, "max_tokens": 128}
FIELDS = ("text", "temperature", "top_k", "top_p", "max_tokens", "stop_sequence")
INTEGER_FIELDS = frozenset({"top_k", "max_tokens"})
_INTEGER = re.compile(r"\s*[+-]?[0-9]{1,12}\s*")


def legacy_number(key: str, value: Any) -> Any:
    """A numeric string as the number it spells (``"32"`` -> 32, ``"0.7"`` -> 0.7); other values unchanged.

    Why: the documented requests send every number as a string. A string that spells no number is
    refused here, naming the field; ranges and JSON numbers are checked by ``TextRequest.validate``.
    """
    if not isinstance(value, str):
        return value
    if key in INTEGER_FIELDS:
        if not _INTEGER.fullmatch(value):
            raise InvalidTextRequest(f"{key}: expected an integer, got {value!r}")
        return int(value)
    try:
        number = float(value)
    except ValueError:
        raise InvalidTextRequest(f"{key}: expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise InvalidTextRequest(f"{key}: expected a finite number, got {value!r}")
    return number


def parse_legacy(raw: bytes) -> TextRequest:
    """The request record for a legacy body; InvalidTextRequest names the bad field."""
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidTextRequest(f"malformed JSON: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidTextRequest("the body must be a JSON object")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise InvalidTextRequest(f"unknown field(s): {', '.join(unknown)}; expected "
                                 + ", ".join(FIELDS))
    text = body.get("text")
    if not isinstance(text, str) or not text:
        raise InvalidTextRequest("text: expected a non-empty string")
    values = {key: body.get(key, default) for key, default in DEFAULTS.items()}
    for key, value in values.items():
        if value is None:
            raise InvalidTextRequest(f"{key}: must not be null")
        values[key] = legacy_number(key, value)
    stop = body.get("stop_sequence")
    if stop is None or stop == "":
        stops = []
    elif isinstance(stop, str):
        stops = [stop]
    elif isinstance(stop, list):
        stops = stop
    else:
        raise InvalidTextRequest("stop_sequence: expected a string or a list of strings")
    request = TextRequest(prompt=text, max_tokens=values["max_tokens"], stop=stops,
                          temperature=values["temperature"], top_k=values["top_k"],
                          top_p=values["top_p"])
    if isinstance(request.top_k, int) and not isinstance(request.top_k, bool) and request.top_k < 1:
        raise InvalidTextRequest(f"top_k: {request.top_k} is out of range [1, 1000]")
    return request.validate(limits=LEGACY_LIMITS)
