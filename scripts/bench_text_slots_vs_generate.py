#!/usr/bin/env python3
"""Benchmark: 8 streams through the media server's text slots vs transformers generate() on a
static batch of 8, same model, same prompts, same token count, in one process tree, in turns.

Run with the media-server venv (torch, transformers) from the repository root:

    .workflow_venvs/media-server/bin/python scripts/bench_text_slots_vs_generate.py \
        [--streams 8] [--tokens 64] [--rounds 3] [--threads 1] [--json out.json]

Served side: a real media server (uvicorn + one worker, ``MODEL_RUNNER=text-slots``, the
server's default ``TEXT_BACKEND=auto``, i.e. the slot loop's own Llama forward on
SmolLM2-135M-Instruct; ``--server-env TEXT_BACKEND=hf`` for the transformers forward) is
started as a child; each round opens ``--streams``
concurrent streaming /v1/completions requests of ``--tokens`` tokens (greedy, end of sequence
ignored, each request its own prompt) from plain sockets; tokens/s = all completion tokens /
the round's wall time (prefill included, measured outside the server). Direct side: the same
prompts as one left-padded batch to ``model.generate(max_new_tokens=min_new_tokens=tokens,
do_sample=False)`` in this process with the server idle; tokens/s the same way. Both sides use
``--threads`` torch threads (the server's worker: CPU_THREADS_PER_WORKER).

    ratio = served tokens/s / generate() tokens/s          (goal: >= 1.0)

Per round it also prints the CPU core-seconds per 1k generated tokens of each side: the server's
whole process tree (/proc, contracts/cpu_cost.py) and this process during generate(). On a shared,
overloaded host the tokens/s ratio also measures how the kernel shares the cores between the
server's two processes and everything else; the core-seconds compare the work itself. The median
ratio and its spread over the rounds close the output.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import _repo  # noqa: E402  (the repository and scripts/ importable: scripts/_repo.py)

_repo.use_media_server()

from bench_text_overhead import API_KEY, _free_port, _request, _wait_ready, stop_server  # noqa: E402
from contracts.cpu_cost import CostProbe  # noqa: E402

PROMPTS = ["Tell me a story about a cat.", "What is the capital of France?", "Write a haiku about rain.",
           "Explain photosynthesis simply.", "List three fruits.", "How do airplanes fly?",
           "Describe the ocean.", "Why is the sky blue?", "What is a prime number?", "Name a color."]


def one_stream(port: int, model: str, prompt: str, tokens: int) -> int:
    """Completion tokens of one SSE stream; SystemExit when the stream is wrong."""
    raw = _request(port, "/v1/completions", {"model": model, "prompt": prompt, "max_tokens": tokens, "stream": True,
                                          "temperature": 0.0, "ignore_eos": True,
                                          "stream_options": {"include_usage": True}})
    if b" 200 " not in raw.split(b"\r\n", 1)[0] or b"data: [DONE]" not in raw:
        raise SystemExit(f"benchmark: a stream failed: {raw[:300]!r}")
    usage = [json.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: {") and b'"usage"' in line]
    completion = (usage[-1].get("usage") or {}).get("completion_tokens") if usage else None
    if completion != tokens:
        raise SystemExit(f"benchmark: a stream returned {completion} tokens, expected {tokens}")
    return completion


def main() -> int:
    ns = _parse_args()
    if not 1 <= ns.streams <= 64 or ns.tokens < 1 or ns.rounds < 1 or ns.threads < 1:
        print("benchmark: --streams 1..64, --tokens, --rounds and --threads >= 1", file=sys.stderr)
        return 2
    direct = DirectGenerate.load(ns)
    if direct is None:
        return 2
    from media_server.runners.text_slots import DEFAULT_MODEL_ID

    port = _free_port()
    env = _server_env(ns, direct.model_dir)
    log = tempfile.NamedTemporaryFile(prefix="bench-text-slots-", suffix=".log", delete=False)
    process = subprocess.Popen([sys.executable, "-m", "uvicorn", "main:app", "--lifespan", "on", "--host",
                                "127.0.0.1", "--port", str(port), "--no-access-log"],
                               cwd=os.path.join(ROOT, "tt-media-server"), env=env, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` stops the server
    rows: list[dict] = []
    try:
        _wait_ready(port, process, 600.0)
        served_model = env.get("TEXT_MODEL_ID", DEFAULT_MODEL_ID)
        one_stream(port, served_model, "warm up", 4)
        direct.round()  # warm-up
        _measure_rounds(ns, port, process, served_model, direct, rows)
    finally:
        stop_server(process)
        log.close()
    _summarize(ns, rows, log.name)
    return 0


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads on both sides")
    parser.add_argument("--server-env", nargs="*", default=[], metavar="NAME=VALUE")
    parser.add_argument("--json", help="also write the figures to this file")
    return parser.parse_args()


class DirectGenerate:
    """The direct side: the same prompts as one left-padded batch to transformers' generate(), in this process."""

    def __init__(self, model_dir: str, tokenizer, model, prompts: list[str], tokens: int) -> None:
        self.model_dir, self.tokenizer, self.model, self.prompts, self.tokens = (model_dir, tokenizer, model, prompts,
                                                                                 tokens)

    @classmethod
    def load(cls, ns: argparse.Namespace) -> "DirectGenerate | None":
        """The model the server serves, loaded here with ``--threads`` torch threads; None (after saying why)
        when its directory is missing."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from media_server.runners.text_slots import TextSettings

        model_dir = TextSettings().model_path()
        if not os.path.isdir(model_dir):
            print(f"benchmark: no model directory {model_dir} (scripts/download_models.py)", file=sys.stderr)
            return None
        torch.set_num_threads(ns.threads)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        prompts = [PROMPTS[i % len(PROMPTS)] for i in range(ns.streams)]
        return cls(model_dir, tokenizer, model, prompts, ns.tokens)

    def round(self) -> tuple[float, float]:
        """(tokens/s, this process's CPU core-seconds per 1k tokens) of one generate() call."""
        import torch

        batch = self.tokenizer(self.prompts, return_tensors="pt", padding=True)
        cpu_started = time.process_time()
        started = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(**batch, max_new_tokens=self.tokens, min_new_tokens=self.tokens,
                                      do_sample=False, pad_token_id=self.tokenizer.pad_token_id)
        wall = time.perf_counter() - started
        generated = (out.shape[1] - batch["input_ids"].shape[1]) * len(self.prompts)
        return generated / wall, (time.process_time() - cpu_started) * 1000 / generated


def _server_env(ns: argparse.Namespace, model_dir: str) -> dict[str, str]:
    """The served side's environment: text slots on the same model and threads, ``--server-env`` last."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_", "MODEL", "DEVICE"))}
    env.update({"API_KEY": API_KEY, "ENVIRONMENT": "development", "LOG_LEVEL": "WARNING", "MODEL_RUNNER": "text-slots",
                "TEXT_BACKEND": "auto",
                "MAX_USER_SLOTS": str(max(8, ns.streams)), "MAX_QUEUE_SIZE": "128",
                "CPU_THREADS_PER_WORKER": str(ns.threads), "TEXT_MODEL_PATH": model_dir, "PYTHONUNBUFFERED": "1",
                **dict(item.split("=", 1) for item in ns.server_env)})
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    return env


def _measure_rounds(ns: argparse.Namespace, port: int, process: subprocess.Popen, served_model: str,
                    direct: DirectGenerate, rows: list[dict]) -> None:
    """The rounds, served then direct in turn, each appended to ``rows`` (kept if a later round fails)."""
    prompts = direct.prompts
    with concurrent.futures.ThreadPoolExecutor(ns.streams) as pool:
        for index in range(ns.rounds):
            probe = CostProbe(pid=process.pid).start()
            started = time.perf_counter()
            total = sum(pool.map(lambda p: one_stream(port, served_model, p, ns.tokens), prompts))
            wall = time.perf_counter() - started
            cost = probe.stop()
            served = total / wall
            direct_rate, direct_per_1k = direct.round()
            per_1k = cost.per(total, 1000)
            rows.append({"round": index + 1, "served_tokens_per_s": round(served, 2),
                         "generate_tokens_per_s": round(direct_rate, 2), "ratio": round(served / direct_rate, 3),
                         "server_core_seconds_per_1k_tokens": None if per_1k is None else round(per_1k, 3),
                         "generate_core_seconds_per_1k_tokens": round(direct_per_1k, 3),
                         "load_avg_1m": round(os.getloadavg()[0], 2)})
            print(f"round {index + 1}: served {served:.1f} tokens/s ({ns.streams} streams x {ns.tokens} tokens), "
                  f"generate() batch {ns.streams} {direct_rate:.1f} tokens/s, ratio {served / direct_rate:.2f}x; "
                  f"server {rows[-1]['server_core_seconds_per_1k_tokens']} core-s per 1k tokens (generate() "
                  f"{rows[-1]['generate_core_seconds_per_1k_tokens']}); "
                  f"load {rows[-1]['load_avg_1m']}", flush=True)


def _summarize(ns: argparse.Namespace, rows: list[dict], log_name: str) -> None:
    """The closing line (median ratio and its spread), and the figures to ``--json``."""
    ratios = [row["ratio"] for row in rows]
    summary = {"streams": ns.streams, "tokens": ns.tokens, "threads": ns.threads, "rounds": rows,
               "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios)}
    print(f"text slots vs generate(): ratio median {summary['ratio_median']:.2f}x (min {summary['ratio_min']:.2f}, "
          f"max {summary['ratio_max']:.2f}, {len(rows)} rounds); server log {log_name}")
    if ns.json:
        with open(ns.json, "w", encoding="utf-8") as handle:
            json.dump(summary, handle, indent=2)

if __name__ == "__main__":
    sys.exit(main())
