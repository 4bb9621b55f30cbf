"""Scoring helpers loaded by the offline task YAMLs through lm-eval's ``!function utils.<name>``.

Imported by lm-eval from this directory (``--include_path``); keep it dependency free.
"""

from __future__ import annotations

import re


def _normalise(text: str) -> str:
    """Lower-case, drop punctuation, collapse whitespace: answers are compared word by word."""
    text = re.sub(r"[^\w\s]", " ", text.lower())
    return " ".join(text.split())


def contains_answer(reply: str, aliases: list[str]) -> bool:
    """True when any accepted answer occurs as whole word(s) in the reply.

    Whole-word matching keeps "12" from matching "120" and "red" from matching "tired".
    """
    hay = f" {_normalise(reply)} "
    return any(f" {_normalise(a)} " in hay for a in aliases if _normalise(a))


def process_contains(doc: dict, results: list[str]) -> dict[str, float]:
    """lm-eval ``process_results`` hook: one score per document under the metric ``contains``."""
    reply = results[0] if results else ""
    aliases = doc.get("aliases") or [doc["answer"]]
    return {"contains": 1.0 if contains_answer(reply, aliases) else 0.0}
