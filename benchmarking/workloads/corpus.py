"""Prompt text from a local source, cut to exact token lengths (the workloads' prompt maker).

Why the project's own documentation: it is real prose and code, ships with every checkout (no
download, no hub), and its tokens look like what users send, unlike random vocabulary ids. The
files are read once, tokenised once, and prompts are windows of that token stream, decoded and
re-checked to the exact length asked for (``prompts.exact_text``; a prompt that still drifts is
kept and its measured length reported, never hidden).

Shared prefixes are built in token space: each block id (a Mooncake ``hash_ids`` entry, or a
shared-prefix workload's system prompt) maps to a fixed window of the stream, so two prompts that
share block ids share the same token ids up front, which is what a server's prefix cache keys on.
"""
from __future__ import annotations

import hashlib
import random
from pathlib import Path

from benchmarking.prompts import Prompt, exact_text

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE_FILES = ("README.md", "docs/architecture.md", "benchmarking/README.md", "DEVELOPERS.md")
_MIN_STREAM_TOKENS = 4096


def source_text() -> str:
    """The local text prompts are cut from: the repository's own documents that exist."""
    parts = []
    for rel in SOURCE_FILES:
        path = REPO_ROOT / rel
        if path.is_file():
            parts.append(path.read_text(encoding="utf-8", errors="replace"))
    for path in sorted((REPO_ROOT / "docs").glob("*.md")):
        if path.name != "architecture.md":
            parts.append(path.read_text(encoding="utf-8", errors="replace"))
    text = "\n\n".join(parts)
    if not text.strip():
        raise FileNotFoundError(f"no prompt source text under {REPO_ROOT} ({', '.join(SOURCE_FILES)})")
    return text


def _paragraph_chunks(text: str, limit: int = 6000) -> list[str]:
    """The text in pieces of at most about ``limit`` characters, cut at paragraph ends: a server's
    /tokenize may refuse a text longer than the model's context."""
    out, size = [[]], 0
    for para in text.split("\n\n"):
        if size + len(para) > limit and out[-1]:
            out.append([])
            size = 0
        out[-1].append(para)
        size += len(para) + 2
    return ["\n\n".join(piece) + "\n\n" for piece in out if piece]


class Corpus:
    """A token stream over the local text; ``window(offset, n)`` and block ids give exact-length ids."""

    source = "repository documents"

    def __init__(self, tokenizer, text: str | None = None):
        self.tok = tokenizer
        text = text if text is not None else source_text()
        self.words = text.split() if tokenizer is None else []
        self.ids: list[int] = [i for part in _paragraph_chunks(text) for i in tokenizer.encode(part)] \
            if tokenizer is not None else []
        while self.ids and len(self.ids) < _MIN_STREAM_TOKENS:  # a short source repeats, never noise
            self.ids = self.ids + self.ids

    def _offset(self, key: str) -> int:
        size = len(self.ids) or len(self.words)
        return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % size

    def window(self, key: str, n: int) -> list[int]:
        """``n`` token ids of the stream starting at a place fixed by ``key`` (wrapping around)."""
        start, ids = self._offset(key), self.ids
        out = []
        while len(out) < n:
            take = ids[start:start + n - len(out)]
            out.extend(take)
            start = 0
        return out

    def _words(self, key: str, n: int) -> str:
        start, words = self._offset(key), self.words
        return " ".join(words[(start + i) % len(words)] for i in range(n))

    def prompt(self, key: str, n: int, prefix_ids: list[int] | None = None) -> Prompt:
        """A prompt of exactly ``n`` tokens: ``prefix_ids`` (shared blocks) then a window chosen by ``key``."""
        if self.tok is None:
            return Prompt(self._words(key, n), None, n)
        prefix = list(prefix_ids or [])[:n]
        # exact_text trims or extends only the end, so the shared head decodes to the same text in
        # every prompt that carries it
        text, length = exact_text(self.tok, prefix + self.window(key, n - len(prefix)), n, random.Random(key))
        return Prompt(text, length, n)

    def shared_prompt(self, prefix_key: str, prefix_len: int, key: str, n: int) -> Prompt:
        """A prompt of ``n`` tokens whose first ``prefix_len`` are the window named ``prefix_key``
        (equal in every prompt with that key) and the rest its own (the window named ``key``)."""
        if self.tok is None:
            return Prompt(f"{self._words(prefix_key, prefix_len)} {self._words(key, n - prefix_len)}", None, n)
        return self.prompt(key, n, self.window(prefix_key, prefix_len))

    def block_prefix(self, block_ids: list[int], block_tokens: int, scope: str = "block") -> list[int]:
        """The token ids of the named blocks, in order: equal ids give equal tokens in every prompt."""
        out: list[int] = []
        for b in block_ids:
            out.extend(self.window(f"{scope}:{b}", block_tokens))
        return out

    def prefix_text(self, key: str, n: int) -> tuple[str, list[int]]:
        """A shared prefix (a system prompt) of ``n`` tokens: its text and its ids."""
        if self.tok is None:
            return self._words(key, n), []
        ids = self.window(key, n)
        return self.tok.decode(ids), ids
