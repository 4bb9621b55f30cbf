"""The ``--workflow-args`` keys each workflow accepts, declared as data (stdlib only).

Why a table here and not in each client package: the CLI checks keys up front, before any venv
exists, so a typo fails in one line instead of after a long server start. Reading the keys from
the client packages would make the lowest layer load modules above it (and would force those
modules to stay stdlib-only). So the keys, with their one-line help, live here; each client
workflow reads its own table (``BENCHMARK_ARGS``...) and parses the values itself.

Evals and benchmarks also take keys they do not own (the documented ``"batch_size=4 max_tokens=512"``):
``PASSTHROUGH`` says where such a key goes and which keys or values it may not be.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: Keys every workflow accepts. ``mode`` sizes benchmarks, evals, tests and stress_tests alike.
COMMON_ARGS: Mapping[str, str] = {"mode": "smoke | ci | full (default ci): how much of the workflow to run"}

BENCHMARK_ARGS: Mapping[str, str] = {
    "mode": "smoke | ci | full (default ci): how much of the sweep to run",
    "only_targets": "true: only the spec's perf_reference points",
    "points": "ISLxOSLxCON[xN],...: run exactly these points",
    "percentiles": "comma list, default 50,90,99",
    "goodput": "SLOs for request_goodput, e.g. ttft:500,tpot:50,e2el:10000 (ms)",
    "tools": "tt (default) or tt,vllm / vllm: also run `vllm bench serve` over the same points",
    "vllm_python": "python of a venv with vllm installed (for tools=vllm); or env TT_VLLM_BENCH_PYTHON",
    "tool": "ours (default) | vllm | aiperf | guidellm: the load generator that measures every point, run from its "
            "own pinned venv against the same server with the same prompts (vllm: its own random prompts); "
            "its point records name it",
    "agreement": "ours | vllm | aiperf | guidellm: also measure each judged point with our client and this tool in "
                 "interleaved ABBA blocks and decide, per metric (mean TTFT, mean TPOT, output tokens/s), whether "
                 "they agree (verdict checks 'agreement <metric> <point> <tool>'); ours measures our own "
                 "run-to-run band",
    "agreement_band": "agreement: the noise band, a share (default 0.1): agree when the ratio's 95% interval lies "
                      "within [1/(1+band), 1+band], disagree when wholly outside",
    "agreement_cycles": "agreement: the most ABBA cycles per point (default 4; looks after each from the second)",
    "ab_cycles": "--baseline-url / --baseline-vllm-args: the most ABBA cycles per judged point on the baseline and "
                 "this run's server (default 6; looks after each from the second)",
    "budget_s": "hard wall-time budget for the whole sweep (s)",
    "point_budget_s": "hard wall-time budget per point (s)",
    "precision": "adaptive sample size: a point with an undecided required target sends more requests until "
                 "each target metric's 95% interval half-width is at most this share of its value "
                 "(default 0.05)",
    "sample_budget_s": "adaptive sample size: seconds of requests per point after which no further round "
                       "starts (default: smoke 30, ci 60, full 300)",
    "request_rate": "requests/s (default inf = all at once, bounded by concurrency)",
    "burstiness": "gamma shape of inter-arrival gaps: 1 = Poisson, inf = constant (default 1)",
    "ramp": "linear ramp of request rate START:END (req/s) across the point",
    "dataset": "random (default) | lookup | jsonl:PATH | shared_prefix[:PREFIX_LEN]; lookup: prompts that quote, "
               "edit code and repeat structure, where a speculative n-gram draft can hit (random: free generation)",
    "spec_decode_metrics_url": "URL[,URL]: read the spec-decode counters (vllm:spec_decode_* or tt_spec_decode_*) "
                               "before and after each point from these /metrics endpoints, summed over the "
                               "workers (an external or multi-worker server), instead of the server's own",
    "endpoint": "completions (default) | chat",
    "warmup_requests": "requests per point sent before measuring and excluded from stats (default 0)",
    "num_prompts": "override the prompt count of every point",
    "request_timeout_s": "per-request total timeout (default 1800)",
    "stall_timeout_s": "max silence (no headers / no chunk) before a request fails as a stall "
                       "(default: smoke 60, ci and full 300); must be below point_budget_s",
    "seed": "random seed for prompts and arrivals (default 0)",
    "workload": "trace | multi_turn | shared_prefix | agentic: realistic traffic instead of independent prompts "
                "(benchmarking/workloads/)",
    "sessions_file": "workload=agentic: a session file (JSONL: per session its turns, each user_tokens or a tool's "
                     "tool_result_tokens, think_s; benchmarking/workloads/agentic.py) (default the bundled one)",
    "sessions": "workload=agentic: agent sessions to run, the file's in order (default 3)",
    "trace_file": "workload=trace: the trace to replay, Mooncake JSONL (timestamp ms, input_length, "
                  "output_length, hash_ids) or JSONL/CSV of (timestamp ms, input tokens, output tokens)",
    "time_scale": "workload=trace: speed factor, 2 replays twice as fast (default 1)",
    "max_lateness_ms": "workload=trace: a request leaving later than this after its timestamp means the "
                       "client did not keep up; the run fails (default 50)",
    "block_tokens": "workload=trace: tokens per Mooncake hash_ids block (default 512)",
    "turns": "workload=multi_turn: turns per conversation (default 3)",
    "think_time_s": "workload=multi_turn: pause between an answer and the next turn (default 0.5)",
    "prefixes": "workload=shared_prefix: distinct shared prefixes (system prompts) (default 4)",
    "prefix_tokens": "workload=shared_prefix: tokens of each shared prefix (default isl/2)",
}

EVAL_ARGS: Mapping[str, str] = {
    "mode": "smoke | ci | full (default ci): the sample set of each task",
    "tasks": "a,b: run only these task names",
    "limit": "N: override the sample limit of every task",
}

TEST_ARGS: Mapping[str, str] = {
    "markers": "pytest -m expression selecting the cases (e.g. 'auth or errors')",
    "test_name": "pytest -k expression selecting the cases by name",
    "list_tests": "true: list the cases that would run, run none",
}

STRESS_ARGS: Mapping[str, str] = {
    "run_mode": "single | multiple | custom | endurance | capacity (comma list; default by mode: smoke single, ci "
                "single,capacity, full multiple,endurance,capacity; with tool= only the fixed-size ones of those)",
    "max_context_length": "largest ISL+OSL a generated point may use",
    "input_size": "ISL of the single point",
    "output_size": "OSL of the single point",
    "max_concurrent": "concurrency of the single point",
    "num_prompts": "requests of each point",
    "custom_isl_values": "comma list of ISLs, as fractions of max context or token counts when > 1 (run_mode=custom)",
    "custom_osl_values": "comma list of OSLs (run_mode=custom)",
    "custom_concurrency_values": "comma list of concurrencies (run_mode=custom)",
    "endurance_s": "length of the endurance run (s)",
    "window_s": "length of one endurance time slice (s)",
    "slo": "latency objectives, e.g. ttft_p99:2000,tpot_p99:150 (ms)",
    "goodput_goal": "share of requests that must meet every SLO for a level to hold (default 0.95)",
    "capacity_metric": "concurrency | rate: what the capacity search raises",
    "capacity_start": "first level of the capacity search",
    "capacity_max": "highest level the capacity search tries",
    "capacity_target": "the capacity the spec expects (judged)",
    "requests_per_level": "requests sent at each capacity level",
    "saturation": "on (default) | off: stop a point once the server is over-saturated",
    "max_error_rate": "highest error rate a point may have and pass (default 0.0)",
    "max_latency_drift_pct": "highest e2e latency drift between the first and last endurance slice after warm-up "
                             "(the p99, or what a short run can bound: p95, p90, the geometric mean), % (default 20)",
    "max_memory_growth_pct": "highest server memory growth after warm-up, % (default 10)",
    "budget_s": "hard wall-time budget for the whole workflow (s)",
    "server_container": "Docker container of the server (its memory is read with docker stats)",
    "workload": "trace | multi_turn | shared_prefix | agentic: run that benchmarks workload "
                "(benchmarking/workloads/) as a stress point, judged like the others (LLM models); without run_mode= "
                "only it runs",
    "tool": "ours (default) | vllm | aiperf | guidellm: the load generator that sends each fixed-size load point "
            "(single, multiple, custom), from its own pinned venv with our prompts (vllm: its own random prompts), "
            "judged unchanged from its per-request output; its point records name it. What only our client does is "
            "refused (run_mode=endurance or capacity, workload=, saturation=on, the keys of those); left to the "
            "mode's defaults the run keeps their fixed-size modes (smoke and ci: single, full: multiple) and logs "
            "what it left out; the saturation detector does not run (LLM models)",
    # the workload's own keys, with the benchmarks' help (stress_tests/workload.py hands them over as they are)
    **{k: BENCHMARK_ARGS[k] for k in ("trace_file", "time_scale", "max_lateness_ms", "block_tokens", "turns",
                                      "think_time_s", "prefixes", "prefix_tokens", "sessions_file", "sessions")},
}

DEPLOY_ARGS: Mapping[str, str] = {
    "target": "k8s (default): what to render",
    "namespace": "namespace of every object (default: default)",
    "replicas": "server replicas (default 1)",
    "tt_devices": "plugin (default: tenstorrent.com/<board> resources) | hostpath (/dev/tenstorrent mount)",
    "hpa": "true: add a HorizontalPodAutoscaler on a per-pod Prometheus metric",
    "hpa_metric": "the metric the autoscaler follows (default vllm:num_requests_waiting)",
    "hpa_target": "average value per pod that triggers scaling (default 4)",
    "hpa_max_replicas": "upper bound for the autoscaler (default 4)",
    "job": "benchmarks (default) | evals | none: the client Job run against the Service",
    "mode": "smoke (default) | ci | full: the client Job's size",
    "client_image": "image with run.py for the client Job (default tt-inference-server-client:VERSION)",
    "weights_pvc": "an existing PersistentVolumeClaim with the weights (default: one is rendered)",
    "storage_class": "storage class of the rendered weights claim",
}

#: The release's own keys: how it runs its children (none of them reaches a child).
RELEASE_ARGS: Mapping[str, str] = {
    "overlap": "1 | 0: run the workflows that time nothing (evals, tests) side by side against the server, "
               "which saves their shorter one's wall time where the engine has room for both (default 1 on an "
               "accelerator, 0 on a CPU engine: its requests already use every core, measured no faster); 0 runs "
               "every client workflow alone, one after another: to read one client's output in run.log without "
               "the other's lines between, or for a server that cannot take two clients at once",
}

#: What the report prices a token at (``reports.pricing``): only the reports step reads them.
COST_ARGS: Mapping[str, str] = {
    "hourly_cost": "price of the machine per hour, e.g. 2.50: the report gives every benchmark point and the "
                   "SLO capacity a cost per million output tokens from the output throughput measured there",
    "currency": "currency of hourly_cost, named in the report (default USD)",
}

#: The comparison with a baseline run (``--compare-to``), and the price a report costs tokens at
#: (``COST_ARGS``): every workflow with a report takes them, and they reach its reports step only.
COMPARE_ARGS: Mapping[str, str] = {
    "regression_tolerance": "relative change a regression must exceed to fail, e.g. 0.05 (default: the spec's "
                            "regression_tolerance, else 0.05)",
    "on_regression": ("fail | warn: what a regression beyond the tolerance does to the verdict (default fail; "
                      "warn for a smoke release compared with last without --compare-to)"),
    "compare_hosts": "same (default) | any: also compare with a run from a host with another fingerprint",
    **COST_ARGS,
}

#: The performance tiers in order; ``perf_tiers`` names the highest one a run requires.
PERF_TIERS = ("functional", "complete", "target")

#: What the verdict requires: every workflow with a report takes them, like ``COMPARE_ARGS``.
VERDICT_ARGS: Mapping[str, str] = {
    "perf_tiers": "functional | complete | target: the highest performance tier of the spec's targets the verdict "
                  "requires (default: the tiers the model's status requires); the tiers above it are measured, "
                  "decided and shown, not required. The image build's smoke release says functional: it asks "
                  "whether the image works, not how fast the shared host is",
}

REPORT_ARGS: Mapping[str, str] = {
    "ignore_verdict": "true: render the report; the verdict does not set the exit code",
    **COMPARE_ARGS,
    **VERDICT_ARGS,
}

#: Media client variants of the tests workflow take a subset of ``TEST_ARGS``.
MEDIA_TEST_ARGS: Mapping[str, str] = {k: TEST_ARGS[k] for k in ("markers", "test_name")}

#: lm-eval's own settings a ``--workflow-args`` key may set, with the least value each takes.
LM_EVAL_SETTING_MINIMUMS: Mapping[str, int] = {
    "batch_size": 1, "num_concurrent": 1, "max_retries": 1, "timeout": 1, "max_length": 1, "seed": 0,
}

#: Request body fields that decide what a benchmark point measures: the benchmark sets them itself.
BENCHMARK_OWNED_BODY_FIELDS: Mapping[str, str] = {
    "model": "the served model name",
    "prompt": "the point's generated prompt",
    "messages": "the point's generated prompt",
    "max_tokens": "each point's output length: choose it with points=ISLxOSLxCON",
    "max_completion_tokens": "each point's output length: choose it with points=ISLxOSLxCON",
    "min_tokens": "each point's output length: choose it with points=ISLxOSLxCON",
    "ignore_eos": "what makes every request produce the point's output length",
    "stream": "the benchmark measures streamed tokens",
    "stream_options": "the benchmark reads usage from the stream",
}


def shown(value: object, limit: int = 80) -> str:
    """A user's value as an error line shows it: quoted, escaped, cut to ``limit`` characters (an
    error must stay one readable line however long the input was)."""
    text = str(value)
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


@dataclass(frozen=True)
class Passthrough:
    """Where a key a workflow does not own goes, and what it may not be."""

    destination: str  # printed by the CLI and recorded in cli_args.json
    reserved: Mapping[str, str] = field(default_factory=dict)  # key -> why it cannot pass through here
    integer_minimums: Mapping[str, int] = field(default_factory=dict)  # key -> least integer it may be
    integer_owner: str = ""  # whose settings the integer keys are (named in the message)
    forbidden_chars: str = ""  # characters a value may not hold (the tool reads k=v,k=v lists)

    def problem(self, key: str, value: str) -> str | None:
        """Why ``key=value`` cannot pass through, or None when it can."""
        if key in self.reserved:
            return f"--workflow-args {key} {self.reserved[key]}"
        if value == "":
            return f"--workflow-args {key}= has no value"
        bad = [c for c in self.forbidden_chars if c in value]
        if bad:
            return f"--workflow-args {key}={shown(value)}: {self.integer_owner} settings cannot hold {bad[0]!r}"
        if key in self.integer_minimums:
            minimum = self.integer_minimums[key]
            if not value.isascii() or not value.isdigit() or int(value) < minimum:
                return (f"--workflow-args {key}={shown(value)} must be an integer >= {minimum} "
                        f"({self.integer_owner}'s {key})")
        return None


EVAL_PASSTHROUGH = Passthrough(
    destination=("lm-eval: " + ", ".join(LM_EVAL_SETTING_MINIMUMS)
                 + " set lm-eval's own settings; any other key is a generation kwarg in each request"),
    integer_minimums=LM_EVAL_SETTING_MINIMUMS, integer_owner="lm-eval", forbidden_chars=",",
)
BENCHMARK_PASSTHROUGH = Passthrough(
    destination="the benchmark's requests: each key is a request body field (e.g. temperature, top_p, top_k)",
    reserved={**{k: f"is set by the benchmark itself ({why})" for k, why in BENCHMARK_OWNED_BODY_FIELDS.items()},
              **{k: "is an lm-eval setting (the evals workflow), not a request body field"
                 for k in LM_EVAL_SETTING_MINIMUMS if k not in BENCHMARK_ARGS}},
)
