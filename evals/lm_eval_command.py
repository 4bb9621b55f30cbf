"""Build the lm-eval command line for one task, and choose how lm-eval gets a tokenizer.

Stdlib only, and free of I/O except the tokenizer probe, so the exact command for each model
class can be unit tested.

Tokenizer: ``local-completions`` needs one for loglikelihood (it must count context tokens);
generation over plain prompts works without. In order of preference:
1. the server's own tokenizer (vLLM ``/tokenizer_info`` + ``/tokenize``, present when vLLM runs
   with ``--enable-tokenizer-info-endpoint``): ``tokenizer_backend=remote``, exact by construction
   and needs no transformers in the evals venv;
2. a local HF tokenizer directory (``TT_TOKENIZER_DIR``) when transformers is importable;
3. none: fine for generation, a refusal for loglikelihood.
``local-chat-completions`` never needs one (the server applies the chat template).
"""

from __future__ import annotations

import json
import shlex
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from contracts.retry import GaveUp, NotYet, retry
from evals.eval_spec import LOCAL_CHAT_COMPLETIONS, EvalTask

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
REDACTED = "***"


class Refusal(RuntimeError):
    """The task cannot run against this server; the message says why (shown to the user as is)."""


@dataclass(frozen=True)
class TokenizerChoice:
    backend: str | None  # "remote" | "huggingface" | None (lm-eval's "None")
    reason: str
    path: str | None = None
    auth_token: str | None = None


@dataclass(frozen=True)
class LmEvalInvocation:
    argv: list[str]
    cwd: Path
    display: str  # shell-quoted command with secrets replaced; this is what gets logged/recorded

    @property
    def cli_args(self) -> list[str]:
        """The arguments after ``python -m lm_eval``: what the in-process worker hands lm-eval's CLI."""
        return self.argv[3:]


def api_root(server_url: str) -> str:
    """``http://host:port`` from whatever the orchestrator passed (with or without ``/v1``)."""
    root = server_url.strip().rstrip("/")
    for suffix in ("/v1/chat/completions", "/v1/completions", "/v1"):
        root = root.removesuffix(suffix)
    return root


def endpoint_url(server_url: str, model_class: str) -> str:
    path = "/v1/chat/completions" if model_class == LOCAL_CHAT_COMPLETIONS else "/v1/completions"
    return api_root(server_url) + path


