"""Prompt datasets with exact token lengths, and the request bodies that ask for exact output length.

Random-token prompts: random vocabulary ids are decoded to text and re-encoded; the text is only
accepted when re-encoding gives exactly `isl` ids, otherwise the re-encoded ids are trimmed or
padded and tried again ("cleaned random" prompts). Prompts that still drift after
the retries are kept and their drift is reported, never hidden. Tokenizers: the model dir's
tokenizer.json through the `tokenizers` library, or the server's /tokenize + /detokenize when no
local tokenizer is given, or none (whitespace words; drift unknown).
"""
from __future__ import annotations

import json
import os
import random
import urllib.request
from dataclasses import dataclass

from contracts.openai_http import bearer_headers

_WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
          "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu river stone "
          "cloud paper light north field green window silver market garden winter").split()


@dataclass
class Prompt:
    text: str
    token_len: int | None      # verified length (None when unverifiable)
    intended_len: int


class LocalTokenizer:
    """tokenizer.json via the `tokenizers` library (no torch/transformers needed)."""

    source = "tokenizer"

    def __init__(self, model_dir: str):
        from tokenizers import Tokenizer
        path = model_dir if model_dir.endswith(".json") else os.path.join(model_dir, "tokenizer.json")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no tokenizer.json at {path}")
        self.tok = Tokenizer.from_file(path)
        special = set(self.tok.get_added_tokens_decoder())
        self.candidates = [i for i in range(self.tok.get_vocab_size(with_added_tokens=False)) if i not in special]

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=True)

    def random_ids(self, rng: random.Random, n: int) -> list[int]:
        return [rng.choice(self.candidates) for _ in range(n)]


class ServerTokenizer:
    """vLLM's /tokenize and /detokenize endpoints, for runs without a local tokenizer."""

    source = "server"

    def __init__(self, base_url: str, model: str, api_key: str | None = None):
        self.base_url, self.model, self.api_key = base_url.rstrip("/"), model, api_key
        self.encode("probe")  # fail early when the server has no /tokenize

    def _post(self, path: str, body: dict) -> dict:
        headers = {"Content-Type": "application/json", **bearer_headers(self.api_key)}
        req = urllib.request.Request(self.base_url + path, json.dumps(body).encode(), headers)
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read())

    def encode(self, text: str) -> list[int]:
        return self._post("/tokenize", {"model": self.model, "prompt": text, "add_special_tokens": False})["tokens"]

    def decode(self, ids: list[int]) -> str:
        return self._post("/detokenize", {"model": self.model, "tokens": ids})["prompt"]

    def random_ids(self, rng: random.Random, n: int) -> list[int]:
        ids = self.encode(" ".join(rng.choice(_WORDS) for _ in range(n)))
        rng.shuffle(ids)
        return ids[:n]


def load_tokenizer(tokenizer_dir: str | None, base_url: str, model: str, api_key: str | None):
    """Local tokenizer when a dir is given, else the server's endpoints, else None (with the reason)."""
    if tokenizer_dir:
        return LocalTokenizer(tokenizer_dir), None
    try:
        return ServerTokenizer(base_url, model, api_key), None
    except Exception as exc:  # noqa: BLE001 - any failure means "no server tokenizer"
        return None, f"no local tokenizer and the server's /tokenize is unavailable ({exc.__class__.__name__})"


def exact_text(tok, ids: list[int], isl: int, rng: random.Random, tries: int = 8) -> tuple[str, int]:
    """Text whose re-encoding has exactly `isl` tokens (or the closest found, with its length)."""
    best = ("", -1)
    for _ in range(tries):
        text = tok.decode(ids)
        again = tok.encode(text)
        if len(again) == isl:
            return text, isl
        if best[1] < 0 or abs(len(again) - isl) < abs(best[1] - isl):
            best = (text, len(again))
        ids = again[:isl] if len(again) > isl else again + tok.random_ids(rng, isl - len(again))
    return best


def random_prompts(tok, isl: int, n: int, seed: int = 0) -> list[Prompt]:
    """`n` distinct random-token prompts of exactly `isl` tokens where the tokenizer allows."""
    rng = random.Random(seed)
    if tok is None:
        return [Prompt(" ".join(rng.choice(_WORDS) for _ in range(isl)), None, isl) for _ in range(n)]
    out = []
    for _ in range(n):
        text, length = exact_text(tok, tok.random_ids(rng, isl), isl, rng)
        out.append(Prompt(text, length, isl))
    return out


def shared_prefix_prompts(tok, isl: int, n: int, prefix_len: int | None = None, seed: int = 0) -> list[Prompt]:
    """Prompts that share one random prefix (default half of isl) and differ after it: a prefix-cache test.

    The suffix is made exact on its own; a merge across the boundary can shift the total by a token,
    which shows up as drift rather than being silently corrected away from the shared prefix.
    """
    rng = random.Random(seed)
    plen = min(prefix_len or isl // 2, isl)
    if tok is None:
        prefix = " ".join(rng.choice(_WORDS) for _ in range(plen))
        return [Prompt((prefix + " " + " ".join(rng.choice(_WORDS) for _ in range(isl - plen))).strip(), None, isl)
                for _ in range(n)]
    prefix, _ = exact_text(tok, tok.random_ids(rng, plen), plen, rng)
    out = []
    for _ in range(n):
        suffix = exact_text(tok, tok.random_ids(rng, isl - plen), isl - plen, rng)[0] if isl > plen else ""
        text = prefix + suffix
        out.append(Prompt(text, len(tok.encode(text)), isl))
    return out


def jsonl_prompts(path: str, n: int, tok=None) -> list[Prompt]:
    """Prompts from a JSONL file ({"prompt": str} or {"text": str} per line), cycled to `n`."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{lineno}: not JSON ({exc})") from None
            text = obj.get("prompt", obj.get("text")) if isinstance(obj, dict) else None
            if not isinstance(text, str):
                raise ValueError(f"{path}:{lineno}: expected an object with a string 'prompt' or 'text'")
            rows.append(text)
    if not rows:
        raise ValueError(f"{path}: no prompts")
    out = []
    for i in range(n):
        text = rows[i % len(rows)]
        length = len(tok.encode(text)) if tok is not None else None
        out.append(Prompt(text, length, length or 0))
    return out


def length_check(prompts: list[Prompt], tokenizer) -> dict:
    """How many prompts were re-tokenised to verify their length, how many are exact, the largest drift."""
    verified = [p for p in prompts if p.token_len is not None]
    drifts = [p.token_len - p.intended_len for p in verified]
    by = getattr(tokenizer, "source", None) if verified else "none"
    return {"verified_by": by or "none", "verified": len(verified), "exact": sum(1 for d in drifts if d == 0),
            "max_abs_drift": max((abs(d) for d in drifts), default=None)}


def request_body(prompt: str, osl: int, model: str, chat: bool, extra: dict | None = None,
                 messages: list[dict] | None = None) -> bytes:
    """Streaming request that asks for exactly `osl` tokens (ignore_eos + min_tokens, vLLM extras).

    ``extra``: request body fields from --workflow-args (``benchmarking.body_fields``, which keeps the
    fields set below the benchmark's own); they may replace ``temperature``. ``messages``: a whole
    conversation for the chat endpoint (instead of one user message holding ``prompt``).
    """
    body: dict = {"model": model, "max_tokens": osl, "temperature": 0.0, "stream": True,
                  "stream_options": {"include_usage": True}, **(extra or {})}
    if chat:
        body["messages"] = messages if messages is not None else [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    body["ignore_eos"] = True
    body["min_tokens"] = osl
    return json.dumps(body, separators=(",", ":")).encode()
