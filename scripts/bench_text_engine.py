#!/usr/bin/env python3
"""Benchmark: our slot loop vs transformers' own continuous batching, in one process, on CPU.

Run with the media-server venv (torch, transformers) from the repository root:

    .workflow_venvs/media-server/bin/python scripts/bench_text_engine.py --threads 1 --tokens 16 --rounds 3

What it measures (greedy, end-of-sequence ignored, the same chat prompts for both):
- ``ours``: the slot loop (text_engine.SlotEngine + text_backend_hf): aggregate generated
  tokens/s with 1 and with 8 concurrent users (prefill included), and the 8/1 ratio;
- ``hf_cb``: transformers' ContinuousBatchingManager on the same model: its set-up time (cache
  sizing + warm-up, paid once per process), then tokens/s at 1 and 8 requests. Its paged cache
  is capped at 5% of memory here: left to size itself it took ~12 GB and was OOM-killed on a
  shared 23 GB host;
- ``newcomer``: time to first token of a user arriving while 7 decode, next to the median step.
A shared machine's load drifts, so the four runs alternate in rounds and medians are reported;
per-round lines (with the 1-minute load average) go to stderr, the JSON summary to stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import _repo  # noqa: E402  (the media server importable: scripts/_repo.py)

_repo.use_media_server()

QUESTIONS = ["Tell me a story about a cat.", "What is the capital of France?", "Write a haiku about rain.",
             "Explain photosynthesis simply.", "List three fruits.", "How do airplanes fly?",
             "Describe the ocean.", "Why is the sky blue?", "What is a prime number?"]


def _messages(i: int) -> list[dict]:
    return [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}]


def bench_slots(backend, users: int, tokens: int) -> dict:
    from media_server.runners.text_engine import SlotEngine
    from media_server.runners.text_params import TextRequest

    engine = SlotEngine(backend, max_slots=8, prefill_chunk=128)
    started = time.perf_counter()
    for i in range(users):
        engine.submit(f"u{i}", TextRequest(messages=_messages(i), max_tokens=tokens, temperature=0.0,
                                           ignore_eos=True))
    generated = 0
    while engine.has_work():
        for event in engine.step():
            if event.type == "done":
                generated += event.data["completion_tokens"]
    seconds = time.perf_counter() - started
    return {"users": users, "tokens": generated, "seconds": round(seconds, 3),
            "tokens_per_s": round(generated / seconds, 2)}


def bench_newcomer(backend, tokens: int) -> dict:
    from media_server.runners.text_engine import SlotEngine
    from media_server.runners.text_params import TextRequest

    engine = SlotEngine(backend, max_slots=8, prefill_chunk=128)
    for i in range(7):
        engine.submit(f"u{i}", TextRequest(messages=_messages(i), max_tokens=tokens * 2, temperature=0.0,
                                           ignore_eos=True))
    step_times = []
    for _ in range(6):  # the seven are decoding
        t = time.perf_counter()
        engine.step()
        step_times.append(time.perf_counter() - t)
    arrived = time.perf_counter()
    engine.submit("new", TextRequest(messages=_messages(8), max_tokens=tokens, temperature=0.0,
                                     ignore_eos=True))
    ttft = None
    others_done = 0
    while engine.has_work():
        t = time.perf_counter()
        events = engine.step()
        step_times.append(time.perf_counter() - t)
        for event in events:
            if event.request_id == "new" and ttft is None:
                ttft = time.perf_counter() - arrived
            if event.type == "done" and event.request_id != "new":
                others_done += 1
        if ttft is not None and others_done == 0:
            for i in range(7):
                engine.cancel(f"u{i}")
            engine.cancel("new")
    return {"newcomer_ttft_ms": round(ttft * 1000, 1) if ttft else None,
            "busy_step_p50_ms": round(statistics.median(step_times) * 1000, 1),
            "others_still_running_at_first_token": others_done == 0}


class HfContinuousBatching:
    """transformers' ContinuousBatchingManager on the same model, started once (set-up timed)."""

    def __init__(self, model, tokenizer, tokens: int):
        from transformers import GenerationConfig
        from transformers.generation.configuration_utils import ContinuousBatchingConfig

        self.prompts = []
        for i in range(8):
            ids = tokenizer.apply_chat_template(_messages(i), add_generation_prompt=True, tokenize=True)
            self.prompts.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
        self.tokens = tokens
        config = GenerationConfig(max_new_tokens=tokens, do_sample=False, eos_token_id=-1,
                                  pad_token_id=tokenizer.pad_token_id)
        t = time.perf_counter()
        self.manager = model.init_continuous_batching(generation_config=config,
                                                      continuous_batching_config=ContinuousBatchingConfig(max_memory_percent=0.05))
        self.manager.warmup()
        self.manager.start()
        self.setup_s = round(time.perf_counter() - t, 2)

    def run(self, users: int) -> dict:
        t = time.perf_counter()
        ids = self.manager.add_requests(self.prompts[:users], max_new_tokens=self.tokens)
        generated, left = 0, set(ids)
        while left:
            out = self.manager.get_result(timeout=120)
            if out is None:
                raise RuntimeError("transformers continuous batching returned nothing in 120 s")
            if out.is_finished() and out.request_id in left:
                left.discard(out.request_id)
                generated += len(out.generated_tokens)
        seconds = time.perf_counter() - t
        return {"users": users, "tokens": generated, "seconds": round(seconds, 3),
                "tokens_per_s": round(generated / seconds, 2)}

    def stop(self) -> None:
        self.manager.stop(block=True, timeout=30)


def _median_rate(runs: list[dict]) -> float:
    return round(statistics.median(r["tokens_per_s"] for r in runs), 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=os.path.expanduser(
        "~/.cache/tt-inference-server/models/SmolLM2-135M-Instruct"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternations of (ours 1, ours 8, hf 1, hf 8): a shared machine's load drifts")
    parser.add_argument("--skip-hf-cb", action="store_true")
    ns = parser.parse_args()
    from media_server.runners.text_backend_hf import HfSlotBackend

    backend = HfSlotBackend(ns.model, threads=ns.threads)
    bench_slots(backend, 1, 2)  # warm-up
    cb = None if ns.skip_hf_cb else HfContinuousBatching(backend.model, backend.tokenizer, ns.tokens)
    rounds = []
    for index in range(ns.rounds):
        entry = {"ours_1": bench_slots(backend, 1, ns.tokens), "ours_8": bench_slots(backend, 8, ns.tokens)}
        if cb is not None:
            entry["hf_cb_1"] = cb.run(1)
            entry["hf_cb_8"] = cb.run(8)
        entry["load_avg_1m"] = round(os.getloadavg()[0], 1)
        rounds.append(entry)
        print(json.dumps({"round": index, **entry}), file=sys.stderr, flush=True)
    report = {"threads": ns.threads, "tokens_per_user": ns.tokens, "rounds": rounds}
    for name in ("ours", "hf_cb"):
        if f"{name}_1" in rounds[0]:
            one, eight = _median_rate([r[f"{name}_1"] for r in rounds]), _median_rate([r[f"{name}_8"] for r in rounds])
            report[name] = {"median_tokens_per_s_1": one, "median_tokens_per_s_8": eight,
                            "ratio_8_over_1": round(eight / one, 2)}
    if cb is not None:
        report["hf_cb"]["setup_s"] = cb.setup_s
        cb.stop()
    report["newcomer"] = bench_newcomer(backend, ns.tokens)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
