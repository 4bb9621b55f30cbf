"""What the FAKE fault server (benchmarking/fault_server.py) answers: made-up completions.

Why a module of its own: the server's job is to misbehave on cue; this is the part that behaves,
shaped like vLLM's answers so real clients (our benchmark client, lm-eval) accept them. A
word-level tokenizer (served at ``/tokenize`` and ``/detokenize``) lets lm-eval send token ids and
lets the fake read them back; an optional answer key (JSONL questions with ``answer`` or
``choices`` + ``label``, as in ``evals/tasks/``) makes a known question get its right answer and
its right choice the highest log-probability. Stdlib only.
"""
from __future__ import annotations

import json
import os
import re

_PIECE = re.compile(r"\s*[A-Za-z0-9]+|\s*[^\sA-Za-z0-9]|\s+")
EOS = "<|eos|>"


class WordTokenizer:
    """Word-level ids assigned on first sight; decode(encode(text)) == text for any text."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {EOS: 0}
        self.pieces: list[str] = [EOS]

    def encode(self, text: str) -> list[int]:
        out = []
        for piece in _PIECE.findall(text):
            if piece not in self.ids:
                self.ids[piece] = len(self.pieces)
                self.pieces.append(piece)
            out.append(self.ids[piece])
        return out

    def decode(self, ids: list[int]) -> str:
        return "".join(self.pieces[i] if 0 <= i < len(self.pieces) else "" for i in ids)


class AnswerKey:
    """Known questions -> their answer (generation) or right choice (loglikelihood)."""

    def __init__(self, directory: str | None) -> None:
        self.items: list[tuple[str, dict]] = []
        if not directory:
            return
        for name in sorted(os.listdir(directory)):
            if name.endswith(".jsonl"):
                with open(os.path.join(directory, name), encoding="utf-8") as fh:
                    for line in fh:
                        row = json.loads(line) if line.strip() else {}
                        if row.get("question"):
                            self.items.append((row["question"], row))

    def find(self, text: str, field: str = "question") -> dict | None:
        """The known question (with ``field``) occurring last in ``text`` (few-shot examples come first)."""
        best, at = None, -1
        for question, row in self.items:
            if field not in row:
                continue
            pos = text.rfind(question)
            if pos > at:
                best, at = row, pos
        return best

    def answer(self, text: str) -> str | None:
        row = self.find(text)
        if row is None:
            return None
        if "answer" in row:
            return str(row["answer"])
        return str(row["choices"][row["label"]]) if "choices" in row else None

    def is_right_choice(self, text: str) -> bool | None:
        """For 'question ... Answer: <choice>': whether <choice> is the labelled one (None if unknown)."""
        row = self.find(text, "choices")
        if row is None:
            return None
        tail = text[text.rfind(row["question"]) + len(row["question"]):]
        return tail.rsplit(":", 1)[-1].strip() == str(row["choices"][row["label"]])


def _prompts(req: dict) -> list:
    """The prompts of a completions request: a string, a token-id list, or a list of either."""
    prompt = req.get("prompt", "")
    if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
        return prompt
    return [prompt]


def _prompt_tokens(prompt) -> int:
    return len(prompt) if isinstance(prompt, list) else len(str(prompt).split())


def _max_tokens(req: dict) -> int:
    n = req.get("max_tokens") or req.get("max_completion_tokens")
    return max(0, int(n)) if n is not None else 16


def completion_body(req: dict, chat: bool, word: str, model: str, tok: WordTokenizer | None = None,
                    key: AnswerKey | None = None) -> dict:
    """A whole (non-streaming) answer; echo+logprobs requests get one log-probability per prompt token."""
    n = _max_tokens(req)
    tok = tok or WordTokenizer()
    key = key or AnswerKey(None)
    if chat:
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in req.get("messages") or [])
        known = key.answer(" ".join(str(m.get("content", "")) for m in req.get("messages") or []))
        content = f"The answer is {known}." if known is not None else (word * n).strip()
        choices = [{"index": 0, "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop" if known is not None else "length"}]
        return {"id": "chatcmpl-fake", "object": "chat.completion", "model": model, "choices": choices,
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}}
    choices, prompt_tokens = [], 0
    for i, prompt in enumerate(_prompts(req)):
        count = _prompt_tokens(prompt)
        prompt_tokens += count
        text = tok.decode(prompt) if isinstance(prompt, list) else str(prompt)
        known = key.answer(text)
        out = f" {known}" if known is not None else word * n
        choice = {"index": i, "text": out, "finish_reason": "stop" if known is not None else "length",
                  "logprobs": None}
        if req.get("echo") and req.get("logprobs") is not None:
            total = count + n  # vLLM echoes the prompt's tokens, then the generated ones
            lp = -0.1 if key.is_right_choice(text) else -5.0
            choice["text"] = text + word * n
            choice["logprobs"] = {"tokens": [word] * total, "token_logprobs": [None] + [lp] * (total - 1),
                                  "top_logprobs": [None] + [{word: lp}] * (total - 1),
                                  "text_offset": list(range(total))}
        choices.append(choice)
    return {"id": "cmpl-fake", "object": "text_completion", "model": model, "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n * len(choices),
                      "total_tokens": prompt_tokens + n * len(choices)}}


CHUNKED_END = b"0\r\n\r\n"  # the last chunk of an HTTP/1.1 chunked body


def frame(payload: bytes) -> bytes:
    """One HTTP/1.1 chunked-encoding frame."""
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def sse_event(obj: dict | str) -> bytes:
    """One framed server-sent event: ``data: <json>`` (or a bare string such as ``[DONE]``)."""
    text = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    return frame(b"data: " + text.encode() + b"\n\n")


def framed_stream(chat: bool, n: int, word: str, model: str, prompt_tokens: int, usage: bool,
                  stream_id: str) -> tuple[list[bytes], bytes]:
    """A vLLM-shaped stream of ``n`` tokens, each ``word``: (framed content events, framed tail:
    usage event if asked + [DONE] + the last chunk). Shared by the stub and the fault server."""
    base = {"id": stream_id, "object": "chat.completion.chunk" if chat else "text_completion",
            "created": 0, "model": model}
    events = []
    for k in range(n):
        finish = "length" if k == n - 1 else None
        choice = ({"index": 0, "delta": {"content": word}, "finish_reason": finish} if chat
                  else {"index": 0, "text": word, "logprobs": None, "finish_reason": finish})
        events.append(sse_event({**base, "choices": [choice]}))
    tail = b""
    if usage:
        tail += sse_event({**base, "choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n,
                                                           "total_tokens": prompt_tokens + n}})
    return events, tail + sse_event("[DONE]") + CHUNKED_END


def stream_events(req: dict, chat: bool, word: str, model: str, *, content: bool = True) -> tuple[list[bytes], bytes]:
    """The fault server's stream for ``req`` (see ``framed_stream``)."""
    usage = bool((req.get("stream_options") or {}).get("include_usage"))
    prompt_tokens = _prompt_tokens(_prompts(req)[0]) if usage and not chat else 0
    return framed_stream(chat, _max_tokens(req) if content else 0, word, model, prompt_tokens, usage, "cmpl-fake")


def malformed_event(kind: int, chat: bool) -> bytes:
    """Kind 0: invalid JSON after ``data:``; kind 1: a content event whose ``data:`` field is missing."""
    if kind == 0:
        return frame(b'data: {"choices":[{"text":" tok"\n\n')
    choice = {"index": 0, "delta": {"content": " tok"}} if chat else {"index": 0, "text": " tok"}
    return frame(json.dumps({"choices": [choice]}, separators=(",", ":")).encode() + b"\n\n")
