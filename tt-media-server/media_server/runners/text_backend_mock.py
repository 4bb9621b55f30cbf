"""A fake backend for the slot loop: no model, fake tokens, the same engine code path.

It is a fake and says so: its vocabulary is the words ``t3 .. t511`` and each user's token
sequence is a pure function of that user's prompt (``expected_tokens``), so tests can check
that every user receives exactly its own tokens, and benchmarks can measure the server's own
overhead per token (``TEXT_MOCK_STEP_MS`` stands in for the device's time per decode step).
A prompt containing ``<mock-eos-after=N>`` makes the fake model emit end-of-sequence after N
tokens.
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
import time

VOCAB_SIZE = 512
EOS_ID = 2
# The fake device is polled like a real one (TT-Metal's host spins on the completion queue):
# sleep until this close to the step's end, then poll. A plain sleep overshoots by an OS
# wake-up (0.2-0.3 ms on a loaded host), which would be counted as the server's own overhead.
POLL_WINDOW_S = 0.0005
FIRST_WORD_ID = 3
_EOS_AFTER = re.compile(r"<mock-eos-after=(\d+)>")


class MockTokenizer:
    """Prompt bytes -> ids ``3 + byte`` (invertible); generated ids -> words ``t<id> ``."""

    def encode(self, text: str) -> list[int]:
        return [FIRST_WORD_ID + b for b in text.encode("utf-8")] or [1]

    def prompt_text(self, ids: list[int]) -> str:
        return bytes(i - FIRST_WORD_ID for i in ids if FIRST_WORD_ID <= i < FIRST_WORD_ID + 256).decode(
            "utf-8", errors="replace")

    def decode(self, ids: list[int]) -> str:
        return "".join(f"t{i} " for i in ids if i >= FIRST_WORD_ID)


class FakeStream:
    """The fake model's token stream for one prompt: a seeded LCG (cheap per token)."""

    def __init__(self, prompt_ids: list[int], eos_after: int | None = None):
        digest = hashlib.sha256(bytes(str(prompt_ids), "ascii")).digest()
        self._state = int.from_bytes(digest[:8], "little")
        self._eos_after = eos_after
        self.position = 0

    def next(self) -> int:
        position, self.position = self.position, self.position + 1
        self._state = (self._state * 6364136223846793005 + 1442695040888963407) % 2**64
        if self._eos_after is not None and position == self._eos_after:
            return EOS_ID
        return FIRST_WORD_ID + (self._state >> 33) % (VOCAB_SIZE - FIRST_WORD_ID)


def eos_after_of(prompt_text: str) -> int | None:
    match = _EOS_AFTER.search(prompt_text)
    return int(match.group(1)) if match else None


def expected_tokens(prompt_ids: list[int], count: int, eos_after: int | None = None) -> list[int]:
    """The tokens the fake model generates for a prompt (greedy and sampled alike)."""
    stream = FakeStream(prompt_ids, eos_after)
    return [stream.next() for _ in range(count)]


@dataclasses.dataclass
class MockSequence:
    prompt_ids: list[int] = dataclasses.field(default_factory=list)
    length: int = 0
    stream: FakeStream | None = None


class MockSlotBackend:
    """Same interface as HfSlotBackend; logits put all mass on the fake's next token."""

    name = "mock"

    def __init__(self, step_ms: float = 0.0, prefill_ms_per_token: float = 0.0,
                 max_model_len: int = 8192):
        import torch

        self._torch = torch
        self.tokenizer = MockTokenizer()
        self.step_s = step_ms / 1000
        self.prefill_s_per_token = prefill_ms_per_token / 1000
        self.max_model_len = max_model_len
        self.eos_token_ids = {EOS_ID}
        self._streams: list[FakeStream] = []
        # Row t is the logits of "next token t"; a step's logits are rows of this table (one op:
        # torch ops are ~10x slower right after the worker wakes, so fewer ops is less overhead).
        self._one_hot = torch.zeros(VOCAB_SIZE, VOCAB_SIZE)
        self._one_hot.fill_diagonal_(30.0)

    def encode_prompt(self, prompt: str) -> list[int]:
        return self.tokenizer.encode(prompt)

    def encode_chat(self, messages: list[dict]) -> list[int]:
        text = "".join(f"{m.get('role')}: {m.get('content', '')}\n" for m in messages)
        return self.tokenizer.encode(text + "assistant: ")

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def start_sequence(self) -> MockSequence:
        return MockSequence()

    def prefill(self, sequence: MockSequence, token_ids: list[int]):
        if self.prefill_s_per_token:
            _device_wait(self.prefill_s_per_token * len(token_ids))
        sequence.prompt_ids.extend(token_ids)
        sequence.length += len(token_ids)
        # The fake's stream is fixed by the whole prompt; it is (re)made after each chunk.
        sequence.stream = FakeStream(sequence.prompt_ids,
                                     eos_after_of(self.tokenizer.prompt_text(sequence.prompt_ids)))
        return self._logits([sequence.stream.next()])[0]

    def join(self, sequence: MockSequence) -> None:
        self._streams.append(sequence.stream)

    def decode_step(self, last_tokens: list[int]):
        if self.step_s:
            _device_wait(self.step_s)
        return self._logits([stream.next() for stream in self._streams])

    def remove(self, rows: list[int]) -> None:
        gone = set(rows)
        self._streams = [s for i, s in enumerate(self._streams) if i not in gone]

    @property
    def rows(self) -> int:
        return len(self._streams)

    def close(self) -> None:
        self._streams = []

    def _logits(self, tokens: list[int]):
        """One-hot-like logits: [B, VOCAB_SIZE], 30 at each row's token (read-only for the caller)."""
        if len(tokens) == 1:
            return self._one_hot[tokens[0]:tokens[0] + 1]
        return self._one_hot[tokens]


def _device_wait(seconds: float) -> None:
    """Stand-in for the device's time: sleep, then poll the last POLL_WINDOW_S until it is over."""
    deadline = time.perf_counter() + seconds
    if seconds > POLL_WINDOW_S:
        time.sleep(seconds - POLL_WINDOW_S)
    while time.perf_counter() < deadline:
        pass
