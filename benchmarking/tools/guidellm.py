"""GuideLLM (``guidellm run``) as a benchmarks tool: our prompts in, its per-request stats out.

GuideLLM reads our prompts from a JSONL file (``prompt`` and ``output_tokens_count`` columns, its
generative column mapper's default names) and its JSON report keeps every request's stats
(``requests.successful / errored / incomplete``) with wall-clock timings: request start, first and
last token iteration. It keeps no per-chunk times, so a GuideLLM point has TTFT, TPOT and E2EL per
request but no inter-chunk latency (said in the point's warnings).

Offline: the tokenizer is the served model's local directory and the hub is switched off.
"""
from __future__ import annotations

import json
import os

from benchmarking.metrics import RequestRecord
from benchmarking.tools import ToolJob, ToolUnavailable, error_class

VENV = "guidellm"
EXECUTABLE = "guidellm"
DISTRIBUTION = "guidellm"
PROMPTS = "ours"
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
REPORT = "benchmarks.json"
WARNINGS = ["guidellm keeps no per-chunk times: inter-chunk latency (itl) is not measured at this point"]


def write_dataset(job: ToolJob) -> str:
    """Our prompts as GuideLLM's JSONL rows; returns the file's path."""
    path = os.path.join(job.out_dir, "prompts.jsonl")
    with open(path, "w", encoding="utf-8") as fh:
        for text in job.prompts:
            fh.write(json.dumps({"prompt": text, "output_tokens_count": job.osl}) + "\n")
    return path


def command(exe: str, job: ToolJob) -> list[str]:
    """argv for one point: ``concurrent`` streams (or ``poisson`` at the point's rate, capped at its
    concurrency) until every prompt was sent once."""
    if not job.tokenizer_dir:
        raise ToolUnavailable("guidellm: needs the served model's local tokenizer directory (TT_TOKENIZER_DIR)")
    backend = {"kind": "openai_http", "target": job.base_url, "model": job.model, "request_format": job.endpoint,
               "timeout": job.request_timeout_s, "extras": {"body": job.body_extras()}}
    if job.api_key:
        backend["api_key"] = job.api_key
    profile = ({"kind": "concurrent", "streams": [job.concurrency]} if job.request_rate == float("inf") else
               {"kind": "poisson", "rate": [job.request_rate], "max_concurrency": job.concurrency})
    dataset = write_dataset(job)
    return [exe, "run", "--backend", json.dumps(backend), "--profile", json.dumps(profile),
            "--constraint", f"kind=max_requests,count={job.num_prompts}",
            "--tokenizer", json.dumps({"kind": "huggingface_auto", "model": job.tokenizer_dir}),
            "--data", json.dumps({"kind": "json_file", "path": dataset}),
            "--seed", f"kind=static,value={job.seed}",
            "--output", json.dumps({"kind": "json", "path": os.path.join(job.out_dir, REPORT)}),
            "--disable-console-interactive"]


def parse(job: ToolJob) -> tuple[list[RequestRecord], float, str]:
    """(our rows, duration s, raw file) from the JSON report's one benchmark."""
    path = os.path.join(job.out_dir, REPORT)
    with open(path, encoding="utf-8") as fh:
        bench = json.load(fh)["benchmarks"][0]
    groups = bench["requests"]
    raw = [(status, r) for status in ("successful", "errored", "incomplete") for r in groups.get(status) or []]
    raw.sort(key=lambda item: _start(item[1]))
    rows = [to_row(job, i, status, r) for i, (status, r) in enumerate(raw)]
    return rows, float(bench.get("duration") or 0.0), path


def _start(raw: dict) -> float:
    timings = (raw.get("info") or {}).get("timings") or {}
    return float(timings.get("request_start") or raw.get("request_start_time") or 0.0)


def to_row(job: ToolJob, index: int, status: str, raw: dict) -> RequestRecord:
    """One GuideLLM request as our row (times relative to its request start, in s)."""
    info = raw.get("info") or {}
    timings = info.get("timings") or {}
    start = _start(raw)
    row = RequestRecord(index=index, request_id=f"guidellm-{job.isl}-{job.osl}-{job.concurrency}-{index}",
                        prompt_len=job.isl, requested_output_len=job.osl, send_time=start,
                        server_request_id=raw.get("response_id"))
    first, last = timings.get("first_token_iteration"), timings.get("last_token_iteration")
    if status != "successful" or first is None:
        row.error = str(info.get("error") or f"guidellm: request {status}")[:500]
        row.error_class = error_class(None, row.error) if status == "errored" else "other"
        return row
    row.success, row.status = True, 200
    row.ttft = first - start
    row.latency = (last if last is not None else first) - start
    first_text = timings.get("first_output_token_iteration")
    row.ttft_nonempty = None if first_text is None else first_text - start
    row.input_tokens, row.input_token_source = raw.get("prompt_tokens"), "usage"
    row.output_tokens, row.output_token_source = raw.get("output_tokens"), "usage"
    return row
