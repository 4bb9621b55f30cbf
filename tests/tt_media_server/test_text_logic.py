"""Unit tests of the text runner's pure logic: request ranges, incremental text, exact stop cuts.

These modules import no torch, so they run in the dev venv; the slot loop itself is exercised
through a real server in test_text_server.py and against the real model in test_text_model.py.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

MEDIA_ROOT = Path(__file__).resolve().parents[2] / "tt-media-server"
if str(MEDIA_ROOT) not in sys.path:
    sys.path.insert(0, str(MEDIA_ROOT))

from media_server.runners.text_backend_mock import MockTokenizer, expected_tokens  # noqa: E402
from media_server.runners.text_detok import IncrementalDetokenizer, StopMatcher  # noqa: E402
from media_server.runners.text_params import InvalidTextRequest, TextRequest  # noqa: E402


class ByteDecoder:
    """A byte-level decoder like BPE's: ids are bytes, invalid UTF-8 decodes to U+FFFD."""

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", errors="replace")


def _stream(text: str, stops: list[str]) -> tuple[str, bool]:
    detok, matcher = IncrementalDetokenizer(ByteDecoder()), StopMatcher(stops)
    out = ""
    for byte in text.encode("utf-8"):
        out += matcher.feed(detok.push(byte))
        if matcher.stopped:
            return out, True
    out += matcher.feed(detok.flush())
    return out + matcher.flush(), matcher.stopped


def test_incremental_detokenizer_never_splits_a_multibyte_character():
    detok = IncrementalDetokenizer(ByteDecoder())
    pieces = [detok.push(b) for b in "héllo €".encode("utf-8")]
    assert "".join(pieces) == "héllo €"
    assert all("\ufffd" not in piece for piece in pieces)


@pytest.mark.parametrize("text, stops, expected", [
    ("one two three four", ["three"], "one two "),
    ("one two three four", ["four", "two"], "one "),          # the earliest match wins
    ("abcabcabd", ["abd"], "abcabc"),                          # overlapping prefixes
    ("no stop here", ["xyz"], "no stop here"),                 # held text is flushed at the end
    ("ends with stop", ["stop"], "ends with "),
    ("€uro€", ["o€"], "€ur"),                                  # multi-byte stop split over tokens
])
def test_stop_sequences_cut_exactly(text, stops, expected):
    out, stopped = _stream(text, stops)
    assert out == expected
    assert stopped == (expected != text)


def test_request_ranges_name_the_field():
    ok = TextRequest(prompt="x", max_tokens=2048, top_k=1000, top_p=0.01, temperature=0.0)
    assert ok.validate() is ok
    for bad, field in [({"max_tokens": 0}, "max_tokens"), ({"max_tokens": 2049}, "max_tokens"),
                       ({"top_k": 1001}, "top_k"), ({"top_p": 0.001}, "top_p"),
                       ({"top_p": 1.5}, "top_p"), ({"temperature": -0.1}, "temperature"),
                       ({"temperature": 2.5}, "temperature"), ({"max_tokens": "9"}, "max_tokens"),
                       ({"stop": [""]}, "stop"), ({"seed": 1.5}, "seed")]:
        with pytest.raises(InvalidTextRequest, match=field):
            TextRequest(prompt="x", **bad).validate()
    # The OpenAI routes let the context, not 2048, bound max_tokens.
    TextRequest(prompt="x", max_tokens=4000).validate(cap_max_tokens=False)


def test_request_round_trips_through_a_dict():
    request = TextRequest(messages=[{"role": "user", "content": "hi"}], stop=["a"], seed=3,
                          extra={"client": "k"})
    back = TextRequest.from_dict(request.to_dict())
    assert back == request
    assert TextRequest.from_dict({"prompt": "p", "stop": "x"}).stop == ["x"]


def test_mock_streams_are_per_prompt_and_reproducible():
    tokenizer = MockTokenizer()
    a, b = tokenizer.encode("user a"), tokenizer.encode("user b")
    assert expected_tokens(a, 20) == expected_tokens(a, 20)
    assert expected_tokens(a, 20) != expected_tokens(b, 20)
    assert tokenizer.prompt_text(a) == "user a"
    assert expected_tokens(a, 5, eos_after=3)[3] == 2
