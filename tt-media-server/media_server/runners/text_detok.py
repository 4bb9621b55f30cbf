"""Token ids -> streamed text: incremental detokenization and exact stop-sequence cutting.

Why incremental: decoding one token alone is wrong for byte-level BPE (a multi-byte character
spans tokens; some tokenizers drop a leading space), and re-decoding the whole output every step
costs O(n) per token. ``IncrementalDetokenizer`` decodes a short window (the previous token plus
the new ones) and emits only the text that is final, holding back a trailing U+FFFD (an
unfinished UTF-8 sequence).

Why a hold-back for stops: a stop string may arrive split over several tokens, so text that
could still be the start of a stop string is held until it is known not to be; when a stop
matches, the output ends exactly before it and the held text is dropped.
"""
from __future__ import annotations

from typing import Protocol


class Decoder(Protocol):
    def decode(self, ids: list[int]) -> str: ...


class IncrementalDetokenizer:
    """Feeds token ids one by one; returns each step's new, final text."""

    def __init__(self, decoder: Decoder):
        self._decoder = decoder
        self._ids: list[int] = []
        self._prefix_offset = 0
        self._read_offset = 0

    def push(self, token_id: int) -> str:
        self._ids.append(token_id)
        prefix_text = self._decode(self._prefix_offset, self._read_offset)
        new_text = self._decode(self._prefix_offset, len(self._ids))
        if len(new_text) > len(prefix_text) and not new_text.endswith("\ufffd"):
            self._prefix_offset = self._read_offset
            self._read_offset = len(self._ids)
            return new_text[len(prefix_text):]
        return ""

    def flush(self) -> str:
        """Whatever is still held (an unfinished character decodes as U+FFFD)."""
        if self._read_offset >= len(self._ids):
            return ""
        prefix_text = self._decode(self._prefix_offset, self._read_offset)
        new_text = self._decode(self._prefix_offset, len(self._ids))
        self._prefix_offset = self._read_offset = len(self._ids)
        return new_text[len(prefix_text):]

    def _decode(self, start: int, end: int) -> str:
        if end <= start:
            return ""
        return self._decoder.decode(self._ids[start:end])


class StopMatcher:
    """Cuts streamed text exactly before the earliest stop string."""

    def __init__(self, stops: list[str]):
        self._stops = [s for s in stops if s]
        self._hold = max((len(s) for s in self._stops), default=1) - 1
        self._pending = ""
        self.stopped = False

    def feed(self, delta: str) -> str:
        """Text that is safe to emit now; sets ``stopped`` when a stop string matched."""
        if self.stopped or not delta:
            return ""
        text = self._pending + delta
        if self._stops:
            cut = min((i for i in (text.find(s) for s in self._stops) if i >= 0), default=-1)
            if cut >= 0:
                self.stopped = True
                self._pending = ""
                return text[:cut]
        if self._hold and len(text) > self._hold:
            self._pending = text[-self._hold:]
            return text[:-self._hold]
        if self._hold:
            self._pending = text
            return ""
        return text

    def flush(self) -> str:
        """The held text, when the output ends for another reason (length, end of sequence)."""
        text, self._pending = self._pending, ""
        return "" if self.stopped else text
