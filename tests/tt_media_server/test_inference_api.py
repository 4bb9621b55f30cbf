"""The legacy ``POST /inference`` body as documented: numbers as strings, temperature up to 10.

These modules import no torch, so they run in the dev venv (the route's server test is in
test_text_server.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

MEDIA_ROOT = Path(__file__).resolve().parents[2] / "tt-media-server"
if str(MEDIA_ROOT) not in sys.path:
    sys.path.insert(0, str(MEDIA_ROOT))

from media_server.api.legacy_body import parse_legacy  # noqa: E402
from media_server.runners.text_params import InvalidTextRequest, TextRequest  # noqa: E402


def body(**fields) -> bytes:
    return json.dumps({"text": "What is the capital of France?", **fields}).encode()


def test_the_documented_request_with_numbers_as_strings_is_accepted() -> None:
    request = parse_legacy(body(temperature="1", max_tokens="32", top_k="40", top_p="0.9", stop_sequence="\n"))
    assert (request.temperature, request.max_tokens, request.top_k, request.top_p) == (1.0, 32, 40, 0.9)
    assert request.stop == ["\n"]
    assert parse_legacy(body(temperature=0.5, max_tokens=8)).max_tokens == 8  # JSON numbers as before


@pytest.mark.parametrize("temperature", ["10", 10, "0.1", 9.5, 0])
def test_temperature_takes_the_documented_range_up_to_10(temperature) -> None:
    assert parse_legacy(body(temperature=temperature)).temperature == float(temperature)


@pytest.mark.parametrize("fields, message", [
    ({"temperature": "hot"}, "temperature: expected a number, got 'hot'"),
    ({"temperature": "nan"}, "temperature: expected a finite number, got 'nan'"),
    ({"max_tokens": "32.5"}, "max_tokens: expected an integer, got '32.5'"),
    ({"top_k": "forty"}, "top_k: expected an integer, got 'forty'"),
    ({"top_p": ""}, "top_p: expected a number, got ''"),
    ({"temperature": "10.5"}, "temperature: 10.5 is out of range [0, 10]"),
    ({"max_tokens": "2049"}, "max_tokens: 2049 is out of range [1, 2048]"),
    ({"top_k": "0"}, "top_k: 0 is out of range [1, 1000]"),
])
def test_strings_that_are_not_numbers_or_out_of_range_name_the_field(fields, message) -> None:
    with pytest.raises(InvalidTextRequest) as info:
        parse_legacy(body(**fields))
    assert str(info.value) == message


def test_the_openai_routes_keep_openai_temperature_bound() -> None:
    """Only the legacy API documents temperature up to 10; the OpenAI routes keep OpenAI's 2."""
    with pytest.raises(InvalidTextRequest, match=r"temperature: 5 is out of range \[0, 2\]"):
        TextRequest(prompt="x", temperature=5).validate(cap_max_tokens=False)
