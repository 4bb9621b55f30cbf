"""Prompts where a speculative n-gram draft can hit (``--workflow-args dataset=lookup``).

Why a prompt set of its own: prompt-lookup (n-gram) speculation drafts the tokens that followed the last few
generated tokens earlier in the prompt. On free generation from random tokens it rarely finds a match, on
quoting, editing code or continuing a repeating structure it often does; a user deciding whether speculation
pays must see both sides on their own server. Each prompt asks for text that repeats what it holds: a passage
to quote, a function to rewrite with one name changed, a table to continue in the same shape. The body is
trimmed to the point's input length (the instruction around it kept whole); a token merge across the joins can
shift the length by a token, which is reported as drift (``Prompt.token_len``), never corrected silently.
"""
from __future__ import annotations

import random

from benchmarking.prompts import Prompt

_PASSAGE = (
    "The river rises in the hills above the town and runs south through the old mill, under the stone bridge "
    "and past the market square. In spring the water is high and fast; in late summer it is slow and clear, and "
    "children wade across at the ford below the church. The mill has not ground corn for fifty years, but its "
    "wheel still turns when the river is high, and the sound of it carries across the square on quiet evenings. "
)
_CODE = (
    "def total_price(items, tax_rate):\n"
    "    total = 0\n"
    "    for item in items:\n"
    "        total = total + item.price * item.quantity\n"
    "    total = total + total * tax_rate\n"
    "    return round(total, 2)\n\n"
    "def count_items(items):\n"
    "    count = 0\n"
    "    for item in items:\n"
    "        count = count + item.quantity\n"
    "    return count\n\n"
)
_TABLE_ROW = "| {n} | item-{n:03d} | {q} | {p}.00 | in stock |\n"

#: (instruction before the body, instruction after it): the answer is meant to repeat the body
_TEMPLATES = {
    "quote": ("Copy the following text exactly, word for word.\n\nText:\n", "\nCopy:\n"),
    "code": ("Rewrite the following Python code, renaming the variable `total` to `amount` and changing "
             "nothing else.\n\n```python\n", "```\n\nRewritten code:\n```python\n"),
    "table": ("Continue this table in exactly the same format.\n\n", ""),
}
KINDS = tuple(_TEMPLATES)


def _body(kind: str, rng: random.Random, words: int) -> str:
    """At least ``words`` words of the kind's repeating material (more is trimmed by the caller)."""
    if kind == "table":
        start = rng.randrange(1, 50)
        rows = [_TABLE_ROW.format(n=start + i, q=rng.randrange(1, 9), p=rng.randrange(2, 99))
                for i in range(words // 8 + 2)]
        return "| # | name | quantity | price | status |\n|---|---|---|---|---|\n" + "".join(rows)
    unit = _PASSAGE if kind == "quote" else _CODE
    repeats = words // len(unit.split()) + 2
    return unit * repeats


def lookup_prompts(tok, isl: int, n: int, seed: int = 0) -> list[Prompt]:
    """``n`` prompts of about ``isl`` tokens, cycling quote / code / table (seeded: the same seed, the same
    prompts); the body is cut to fill what the instructions leave."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = KINDS[(i + seed) % len(KINDS)]
        head, tail = _TEMPLATES[kind]
        body = _body(kind, rng, isl)
        if tok is None:  # whitespace words: drift unknown
            budget = max(1, isl - len(head.split()) - len(tail.split()))
            out.append(Prompt(head + " ".join(body.split()[:budget]) + "\n" + tail, None, isl))
            continue
        budget = max(1, isl - len(tok.encode(head)) - len(tok.encode(tail)))
        text = head + tok.decode(tok.encode(body)[:budget]) + tail
        out.append(Prompt(text, len(tok.encode(text)), isl))
    return out