def _get_ok(url: str, token: str | None, timeout: float, attempts: int = 3, backoff_s: float = 1.0) -> int:
    """HTTP status of a GET (or of a tiny POST to /tokenize); 0 when unreachable.

    A 5xx or an unreachable server is asked again (``attempts`` in all, backoff doubling): one
    transient error must not decide that the server has no tokenizer endpoints.
    """
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None
    if url.endswith("/tokenize"):
        data = json.dumps({"prompt": "hi"}).encode()

    codes: list[int] = []

    def attempt(_remaining_s: float) -> int:
        req = urllib.request.Request(url, data=data, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status
        except urllib.error.HTTPError as e:
            codes.append(e.code)
        except (urllib.error.URLError, OSError):
            codes.append(0)
        if 0 < codes[-1] < 500:
            return codes[-1]
        raise NotYet(f"HTTP {codes[-1]}" if codes[-1] else "unreachable")

    try:  # the deadline is what the attempts and their backoff take at most
        return retry(f"{url} to answer", attempt, deadline_s=attempts * timeout + backoff_s * 2 ** attempts,
                     delay_s=backoff_s, backoff=2.0, max_delay_s=backoff_s * 2 ** attempts, attempts=attempts)
    except GaveUp:
        return codes[-1]


def probe_remote_tokenizer(server_url: str, bearer: str | None, timeout: float = 5.0,
                           backoff_s: float = 1.0) -> tuple[bool, str | None]:
    """(supported, auth_token_needed). Mirrors lm-eval's own auto-detection, but with our bearer.

    vLLM does not guard ``/tokenize`` with the API key; a server that does gets the bearer passed
    to lm-eval as ``auth_token`` (redacted in every logged command).
    """
    root = api_root(server_url)
    for token in (None, bearer) if bearer else (None,):
        codes = [_get_ok(root + p, token, timeout, backoff_s=backoff_s) for p in ("/tokenizer_info", "/tokenize")]
        if all(c == 200 for c in codes):
            return True, token
        if not any(c in (401, 403) for c in codes):
            break
    return False, None


def choose_tokenizer(
    task: EvalTask,
    server_url: str,
    bearer: str | None,
    tokenizer_dir: str | None,
    probe=probe_remote_tokenizer,
    have_transformers: bool | None = None,
) -> TokenizerChoice:
    """Pick lm-eval's tokenizer backend for ``task``; raise Refusal when loglikelihood has none."""
    if task.model_class == LOCAL_CHAT_COMPLETIONS:
        return TokenizerChoice(None, "chat completions: the server tokenizes")
    remote, auth = probe(server_url, bearer)
    if remote:
        return TokenizerChoice("remote", "server exposes /tokenizer_info and /tokenize", auth_token=auth)
    if have_transformers is None:
        have_transformers = find_spec("transformers") is not None
    if tokenizer_dir and Path(tokenizer_dir).is_dir() and have_transformers:
        return TokenizerChoice("huggingface", f"local tokenizer dir {tokenizer_dir}", path=tokenizer_dir)
    if task.needs_loglikelihood:
        why = ["the server has no /tokenizer_info + /tokenize (start vLLM with --enable-tokenizer-info-endpoint)"]
        if not tokenizer_dir:
            why.append("TT_TOKENIZER_DIR is empty")
        elif not Path(tokenizer_dir).is_dir():
            why.append(f"TT_TOKENIZER_DIR {tokenizer_dir} is not a directory")
        elif not have_transformers:
            why.append("transformers is not installed in the evals venv")
        raise Refusal(f"{task.task_name} needs a tokenizer for loglikelihood, but " + "; ".join(why))
    return TokenizerChoice(None, "generation with plain-text prompts needs no tokenizer")


def _kv(pairs: dict[str, object]) -> str:
    return ",".join(f"{k}={v}" for k, v in pairs.items() if v is not None)


def build_command(
    task: EvalTask,
    *,
    python: str,
    server_url: str,
    model_name: str,
    output_dir: Path,
    cache_path: Path | None,
    tokenizer: TokenizerChoice,
    limit: int | None,
    tasks_dir: Path = TASKS_DIR,
) -> LmEvalInvocation:
    """The ``python -m lm_eval run ...`` argv for one task, plus its redacted display string.

    Offline tasks run with ``cwd`` = the tasks directory, because their YAMLs name their JSONL by
    relative path (lm-eval's json loader resolves it against the working directory).
    """
    model_args: dict[str, object] = {
        "model": model_name,
        "base_url": endpoint_url(server_url, task.model_class),
        "num_concurrent": task.num_concurrent,
        "max_retries": task.max_retries,
        "timeout": task.timeout_s,
    }
    if task.max_length:
        model_args["max_length"] = task.max_length
    if task.model_class != LOCAL_CHAT_COMPLETIONS:
        model_args["tokenizer_backend"] = tokenizer.backend or "None"
        model_args["tokenizer"] = tokenizer.path
    display_args = dict(model_args)
    if tokenizer.auth_token:
        model_args["auth_token"] = tokenizer.auth_token
        display_args["auth_token"] = REDACTED

    def argv_for(margs: dict[str, object]) -> list[str]:
        argv = [python, "-m", "lm_eval", "run", "--model", task.model_class, "--model_args", _kv(margs)]
        argv += ["--batch_size", str(task.batch_size)]
        argv += task_args(task, output_dir=output_dir, limit=limit, tasks_dir=tasks_dir)
        if cache_path is not None:
            argv += ["--use_cache", str(cache_path)]
        return argv

    return LmEvalInvocation(argv_for(model_args), task_cwd(task, output_dir, tasks_dir),
                            shlex.join(argv_for(display_args)))


def task_args(task: EvalTask, *, output_dir: Path, limit: int | None, tasks_dir: Path = TASKS_DIR) -> list[str]:
    """What lm-eval is told about the task itself (task, samples, few-shot, chat template, seed), the
    same whichever model class answers it: the served eval and the in-process reference share it, so
    both score exactly the same prompts."""
    argv = ["--tasks", task.task_name, "--output_path", str(output_dir), "--log_samples", "--seed", str(task.seed)]
    if task.num_fewshot is not None:
        argv += ["--num_fewshot", str(task.num_fewshot)]
    if task.apply_chat_template:
        argv.append("--apply_chat_template")
    if task.fewshot_as_multiturn:
        argv += ["--fewshot_as_multiturn", "true"]
    if task.gen_kwargs:
        argv += ["--gen_kwargs", _kv(dict(task.gen_kwargs))]
    if limit is not None:
        argv += ["--limit", str(limit)]
    if task.offline:
        argv += ["--include_path", str(tasks_dir)]
    return argv


def task_cwd(task: EvalTask, output_dir: Path, tasks_dir: Path = TASKS_DIR) -> Path:
    """Offline task YAMLs name their JSONL by relative path: lm-eval must run in the tasks directory."""
    return tasks_dir if task.offline else output_dir


#: lm-eval's in-process backend for the reference (transformers on CPU, no server).
INPROCESS_MODEL_CLASS = "hf"


def build_inprocess_command(
    task: EvalTask,
    *,
    python: str,
    pretrained: Path,
    dtype: str,
    output_dir: Path,
    limit: int | None,
    batch_size: int,
    tasks_dir: Path = TASKS_DIR,
) -> LmEvalInvocation:
    """The ``python -m lm_eval run --model hf ...`` argv that scores ``task`` in process on the
    checkpoint the server serves (``pretrained``), with the served eval's own ``task_args``.

    With ``apply_chat_template`` lm-eval renders the checkpoint tokenizer's chat template itself,
    where the served eval lets the server render it: a difference between the two is the server's.
    """
    model_args = _kv({"pretrained": pretrained, "dtype": dtype})
    argv = [python, "-m", "lm_eval", "run", "--model", INPROCESS_MODEL_CLASS, "--model_args", model_args,
            "--device", "cpu", "--batch_size", str(batch_size)]
    argv += task_args(task, output_dir=output_dir, limit=limit, tasks_dir=tasks_dir)
    return LmEvalInvocation(argv, task_cwd(task, output_dir, tasks_dir), shlex.join(argv))
