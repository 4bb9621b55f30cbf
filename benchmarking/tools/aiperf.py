"""AIPerf (``aiperf profile``) as a benchmarks tool: our prompts in, its per-request records out.

AIPerf reads our prompts as a ``single_turn`` JSONL dataset (one row per request, with the output
length and the body fields that make the server produce exactly ``osl`` tokens) and, at
``--export-level records``, writes one JSON line per request (``profile_export.jsonl``) with its
start time in ns, TTFT and every inter-chunk gap: enough to rebuild our rows, chunk times included.

Offline: the tokenizer is the served model's local directory. AIPerf's own offline switch
(HF_HUB_OFFLINE) makes it look the directory up in the hub cache, so it is removed from the tool's
environment (``UNSET_ENV``); a local path is never resolved against the hub, and telemetry is off
(``benchmarking.tools.tool_env``).
"""
from __future__ import annotations

import json
import os

from benchmarking.metrics import RequestRecord
from benchmarking.tools import ToolJob, ToolUnavailable, error_class

VENV = "aiperf"
EXECUTABLE = "aiperf"
DISTRIBUTION = "aiperf"
PROMPTS = "ours"
ENV: dict[str, str] = {}
UNSET_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")  # see the module docstring: a local path needs no hub
RECORDS_FILE = os.path.join("artifacts", "profile_export.jsonl")


def write_dataset(job: ToolJob) -> str:
    """Our prompts as AIPerf's single_turn rows; returns the file's path."""
    path = os.path.join(job.out_dir, "prompts.jsonl")
    with open(path, "w", encoding="utf-8") as fh:
        for text in job.prompts:
            fh.write(json.dumps({"text": text, "output_length": job.osl, "extra": job.body_extras()}) + "\n")
    return path


def command(exe: str, job: ToolJob) -> list[str]:
    """argv for one point: closed loop at the point's concurrency (or its arrival rate), every prompt once."""
    if not job.tokenizer_dir:
        raise ToolUnavailable("aiperf: needs the served model's local tokenizer directory (TT_TOKENIZER_DIR)")
    cmd = [exe, "profile", "--model", job.model, "--url", job.base_url,
           "--endpoint-type", "chat" if job.chat else "completions", "--streaming",
           "--tokenizer", job.tokenizer_dir, "--input-file", write_dataset(job),
           "--custom-dataset-type", "single_turn", "--dataset-sampling-strategy", "sequential",
           "--concurrency", str(job.concurrency), "--request-count", str(job.num_prompts),
           "--request-timeout-seconds", f"{job.request_timeout_s:g}", "--random-seed", str(job.seed),
           "--output-artifact-dir", os.path.join(job.out_dir, "artifacts"), "--export-level", "records",
           "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry", "--no-auto-plot"]
    if job.request_rate != float("inf"):
        cmd += ["--request-rate", f"{job.request_rate:g}"]
    if job.api_key:
        cmd += ["--api-key", job.api_key]
    return cmd


def parse(job: ToolJob) -> tuple[list[RequestRecord], float, str]:
    """(our rows, duration s, raw file) from ``profile_export.jsonl``: profiling-phase records only."""
    path = os.path.join(job.out_dir, RECORDS_FILE)
    with open(path, encoding="utf-8") as fh:
        raw = [json.loads(line) for line in fh if line.strip()]
    raw = [r for r in raw if (r.get("metadata") or {}).get("benchmark_phase", "profiling") == "profiling"]
    rows = [to_row(job, i, r) for i, r in enumerate(raw)]
    starts = [r["metadata"]["request_start_ns"] for r in raw if r["metadata"].get("request_start_ns")]
    ends = [r["metadata"]["request_end_ns"] for r in raw if r["metadata"].get("request_end_ns")]
    duration = (max(ends) - min(starts)) / 1e9 if starts and ends else 0.0
    return rows, duration, path


def _value(metrics: dict, key: str):
    item = metrics.get(key)
    return item.get("value") if isinstance(item, dict) else None


def to_row(job: ToolJob, index: int, raw: dict) -> RequestRecord:
    """One AIPerf record as our row: chunk times rebuilt from TTFT and the inter-chunk gaps (ms -> s)."""
    meta, m, err = raw.get("metadata") or {}, raw.get("metrics") or {}, raw.get("error")
    row = RequestRecord(index=index, request_id=f"aiperf-{job.isl}-{job.osl}-{job.concurrency}-{index}",
                        prompt_len=job.isl, requested_output_len=job.osl,
                        send_time=(meta.get("request_start_ns") or 0) / 1e9,
                        server_request_id=meta.get("x_request_id"))
    if err:
        row.status = err.get("code") if isinstance(err.get("code"), int) else None
        row.error = f"{err.get('type') or ''}: {err.get('message') or ''}".strip(": ")[:500]
        row.error_class = error_class(row.status, row.error)
        return row
    ttft = _value(m, "time_to_first_token")
    if ttft is None:
        row.error_class, row.error = "no_content", "aiperf recorded no first token"
        return row
    times = [ttft / 1000.0]
    for gap in _value(m, "inter_chunk_latency") or []:
        times.append(times[-1] + gap / 1000.0)
    first_text = _value(m, "time_to_first_output_token")
    row.success, row.status, row.ttft, row.chunk_times = True, 200, times[0], times
    row.ttft_nonempty = None if first_text is None else first_text / 1000.0
    row.latency = times[-1] if len(times) > 1 else (_value(m, "request_latency") or ttft) / 1000.0
    usage_in, usage_out = _value(m, "usage_prompt_tokens"), _value(m, "usage_completion_tokens")
    row.input_tokens = usage_in if usage_in is not None else _value(m, "input_sequence_length")
    row.input_token_source = "usage" if usage_in is not None else "dataset"
    row.output_tokens = usage_out if usage_out is not None else _value(m, "output_token_count")
    row.output_token_source = "usage" if usage_out is not None else "tokenizer"
    return row
