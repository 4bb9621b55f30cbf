"""Wait until a server can really answer, then warm it up.

Why three stages: ``/health`` answers as soon as the HTTP layer is up; ``/v1/models`` proves the
model is registered; but vLLM's CPU build can pass both and die on the first request (an
unsupported attention config only fails at the first forward pass). Only a real 1-token completion
proves the server can serve. Connection refused and connection reset (docker-proxy accepts and then
resets while the app in the container is not listening yet) both mean "not yet".
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import requests

from workflows.servers.base import ServerHandle, ServerStartError

# Transient: the server is not up yet (or restarting its HTTP layer).
_NOT_YET = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)


class ReadinessTimeout(ServerStartError):
    """The server was still not ready after the spec's timeout."""


class AuthRejected(ServerStartError):
    """The server answered 401/403 to our bearer: waiting longer cannot help."""


@dataclass
class ReadyInfo:
    elapsed_s: float
    models: list[str]
    stages_s: dict[str, float] = field(default_factory=dict)  # seconds since start when each stage passed


def auth_headers(bearer: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {bearer}"} if bearer else {}


def _check_auth(resp: requests.Response, url: str, bearer: str | None) -> None:
    if resp.status_code in (401, 403):
        hint = "no bearer was sent (server needs API_KEY/JWT_SECRET, or start it with --no-auth)" if not bearer \
            else "the bearer does not match the server's key (check API_KEY/JWT_SECRET)"
        raise AuthRejected(f"{url} answered HTTP {resp.status_code}: {hint}")


def list_models(base_url: str, bearer: str | None, timeout: float = 10.0) -> list[str]:
    url = f"{base_url.rstrip('/')}/v1/models"
    resp = requests.get(url, headers=auth_headers(bearer), timeout=timeout)
    _check_auth(resp, url, bearer)
    resp.raise_for_status()
    return [m.get("id") for m in resp.json().get("data", [])]


def check_served_model(base_url: str, expected_name: str, bearer: str | None, timeout: float = 10.0) -> list[str]:
    """Raise one clear ServerStartError unless ``base_url`` is reachable and serves ``expected_name``."""
    try:
        models = list_models(base_url, bearer, timeout)
    except requests.ConnectionError:
        raise ServerStartError(f"cannot reach the server at {base_url}: connection refused or reset "
                               f"(is it running? check --server-url/--service-port)") from None
    except requests.Timeout:
        raise ServerStartError(f"the server at {base_url} did not answer /v1/models within {timeout:g} s") from None
    except requests.HTTPError as exc:
        raise ServerStartError(f"{base_url}/v1/models answered HTTP {exc.response.status_code}") from None
    except ValueError:
        raise ServerStartError(f"{base_url}/v1/models did not return JSON: is this an OpenAI-compatible server?") \
            from None
    if expected_name not in models:
        raise ServerStartError(f"the server at {base_url} serves {models}, not {expected_name!r}: "
                               f"point --server-url at a server for this model")
    return models


def _one_token(base_url: str, model: str, bearer: str | None, timeout: float) -> requests.Response:
    return requests.post(f"{base_url}/v1/completions", headers=auth_headers(bearer), timeout=timeout,
                         json={"model": model, "prompt": "Hello", "max_tokens": 1, "temperature": 0.0})


def wait_until_ready(handle: ServerHandle, *, bearer: str | None, timeout_s: float, poll_interval_s: float = 1.0,
                     progress: Callable[[str], None] | None = None) -> ReadyInfo:
    """Poll health -> models -> one real completion until all pass.

    Raises ServerDied (exit code + last 40 log lines) as soon as the process/container exits,
    AuthRejected on 401/403, ReadinessTimeout after ``timeout_s``.
    """
    base = handle.base_url
    start = time.monotonic()
    stages: dict[str, float] = {}
    models: list[str] = []
    last_note = ""
    next_progress = start

    def note(msg: str) -> None:
        nonlocal last_note
        last_note = msg

    while True:
        if not handle.is_alive():
            raise handle.died(f"the {handle.kind} server")
        now = time.monotonic()
        if now - start > timeout_s:
            raise ReadinessTimeout(f"server at {base} not ready after {timeout_s:g} s (last: {last_note or 'no answer'})"
                                   f"; log: {handle.log_path}")
        per_request = max(1.0, min(30.0, timeout_s - (now - start)))
        try:
            if "health" not in stages:
                resp = requests.get(f"{base}/health", headers=auth_headers(bearer), timeout=per_request)
                if resp.status_code == 200:
                    stages["health"] = time.monotonic() - start
                    continue
                note(f"/health HTTP {resp.status_code}")
            elif "models" not in stages:
                url = f"{base}/v1/models"
                resp = requests.get(url, headers=auth_headers(bearer), timeout=per_request)
                _check_auth(resp, url, bearer)
                if resp.status_code == 200:
                    models = [m.get("id") for m in resp.json().get("data", [])]
                    if handle.served_model_name not in models:
                        raise ServerStartError(f"the server at {base} serves {models}, "
                                               f"not {handle.served_model_name!r}")
                    stages["models"] = time.monotonic() - start
                    continue
                note(f"/v1/models HTTP {resp.status_code}")
            else:
                resp = _one_token(base, handle.served_model_name, bearer, per_request)
                _check_auth(resp, f"{base}/v1/completions", bearer)
                if resp.status_code == 200 and resp.json().get("choices"):
                    stages["completion"] = time.monotonic() - start
                    return ReadyInfo(elapsed_s=stages["completion"], models=models, stages_s=stages)
                note(f"1-token completion HTTP {resp.status_code}: {resp.text[:200]}")
        except requests.ConnectionError:
            note("not accepting connections yet (refused/reset)")
        except _NOT_YET as exc:
            note(f"{type(exc).__name__}")
        except ValueError:
            note("non-JSON answer")
        if progress and time.monotonic() >= next_progress:
            progress(f"waiting for {base} ({time.monotonic() - start:.0f}s; {last_note or 'starting'})")
            next_progress = time.monotonic() + 10.0
        time.sleep(poll_interval_s)


# ---------------------------------------------------------------------------------- warm-up


def _load_tokenizer(tokenizer_dir: Path | None):
    """A tokenizer from ``tokenizer.json`` via the ``tokenizers`` package, if both are available."""
    if not tokenizer_dir or not (Path(tokenizer_dir) / "tokenizer.json").is_file():
        return None
    try:
        from tokenizers import Tokenizer  # not in the orchestrator venv by default: optional
    except ImportError:
        return None
    try:
        return Tokenizer.from_file(str(Path(tokenizer_dir) / "tokenizer.json"))
    except Exception:  # noqa: BLE001 - a broken tokenizer file only degrades the prompt
        return None


def make_prompt(isl: int, tokenizer=None, seed: int = 0) -> str:
    """A prompt of ``isl`` tokens: random token ids when a tokenizer is available, else a repeated word.

    With a tokenizer the text is re-encoded and trimmed until it round-trips to exactly ``isl``
    tokens (decode/encode is not always stable for random ids).
    """
    if tokenizer is None:
        return " ".join(["hello"] * max(1, isl))
    rng = random.Random(seed)
    vocab = tokenizer.get_vocab_size()
    ids = [rng.randrange(100, max(101, vocab - 100)) for _ in range(isl)]
    text = tokenizer.decode(ids)
    for _ in range(5):
        enc = tokenizer.encode(text, add_special_tokens=False).ids
        if len(enc) == isl:
            break
        enc = (enc + ids)[:isl]
        text = tokenizer.decode(enc)
    return text


def warmup(base_url: str, bearer: str | None, model: str, pairs: list[tuple[int, int]],
           tokenizer_dir: Path | None, *, timeout_s: float = 1800.0,
           log: Callable[[str], None] = print) -> None:
    """"Trace capture": one streaming completion per distinct (isl, osl), smallest first.

    On Tenstorrent hardware the first request of each padded prefill length compiles a trace; doing
    it here keeps that cost out of the measurements. Failures are logged, never fatal.
    """
    tokenizer = _load_tokenizer(tokenizer_dir)
    for isl, osl in sorted(set((int(i), int(o)) for i, o in pairs)):
        body = {"model": model, "prompt": make_prompt(isl, tokenizer), "max_tokens": osl, "min_tokens": osl,
                "ignore_eos": True, "temperature": 0.0, "stream": True, "stream_options": {"include_usage": True}}
        t0 = time.monotonic()
        ttft = None
        usage = None
        try:
            with requests.post(f"{base_url.rstrip('/')}/v1/completions", json=body, headers=auth_headers(bearer),
                               stream=True, timeout=timeout_s) as resp:
                if resp.status_code != 200:
                    log(f"warm-up isl={isl} osl={osl}: HTTP {resp.status_code} {resp.text[:200]}")
                    continue
                for line in resp.iter_lines():
                    if not line.startswith(b"data: ") or line == b"data: [DONE]":
                        continue
                    chunk = json.loads(line[6:])
                    if ttft is None and chunk.get("choices"):
                        ttft = time.monotonic() - t0
                    usage = chunk.get("usage") or usage
        except (requests.RequestException, ValueError) as exc:
            log(f"warm-up isl={isl} osl={osl} failed: {type(exc).__name__}: {exc}")
            continue
        total = time.monotonic() - t0
        out = (usage or {}).get("completion_tokens")
        log(f"warm-up isl={isl} osl={osl}: ttft {1000 * (ttft or total):.0f} ms, total {total:.1f} s, "
            f"prompt_tokens {(usage or {}).get('prompt_tokens')}, completion_tokens {out}")
