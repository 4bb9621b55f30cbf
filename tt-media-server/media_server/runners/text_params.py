"""The text runner's request record: what one user asks the slot loop to generate.

The API routes build a ``TextRequest`` from the client's JSON, check it with ``validate()``
(ranges come from ``LIMITS`` so the routes and the runner agree), and send ``to_dict()`` to the
worker process; the runner rebuilds it with ``from_dict``. Plain data only: it crosses a pipe.
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

SCHEMA = "tt-text-request/1"


@dataclasses.dataclass(frozen=True)
class Range:
    """An inclusive numeric range a parameter must fall in."""

    low: float
    high: float

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


# The OpenAI routes' ranges (temperature as OpenAI's API bounds it).
LIMITS: dict[str, Range] = {
    "max_tokens": Range(1, 2048),
    "top_k": Range(1, 1000),
    "top_p": Range(0.01, 1.0),
    "temperature": Range(0.0, 2.0),
}
# The legacy streaming inference API documents temperature up to 10 (0 stays greedy); the runner
# checks every request against these, the widest ranges any route admits.
LEGACY_LIMITS: dict[str, Range] = {**LIMITS, "temperature": Range(0.0, 10.0)}


class InvalidTextRequest(ValueError):
    """A request the runner cannot serve; the message names the field. Maps to HTTP 400."""

    status = 400


@dataclasses.dataclass
class TextRequest:
    """One generation request for the slot loop.

    prompt: raw prompt text (completions, legacy API); ignored when messages is set.
    messages: chat messages [{"role", "content"}] rendered with the model's chat template.
    max_tokens: most tokens to generate (None: up to the context limit, capped at 2048).
    stop: strings that end the output; the output is cut just before the first match.
    temperature: 0 means greedy (argmax); otherwise logits are divided by it.
    top_k: sample among the k most likely tokens (None or 0: no limit).
    top_p: sample among the smallest set whose probability reaches p (1.0: no limit).
    seed: per-request random seed, so a sampled output is reproducible.
    ignore_eos: keep generating past the end-of-sequence token (benchmarks).
    min_tokens: the end-of-sequence token is suppressed until this many tokens are generated.
    """

    prompt: str = ""
    messages: list[dict[str, Any]] | None = None
    max_tokens: int | None = None
    stop: list[str] = dataclasses.field(default_factory=list)
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float = 1.0
    seed: int | None = None
    ignore_eos: bool = False
    min_tokens: int = 0
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    schema: ClassVar[str] = SCHEMA

    def validate(self, cap_max_tokens: bool = True, limits: dict[str, Range] = LIMITS) -> "TextRequest":
        """Raise InvalidTextRequest naming the first bad field; returns self.

        cap_max_tokens: hold max_tokens to LIMITS (the legacy API); the OpenAI routes pass
        False and let the model's context bound it (the runner checks prompt + max_tokens).
        limits: the ranges to hold (LIMITS for the OpenAI routes, LEGACY_LIMITS for /inference).
        """
        if self.messages is None and not isinstance(self.prompt, str):
            raise InvalidTextRequest("prompt: expected a string")
        if self.messages is not None:
            if not isinstance(self.messages, list) or not self.messages:
                raise InvalidTextRequest("messages: expected a non-empty list")
            for index, message in enumerate(self.messages):
                if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                    raise InvalidTextRequest(f"messages[{index}]: expected {{'role', 'content'}}")
                if not isinstance(message.get("content", ""), str):
                    raise InvalidTextRequest(f"messages[{index}].content: only text content is "
                                             "supported")
        elif not self.prompt:
            raise InvalidTextRequest("prompt: must not be empty")
        if cap_max_tokens:
            self._check_number("max_tokens", self.max_tokens, limits, integer=True, optional=True)
        elif self.max_tokens is not None and (isinstance(self.max_tokens, bool) or not isinstance(
                self.max_tokens, int) or self.max_tokens < 1):
            raise InvalidTextRequest(f"max_tokens: expected an integer >= 1, got {self.max_tokens!r}")
        self._check_number("temperature", self.temperature, limits)
        self._check_number("top_p", self.top_p, limits)
        if self.top_k not in (None, 0):
            self._check_number("top_k", self.top_k, limits, integer=True)
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)):
            raise InvalidTextRequest("seed: expected an integer")
        if not isinstance(self.stop, list) or not all(isinstance(s, str) and s for s in self.stop):
            raise InvalidTextRequest("stop: expected a non-empty string or a list of them")
        if len(self.stop) > 16:
            raise InvalidTextRequest("stop: at most 16 stop sequences")
        if isinstance(self.min_tokens, bool) or not isinstance(self.min_tokens, int) or not (
                0 <= self.min_tokens <= (self.max_tokens or 1_000_000)):
            raise InvalidTextRequest(f"min_tokens: {self.min_tokens!r} must be an integer in "
                                     "[0, max_tokens]")
        if not isinstance(self.ignore_eos, bool):
            raise InvalidTextRequest("ignore_eos: expected a boolean")
        return self

    def _check_number(self, name: str, value: Any, limits: dict[str, Range], integer: bool = False,
                      optional: bool = False) -> None:
        if value is None and optional:
            return
        kinds = (int,) if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise InvalidTextRequest(f"{name}: expected {'an integer' if integer else 'a number'}, "
                                     f"got {value!r}")
        limit = limits[name]
        if not limit.contains(value):
            raise InvalidTextRequest(f"{name}: {value!r} is out of range "
                                     f"[{_fmt(limit.low)}, {_fmt(limit.high)}]")

    @property
    def greedy(self) -> bool:
        return self.temperature <= 1e-5

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        data.update(self.extra)
        data["schema"] = self.schema
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TextRequest":
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known and k != "schema"}
        stop = values.get("stop")
        if isinstance(stop, str):
            values["stop"] = [stop]
        elif stop is None:
            values["stop"] = []
        return cls(**values, extra=extra)


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
