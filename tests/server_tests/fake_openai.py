"""A fake OpenAI-compatible text server for testing the API conformance suite itself (a named fake).

Correct by default: words are tokens, greedy text is a function of the prompt, sampled text of
(prompt, seed, choice), answers end by themselves after a few tokens unless ``ignore_eos`` or
``min_tokens`` say otherwise, and n / max_tokens / stop / logprobs / echo / usage / streaming /
404 / 400 / 401 behave as the suite expects from a conforming server.

Deliberately wrong on request: ``defects`` maps a case name (what the suite puts in
``x-request-id: tt-tests/<case>/<k>``) to one defect from ``DEFECTS``; requests of that case get the
defect and nothing else. Running the suite with every case mapped to the defect it exists to
catch proves each case can fail.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VOCAB = ("river stone cloud paper light north field green window silver market garden winter amber "
         "harbor meadow candle forest valley bridge copper thunder orchard lantern velvet marble "
         "falcon glacier prairie compass").split()
MAX_CONTEXT = 2048
DEFECTS = frozenset({
    "models_wrong_id", "empty_text", "chat_role_user", "stream_drops_first_token", "ignore_n",
    "ignore_max_tokens", "ignore_stop", "ignore_seed", "seed_means_greedy", "ignore_ignore_eos",
    "ignore_min_tokens", "logprobs_missing_last", "ignore_echo", "usage_total_wrong", "usage_off_by_one",
    "stream_usage_missing", "any_model_accepted", "bad_params_500", "no_auth", "batch_variant",
})


def tokenize(text: str) -> list[str]:
    return re.findall(r"\s*\S+", text) or [text]


def _h(*parts) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big")


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class FakeOpenAI:
    """Serve on 127.0.0.1 in a thread: ``with FakeOpenAI(...) as fake: fake.base_url``."""

    def __init__(self, model: str = "fake-model", api_key: str | None = "fake-key",
                 defects: dict[str, str] | None = None, delay_s: float = 0.0):
        unknown = set((defects or {}).values()) - DEFECTS
        if unknown:
            raise ValueError(f"unknown defects {sorted(unknown)}")
        self.model, self.api_key, self.defects = model, api_key, dict(defects or {})
        self.delay_s = delay_s  # per request: a slow server, for interrupting the suite mid-run
        self.requests_by_case: dict[str, int] = {}
        self._in_flight, self._lock = 0, threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                fake._handle(self, "GET")

            def do_POST(self):
                fake._handle(self, "POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "FakeOpenAI":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # ------------------------------------------------------------------ HTTP

    def _defect(self, handler) -> str | None:
        rid = handler.headers.get("x-request-id") or ""
        parts = rid.split("/")
        case = parts[1].split("[")[0] if len(parts) >= 3 and parts[0] == "tt-tests" else ""
        self.requests_by_case[case] = self.requests_by_case.get(case, 0) + 1
        return self.defects.get(case)

    def _handle(self, handler, method: str) -> None:
        with self._lock:
            self._in_flight += 1
        try:
            self._answer(handler, method)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _answer(self, handler, method: str) -> None:
        defect = self._defect(handler)
        if self.delay_s:
            time.sleep(self.delay_s)
        if defect == "batch_variant":
            time.sleep(0.05)  # long enough for a batch's requests to overlap
            with self._lock:
                defect = defect if self._in_flight > 1 else None  # alone: the right answer
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            if self.api_key and defect != "no_auth":
                if handler.headers.get("Authorization") != f"Bearer {self.api_key}":
                    raise BadRequest(401, "invalid or missing bearer token")
            if method == "GET" and handler.path == "/v1/models":
                name = "other-model" if defect == "models_wrong_id" else self.model
                return self._json(handler, 200, {"object": "list", "data": [{"id": name, "object": "model"}]})
            if method != "POST" or handler.path not in ("/v1/completions", "/v1/chat/completions"):
                raise BadRequest(404, f"no route {method} {handler.path}")
            try:
                body = json.loads(raw)
            except ValueError:
                raise BadRequest(400, "body is not JSON") from None
            chat = handler.path.endswith("chat/completions")
            if body.get("model") != self.model and defect != "any_model_accepted":
                raise BadRequest(404, f"the model {body.get('model')!r} does not exist")
            req = self._validate(body, chat)
            self._generate(handler, body, req, chat, defect)
        except BadRequest as exc:
            status = 500 if defect == "bad_params_500" and exc.status == 400 else exc.status
            self._json(handler, status, {"error": {"message": str(exc), "code": status}})

    def _json(self, handler, status: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    # ------------------------------------------------------------------ semantics

    def _validate(self, body: dict, chat: bool) -> dict:
        if chat:
            msgs = body.get("messages")
            if not isinstance(msgs, list) or not all(isinstance(m, dict) for m in msgs):
                raise BadRequest(400, "messages must be a list of objects")
            prompt = "".join(str(m.get("content", "")) for m in msgs)
            prompt_tokens = len(tokenize(prompt)) + 4
        else:
            prompt = body.get("prompt")
            if not isinstance(prompt, str):
                raise BadRequest(400, "prompt must be a string")
            prompt_tokens = len(tokenize(prompt))
        max_tokens = body.get("max_tokens", 16)
        n = body.get("n", 1)
        temperature = body.get("temperature", 1.0)
        top_p = body.get("top_p", 1.0)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise BadRequest(400, "max_tokens must be >= 1")
        if prompt_tokens + max_tokens > MAX_CONTEXT:
            raise BadRequest(400, f"prompt + max_tokens exceed the context ({MAX_CONTEXT})")
        if not isinstance(n, int) or n < 1:
            raise BadRequest(400, "n must be >= 1")
        if temperature < 0:
            raise BadRequest(400, "temperature must be >= 0")
        if not 0 < top_p <= 1:
            raise BadRequest(400, "top_p must be in (0, 1]")
        return {"prompt": prompt, "prompt_tokens": prompt_tokens, "max_tokens": max_tokens, "n": n,
                "temperature": temperature}

    def _choice_tokens(self, body: dict, req: dict, index: int, defect: str | None) -> tuple[list[str], str]:
        """(tokens, finish_reason) of one choice."""
        prompt, max_tokens = req["prompt"], req["max_tokens"]
        seed = body.get("seed")
        if defect == "batch_variant":  # greedy text that depends on what else is in flight
            rng = random.Random(_h(prompt, "batched"))
        elif req["temperature"] == 0 or defect == "seed_means_greedy":
            rng = random.Random(_h(prompt))
        elif seed is not None and defect != "ignore_seed":
            rng = random.Random(_h(prompt, seed, index))
        else:
            rng = random.Random()
        natural = 3 + _h(prompt) % 4
        limit = max_tokens + 1 if defect == "ignore_max_tokens" else max_tokens
        min_tokens = 0 if defect == "ignore_min_tokens" else int(body.get("min_tokens") or 0)
        ignore_eos = bool(body.get("ignore_eos")) and defect != "ignore_ignore_eos"
        tokens: list[str] = []
        finish = "length"
        while len(tokens) < limit:
            if not ignore_eos and len(tokens) >= max(natural, min_tokens):
                finish = "stop"
                break
            tokens.append(" " + VOCAB[rng.randrange(len(VOCAB))])
        stops = body.get("stop") or []
        stops = [stops] if isinstance(stops, str) else stops
        if stops and defect != "ignore_stop":
            text = "".join(tokens)
            cut = min((text.find(s) for s in stops if s in text), default=-1)
            if cut >= 0:
                kept, used = [], 0
                for tok in tokens:
                    if used + len(tok) > cut:
                        if cut > used:
                            kept.append(tok[:cut - used])
                        break
                    kept.append(tok)
                    used += len(tok)
                return kept, "stop"
        return tokens, finish

    def _logprobs(self, tokens: list[str], k: int, prompt_tokens: list[str] | None) -> dict:
        all_tokens = (prompt_tokens or []) + tokens
        lps = [None if prompt_tokens and i == 0 else -0.25 - (i % 3) * 0.5 for i in range(len(all_tokens))]
        tops = [None if lp is None else {tok: lp, **{f" alt{j}": lp - 1.0 - j for j in range(max(k - 1, 0))}}
                for tok, lp in zip(all_tokens, lps)]
        offsets, pos = [], 0
        for tok in all_tokens:
            offsets.append(pos)
            pos += len(tok)
        return {"tokens": all_tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}

    def _generate(self, handler, body: dict, req: dict, chat: bool, defect: str | None) -> None:
        n = 1 if defect == "ignore_n" else req["n"]
        choices = [self._choice_tokens(body, req, i, defect) for i in range(n)]
        completion_tokens = sum(len(t) for t, _ in choices) + (1 if defect == "usage_off_by_one" else 0)
        usage = {"prompt_tokens": req["prompt_tokens"], "completion_tokens": completion_tokens,
                 "total_tokens": req["prompt_tokens"] + completion_tokens + (1 if defect == "usage_total_wrong" else 0)}
        echo = bool(body.get("echo")) and not chat and defect != "ignore_echo"
        if body.get("stream"):
            return self._stream(handler, body, choices, usage, chat, defect)
        out_choices = []
        for i, (tokens, finish) in enumerate(choices):
            text = "" if defect == "empty_text" else "".join(tokens)
            lp_tokens = tokens[:-1] if defect == "logprobs_missing_last" else tokens
            if chat:
                c = {"index": i, "finish_reason": finish,
                     "message": {"role": "user" if defect == "chat_role_user" else "assistant", "content": text}}
                if body.get("logprobs"):
                    k = int(body.get("top_logprobs") or 0)
                    c["logprobs"] = {"content": [
                        {"token": t, "logprob": -0.5, "bytes": list(t.encode()),
                         "top_logprobs": [{"token": t, "logprob": -0.5}] + [
                             {"token": f" alt{j}", "logprob": -1.5 - j} for j in range(k - 1)]}
                        for t in lp_tokens]}
            else:
                prompt_toks = tokenize(req["prompt"]) if echo else None
                c = {"index": i, "finish_reason": finish, "text": (req["prompt"] if echo else "") + text,
                     "logprobs": None}
                if body.get("logprobs") is not None:
                    c["logprobs"] = self._logprobs(lp_tokens, int(body["logprobs"]) + 1, prompt_toks)
            out_choices.append(c)
        self._json(handler, 200, {"id": "cmpl-fake", "object": "chat.completion" if chat else "text_completion",
                                  "created": 0, "model": self.model, "choices": out_choices, "usage": usage})

    def _stream(self, handler, body: dict, choices, usage: dict, chat: bool, defect: str | None) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Connection", "close")
        handler.end_headers()
        obj = "chat.completion.chunk" if chat else "text_completion"

        def send(payload) -> None:
            data = payload if isinstance(payload, str) else json.dumps(payload)
            handler.wfile.write(f"data: {data}\n\n".encode())

        base = {"id": "cmpl-fake", "object": obj, "created": 0, "model": self.model}
        for i, (tokens, finish) in enumerate(choices):
            if chat:
                send({**base, "choices": [{"index": i, "delta": {"role": "assistant", "content": ""},
                                           "finish_reason": None}]})
            toks = tokens[1:] if defect == "stream_drops_first_token" else tokens
            for k, tok in enumerate(toks):
                last = k == len(toks) - 1
                piece = {"delta": {"content": tok}} if chat else {"text": tok, "logprobs": None}
                send({**base, "choices": [{"index": i, **piece, "finish_reason": finish if last else None}]})
        if (body.get("stream_options") or {}).get("include_usage") and defect != "stream_usage_missing":
            send({**base, "choices": [], "usage": usage})
        send("[DONE]")
        handler.close_connection = True
