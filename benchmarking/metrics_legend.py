"""Definitions of every benchmark metric key we write (stdlib only).

The report workflow prints this legend next to the numbers, so a reader never has to guess
which TTFT rule or which "ITL" a column means (peers disagree on the names; see
docs: benchmark-peers §7). Keys follow vLLM's saved-result names so files from either tool
line up; the extra keys are ours.
"""
from __future__ import annotations

LEGEND: dict[str, str] = {
    "duration": "Wall time (s) from the first measured request's dispatch until every measured request "
                "finished; warm-up requests are excluded.",
    "completed": "Measured requests that streamed at least one chunk with non-empty `choices` and ended cleanly.",
    "failed": "Measured requests that were sent but did not complete (see failures_by_class).",
    "total_input_tokens": "Sum of prompt tokens over completed requests (server usage.prompt_tokens when "
                          "reported, else the prompt's tokenizer length).",
    "total_output_tokens": "Sum of output tokens over completed requests (see output_token_source).",
    "request_throughput": "completed / duration (requests/s).",
    "output_throughput": "total_output_tokens / duration (tokens/s, whole system).",
    "total_token_throughput": "(total_input_tokens + total_output_tokens) / duration (tokens/s).",
    "request_goodput": "Completed requests meeting every goodput SLO (ttft, tpot, e2el; DistServe rule, "
                       "tpot of a 1-token answer counts as 0) / duration; null when no SLO was given.",
    "ttft": "Time to first token (ms): dispatch -> arrival of the first SSE chunk whose `choices` is "
            "non-empty, even if its text is empty (vLLM's rule).",
    "ttft_first_nonempty": "Dispatch -> first chunk carrying non-empty text (AIPerf/inference-perf rule).",
    "tpot": "Time per output token after the first (ms), per request: (e2el - ttft) / (output_tokens - 1); "
            "only requests with more than one output token. Same quantity as GuideLLM/AIPerf 'ITL'.",
    "itl": "Inter-chunk latency (ms): every gap between consecutive content chunks, flattened over all "
           "completed requests (vLLM 'itl', AIPerf 'inter_chunk_latency'). Not per token if the server bundles.",
    "e2el": "End-to-end latency (ms): dispatch -> last content chunk of the request.",
    "tput_user": "Tokens/s per user = 1000 / mean_tpot_ms (Tenstorrent 't/s/u').",
    "decode_throughput": "tput_user * min(max_concurrency, num_prompts) (tokens/s; the reference's "
                         "'Tput Decode'; compared with the spec's `tput` target).",
    "prefill_throughput": "isl * min(max_concurrency, num_prompts) / (mean_ttft_ms / 1000) (tokens/s; "
                          "the reference's 'Tput Prefill').",
    "failures_by_class": "Count of failed requests per error class: http_4xx, http_5xx, connection_reset, "
                         "connect_error, malformed_sse, stream_error, no_content, timeout, budget_exceeded, other.",
    "output_token_source": "Where output token counts came from: 'usage' (server usage), 'tokenizer' "
                           "(generated text re-tokenized), 'chunks' (one token per content chunk; no tokenizer), "
                           "or 'mixed'.",
    "output_length_mismatches": "Completed requests whose output tokens differ from the requested osl "
                                "(ignore_eos/min_tokens not honoured).",
    "input_token_drift": "Mean (server prompt_tokens - intended isl) over completed requests that reported "
                         "usage; non-zero means the prompt did not survive tokenization exactly "
                         "(or the server adds BOS/template tokens).",
    "tput": "Target tier field: decode throughput (tokens/s) at the point's concurrency.",
    "ttft_ratio": "measured mean TTFT / target TTFT (lower is better; pass when <= 1).",
    "tput_user_ratio": "measured tput_user / target (higher is better; pass when >= 1).",
    "tput_ratio": "measured decode_throughput / target tput (higher is better; pass when >= 1).",
}


def describe(key: str) -> str:
    """Definition for a saved metric key, e.g. 'p99_itl_ms' -> the 'itl' entry with the statistic named."""
    if key in LEGEND:
        return LEGEND[key]
    for stat in ("mean", "median", "std"):
        prefix = stat + "_"
        if key.startswith(prefix) and key.endswith("_ms"):
            base = key[len(prefix):-3]
            if base in LEGEND:
                return f"{stat} of {base}: {LEGEND[base]}"
    if key.startswith("p") and key.endswith("_ms") and "_" in key:
        pct, _, rest = key[1:].partition("_")
        base = rest[:-3]
        if base in LEGEND:
            return f"{pct}th percentile (linear interpolation) of {base}: {LEGEND[base]}"
    return ""
