"""Generate the offline eval data (``tt_offline_*.jsonl``) deterministically.

Why this exists: the CPU release must have a real accuracy gate without any network access, so the
project ships its own small task set instead of downloading a dataset from the HF hub. The facts
below are easy on purpose: a correct SmolLM2-135M-Instruct served by a correct engine scores well
above chance, while a broken engine (garbage logits, a wrong chat template, truncated outputs)
collapses towards chance (about 0.3 on multiple choice) or zero (generation).

The items are written out in a fixed shuffled order (seeded), so that ``--limit N`` (the smoke
mode) takes a deterministic subset that still mixes every category. Re-running this script must
produce byte-identical files; ``tests/evals/test_offline_tasks.py`` checks that.

Usage: ``python evals/tasks/make_data.py [--check]``
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20261122

# (country, capital)
CAPITALS = [
    ("France", "Paris"),
    ("Germany", "Berlin"),
    ("Spain", "Madrid"),
    ("Japan", "Tokyo"),
    ("England", "London"),
    ("Russia", "Moscow"),
    ("China", "Beijing"),
    ("Egypt", "Cairo"),
    ("Greece", "Athens"),
    ("Portugal", "Lisbon"),
    ("Ireland", "Dublin"),
    ("Austria", "Vienna"),
    ("Norway", "Oslo"),
    ("Sweden", "Stockholm"),
    ("Poland", "Warsaw"),
    ("Belgium", "Brussels"),
    ("Thailand", "Bangkok"),
    ("South Korea", "Seoul"),
    ("Peru", "Lima"),
    ("Kenya", "Nairobi"),
    ("Denmark", "Copenhagen"),
    ("Finland", "Helsinki"),
    ("Hungary", "Budapest"),
    ("Cuba", "Havana"),
    ("Canada", "Ottawa"),
    ("Australia", "Canberra"),
    ("Argentina", "Buenos Aires"),
    ("the United States", "Washington"),
]
# (word, opposite)
OPPOSITES = [
    ("hot", "cold"),
    ("big", "small"),
    ("day", "night"),
    ("happy", "sad"),
    ("fast", "slow"),
    ("light", "dark"),
    ("open", "closed"),
    ("wet", "dry"),
    ("hard", "soft"),
    ("full", "empty"),
    ("early", "late"),
    ("rich", "poor"),
    ("left", "right"),
    ("black", "white"),
    ("win", "lose"),
    ("push", "pull"),
    ("buy", "sell"),
    ("strong", "weak"),
    ("loud", "quiet"),
    ("thick", "thin"),
    ("heavy", "light"),
    ("true", "false"),
    ("yes", "no"),
    ("first", "last"),
    ("top", "bottom"),
]
# (thing, colour)
COLOURS = [
    ("the sky on a clear day", "blue"),
    ("grass", "green"),
    ("snow", "white"),
    ("a ripe banana", "yellow"),
    ("blood", "red"),
    ("coal", "black"),
    ("milk", "white"),
    ("a ripe tomato", "red"),
    ("chocolate", "brown"),
    ("a lemon", "yellow"),
    ("a pumpkin", "orange"),
    ("a fresh leaf", "green"),
    ("the sea", "blue"),
    ("a crow", "black"),
    ("a strawberry", "red"),
]
# (animal, sound) for multiple choice only: free-form answers are too ambiguous (bark/woof)
SOUNDS = [
    ("dog", "barks"),
    ("cat", "meows"),
    ("cow", "moos"),
    ("duck", "quacks"),
    ("lion", "roars"),
    ("pig", "oinks"),
    ("horse", "neighs"),
    ("owl", "hoots"),
    ("snake", "hisses"),
    ("bee", "buzzes"),
    ("frog", "croaks"),
    ("sheep", "bleats"),
]
# (question, answer) general counting facts
COUNTS = [
    ("How many days are in a week?", "7"),
    ("How many legs does a spider have?", "8"),
    ("How many months are in a year?", "12"),
    ("How many legs does a dog have?", "4"),
    ("How many wheels does a bicycle have?", "2"),
    ("How many hours are in a day?", "24"),
    ("How many minutes are in an hour?", "60"),
    ("How many sides does a triangle have?", "3"),
    ("How many legs does a chicken have?", "2"),
    ("How many sides does a square have?", "4"),
]
NUMBER_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
]

# Items used as in-prompt examples by the YAMLs; kept out of the test items.
FEWSHOT_EXCLUDE = {"Italy", "up", "1 + 1"}


def _aliases(answer: str) -> list[str]:
    """Accepted spellings for the chat ``contains`` check (digits also as words)."""
    out = [answer]
    if answer.isdigit() and int(answer) < len(NUMBER_WORDS):
        out.append(NUMBER_WORDS[int(answer)])
    return out


def _arithmetic(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """Small sums and differences; answers never appear among the operands (keeps `contains` honest)."""
    seen: set[str] = set()
    items: list[tuple[str, str]] = []
    while len(items) < n:
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        if rng.random() < 0.7:
            expr, ans = f"{a} + {b}", a + b
        else:
            a, b = max(a, b) + 3, min(a, b)
            expr, ans = f"{a} - {b}", a - b
        if expr in seen or str(ans) in (str(a), str(b)) or expr in FEWSHOT_EXCLUDE:
            continue
        seen.add(expr)
        items.append((expr, str(ans)))
    return items


def _qa_pool(rng: random.Random) -> list[dict]:
    """Question/answer pairs shared by the generation tasks (completions and chat)."""
    pool: list[dict] = []
    for country, city in CAPITALS:
        pool.append({"question": f"What is the capital of {country}?", "answer": city, "category": "capital"})
    for word, opp in OPPOSITES:
        pool.append({"question": f"What is the opposite of {word}?", "answer": opp, "category": "opposite"})
    for thing, colour in COLOURS:
        pool.append({"question": f"What colour is {thing}?", "answer": colour, "category": "colour"})
    for q, a in COUNTS:
        pool.append({"question": q, "answer": a, "category": "count"})
    for expr, ans in _arithmetic(rng, 30):
        pool.append({"question": f"What is {expr}?", "answer": ans, "category": "arithmetic"})
    for item in pool:
        item["aliases"] = _aliases(item["answer"])
    return pool


def _choices(rng: random.Random, answer: str, candidates: list[str], k: int) -> tuple[list[str], int]:
    """`k` distinct options containing `answer`, in a seeded order; returns (choices, label)."""
    others = sorted({c for c in candidates if c != answer})
    picked = rng.sample(others, k - 1) + [answer]
    rng.shuffle(picked)
    return picked, picked.index(answer)


def build_mc(rng: random.Random) -> list[dict]:
    """Multiple-choice items (3-4 options) scored by loglikelihood of each option."""
    items: list[dict] = []

    def add(question: str, answer: str, candidates: list[str], k: int, category: str) -> None:
        choices, label = _choices(rng, answer, candidates, k)
        items.append({"question": question, "choices": choices, "label": label, "category": category})

    cities = [c for _, c in CAPITALS]
    for country, city in CAPITALS:
        add(f"What is the capital of {country}?", city, cities, 4, "capital")
    words = sorted({o for _, o in OPPOSITES} | {w for w, _ in OPPOSITES})
    for word, opp in OPPOSITES:
        add(f"What is the opposite of {word}?", opp, [w for w in words if w != word], 4, "opposite")
    colours = sorted({c for _, c in COLOURS})
    for thing, colour in COLOURS:
        add(f"What colour is {thing}?", colour, colours, 4, "colour")
    sounds = [s for _, s in SOUNDS]
    for animal, sound in SOUNDS:
        add(f"What sound does a {animal} make?", sound, sounds, 3, "sound")
    for q, a in COUNTS:
        add(q, a, [str(i) for i in range(1, 25)], 4, "count")
    for expr, ans in _arithmetic(rng, 30):
        v = int(ans)
        near = [str(x) for x in range(max(0, v - 6), v + 7)]
        add(f"What is {expr}?", ans, near, 4, "arithmetic")
    return items


def build_all() -> dict[str, list[dict]]:
    """All offline datasets, keyed by file name. One RNG per file keeps them independent."""
    mc = build_mc(random.Random(SEED))
    qa = _qa_pool(random.Random(SEED + 1))
    for name, items in (("mc", mc), ("qa", qa)):
        random.Random(SEED + 2 if name == "mc" else SEED + 3).shuffle(items)
    for i, it in enumerate(mc):
        it["id"] = f"mc-{i:03d}"
    for i, it in enumerate(qa):
        it["id"] = f"qa-{i:03d}"
    return {"tt_offline_mc.jsonl": mc, "tt_offline_qa.jsonl": qa}


def render(items: list[dict]) -> str:
    return "".join(json.dumps(it, sort_keys=True) + "\n" for it in items)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed files differ")
    ap.add_argument("--out-dir", default=str(HERE))
    args = ap.parse_args(argv)
    stale = []
    for name, items in build_all().items():
        path = Path(args.out_dir) / name
        text = render(items)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
            print(f"wrote {path} ({len(items)} items)")
    if stale:
        print("stale: " + ", ".join(stale) + " (run evals/tasks/make_data.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
