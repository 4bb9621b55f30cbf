"""Workflow arguments accepted by the benchmarks workflow, parsed into a typed ``BenchArgs``.

The keys are declared in ``contracts.workflow_keys`` (the orchestrator validates them there before
it starts a server); ``run_benchmarks.py`` turns the raw string dict into values here, so a bad
value fails in seconds with exit code 2 instead of after a long server start.
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from benchmarking.body_fields import body_fields
from benchmarking.tools import CHOICES as TOOL_CHOICES
from contracts.workflow_keys import BENCHMARK_ARGS, PERF_TIERS, VERDICT_ARGS
from records.sampling import sampling_setting

# key -> one-line help, declared with every workflow's keys in contracts.workflow_keys
# (and the verdict's perf_tiers: adaptive points sample for the tiers the verdict requires)
WORKFLOW_ARG_HELP = {**BENCHMARK_ARGS, **VERDICT_ARGS}
WORKFLOW_ARG_KEYS: frozenset[str] = frozenset(WORKFLOW_ARG_HELP)
MODES = ("smoke", "ci", "full")
WORKLOADS = ("trace", "multi_turn", "shared_prefix", "agentic")  # benchmarking/workloads/, one module each
# keys that only mean something with one workload
WORKLOAD_KEYS = {"trace_file": "trace", "time_scale": "trace", "max_lateness_ms": "trace", "block_tokens": "trace",
                 "turns": "multi_turn", "think_time_s": "multi_turn",
                 "prefixes": "shared_prefix", "prefix_tokens": "shared_prefix",
                 "sessions_file": "agentic", "sessions": "agentic"}
# a smoke run is minutes long: a silent server must not hold it for 5 minutes per step
DEFAULT_STALL_TIMEOUT_S = {"smoke": 60.0, "ci": 300.0, "full": 300.0}
PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")


class BenchArgError(ValueError):
    """Bad --workflow-args input; run_benchmarks exits 2 with this message."""


@dataclass
class BenchArgs:
    """Typed view of the workflow args; defaults are what an unqualified `ci` run uses."""

    mode: str = "ci"
    only_targets: bool = False
    points: list[tuple[int, int, int, int | None]] = field(default_factory=list)
    percentiles: list[float] = field(default_factory=lambda: [50.0, 90.0, 99.0])
    goodput: dict[str, float] = field(default_factory=dict)
    tools: list[str] = field(default_factory=lambda: ["tt"])
    tool: str = "ours"  # the load generator that measures every point (benchmarking/tools/)
    agreement: str | None = None  # a tool measured against ours at each judged point (benchmarking/agreement.py)
    agreement_band: float = 0.10  # the noise band of its decisions (share)
    agreement_cycles: int = 4  # the most ABBA cycles per point
    ab_cycles: int = 6  # the most ABBA cycles per point of an A/B of two servers (benchmarking/ab_points.py)
    vllm_python: str | None = None
    budget_s: float | None = None
    point_budget_s: float | None = None
    precision: float = 0.05
    perf_tiers: str | None = None  # the highest tier the verdict requires (None: the status's tiers)
    sample_budget_s: float | None = None  # None: the mode's default (records.sampling.DEFAULT_SAMPLE_BUDGETS)
    request_rate: float = math.inf
    burstiness: float = 1.0
    ramp: tuple[float, float] | None = None
    dataset: str = "random"
    dataset_path: str | None = None
    shared_prefix_len: int | None = None
    endpoint: str = "/v1/completions"
    warmup_requests: int = 0
    num_prompts: int | None = None
    request_timeout_s: float = 1800.0
    stall_timeout_s: float = 300.0
    seed: int = 0
    body_fields: dict[str, Any] = field(default_factory=dict)  # keys not owned: extra request body fields
    # realistic traffic (benchmarking/workloads/): which workload, and its settings
    workload: str | None = None
    trace_file: str | None = None
    time_scale: float = 1.0
    max_lateness_ms: float = 50.0
    block_tokens: int = 512
    turns: int = 3
    think_time_s: float = 0.5
    prefixes: int = 4
    prefix_tokens: int | None = None
    sessions_file: str | None = None
    sessions: int = 3
    # speculative decoding read from other /metrics endpoints than the server's (an external or multi-worker one)
    spec_decode_metrics_url: list[str] = field(default_factory=list)


def _float(key: str, value: str, *, positive: bool = True) -> float:
    try:
        out = float(value)
    except ValueError:
        raise BenchArgError(f"workflow arg {key}={value!r} is not a number") from None
    if math.isnan(out) or (positive and out <= 0):
        raise BenchArgError(f"workflow arg {key}={value!r} must be > 0")
    return out


def _int(key: str, value: str, *, minimum: int = 0) -> int:
    try:
        out = int(value)
    except ValueError:
        raise BenchArgError(f"workflow arg {key}={value!r} is not an integer") from None
    if out < minimum:
        raise BenchArgError(f"workflow arg {key}={value!r} must be >= {minimum}")
    return out


def _bool(key: str, value: str) -> bool:
    low = str(value).strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise BenchArgError(f"workflow arg {key}={value!r} is not a boolean (true/false)")


def parse_points(value: str) -> list[tuple[int, int, int, int | None]]:
    """'128x128x1,2048x128x32x64' -> [(isl, osl, con, n|None), ...]."""
    out = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        parts = item.lower().split("x")
        if len(parts) not in (3, 4):
            raise BenchArgError(f"point {item!r} must be ISLxOSLxCON or ISLxOSLxCONxN")
        try:
            nums = [_int("points", p, minimum=1) for p in parts]
        except BenchArgError:
            raise BenchArgError(f"point {item!r}: every size (ISL, OSL, CON, N) must be a whole number >= 1") from None
        if any(o[:3] == tuple(nums[:3]) for o in out):  # which prompt count was meant? keeping one would hide it
            raise BenchArgError(f"point {item!r} is given twice in points=; give each ISLxOSLxCON once")
        out.append((nums[0], nums[1], nums[2], nums[3] if len(nums) == 4 else None))
    if not out:
        raise BenchArgError("workflow arg points= is empty")
    return out


def parse_workflow_args(raw: dict) -> BenchArgs:
    """Validate and type the raw {key: str} dict; raises BenchArgError naming the bad key.

    Keys not in ``WORKFLOW_ARG_KEYS`` are request body fields (``benchmarking.body_fields``).
    """
    _reject_misspelled_keys(raw)
    args = BenchArgs()
    try:
        args.body_fields = body_fields({k: "" if v is None else str(v) for k, v in raw.items()
                                        if k not in WORKFLOW_ARG_KEYS})
    except ValueError as exc:
        raise BenchArgError(str(exc)) from None
    for key, value in raw.items():
        _apply_key(args, key, "" if value is None else str(value).strip())
    _check_workload(args, raw)
    _check_cross_keys(args, raw)
    _check_tool(args, raw)
    _check_agreement(args, raw)
    return args


def _reject_misspelled_keys(raw: dict) -> None:
    """An unknown key close to a workflow arg is a typo, not a request body field."""
    for key in sorted(set(raw) - WORKFLOW_ARG_KEYS):
        close = difflib.get_close_matches(key, sorted(WORKFLOW_ARG_KEYS), n=1, cutoff=0.75)
        if close:
            raise BenchArgError(f"unknown benchmarks workflow arg {key!r}; did you mean {close[0]!r}?")


def _apply_key(args: BenchArgs, key: str, value: str) -> None:
    """Parse one workflow arg into ``args``; keys without a parser (body fields) are left alone."""
    if key == "dataset":
        args.dataset, args.dataset_path, args.shared_prefix_len = _dataset(key, value)
    elif key in _VALUE_PARSERS:
        setattr(args, key, _VALUE_PARSERS[key](key, value))


def _check_cross_keys(args: BenchArgs, raw: dict) -> None:
    """Checks that need several keys: body fields vs tools=vllm, the mode's stall timeout vs the point budget."""
    if args.body_fields and "vllm" in args.tools:
        raise BenchArgError(f"request body fields ({', '.join(sorted(args.body_fields))}) reach only the tt tool; "
                            "tools=vllm (`vllm bench serve`) cannot send them")
    if args.ab_cycles < 2:
        raise BenchArgError(f"ab_cycles={args.ab_cycles} must be >= 2 (the first look comes after the second cycle)")
    if "stall_timeout_s" not in raw:
        args.stall_timeout_s = DEFAULT_STALL_TIMEOUT_S[args.mode]
    if args.point_budget_s is not None and args.point_budget_s <= args.stall_timeout_s:
        raise BenchArgError(f"point_budget_s={args.point_budget_s:g} must exceed stall_timeout_s="
                            f"{args.stall_timeout_s:g}: a budget that ends first cuts a stalled request "
                            "before it can be called a stall")


def _check_tool(args: BenchArgs, raw: dict) -> None:
    """Another tool measures independent prompts in one round of the point's size: what only our client
    can do (workloads, ramps, bursty arrivals, warm-up requests, a side-by-side vllm run) is refused."""
    if args.tool == "ours":
        return
    only_ours = [key for key, on in (("workload", args.workload), ("ramp", args.ramp),
                                     ("burstiness", args.burstiness != 1.0), ("warmup_requests", args.warmup_requests),
                                     ("tools", "tools" in raw)) if on]
    if only_ours:
        raise BenchArgError(f"tool={args.tool}: {', '.join(only_ours)}= apply to our client only (tool=ours)")
    if args.tool == "vllm" and (args.body_fields or args.dataset != "random"):
        raise BenchArgError("tool=vllm sends its own random prompts: dataset= and request body fields "
                            "need tool=ours, aiperf or guidellm")


def _check_agreement(args: BenchArgs, raw: dict) -> None:
    """agreement= compares our client with a tool point by point: our client must be the point's measurer,
    its keys need agreement= itself, and only plain independent prompts can be sent alike by both."""
    for key in ("agreement_band", "agreement_cycles"):
        if key in raw and args.agreement is None:
            raise BenchArgError(f"{key}= applies to agreement=TOOL only")
    if args.agreement is None:
        return
    if args.tool != "ours":
        raise BenchArgError(f"agreement={args.agreement} compares the tool with our client: it needs tool=ours "
                            f"(this run has tool={args.tool})")
    if args.workload or args.ramp or args.burstiness != 1.0:
        raise BenchArgError(f"agreement={args.agreement} sends independent prompts at the point's concurrency: "
                            "workload=, ramp= and burstiness= apply to our client alone")
    if args.agreement == "vllm" and (args.body_fields or args.dataset != "random"):
        raise BenchArgError("agreement=vllm: `vllm bench serve` sends its own random prompts; dataset= and request "
                            "body fields cannot reach it")
    if not 0 < args.agreement_band < 1:
        raise BenchArgError(f"agreement_band={args.agreement_band:g} must be a share between 0 and 1 (e.g. 0.1)")
    if args.agreement_cycles < 2:
        raise BenchArgError(f"agreement_cycles={args.agreement_cycles} must be >= 2 (the first look comes after "
                            "the second ABBA cycle)")


def _one_of(choices: tuple[str, ...]) -> Callable[[str, str], str]:
    def parse(key: str, value: str) -> str:
        if value not in choices:
            raise BenchArgError(f"{key}={value!r}: expected one of {', '.join(choices)}")
        return value
    return parse


def _text(key: str, value: str) -> str:
    return value


def _whole(key: str, value: str) -> int:
    return _int(key, value)


def _count(key: str, value: str) -> int:
    return _int(key, value, minimum=1)


def _rate(key: str, value: str) -> float:
    return math.inf if value.lower() == "inf" else _float(key, value)


def _points(key: str, value: str) -> list[tuple[int, int, int, int | None]]:
    return parse_points(value)


def _percentiles(key: str, value: str) -> list[float]:
    try:
        pcts = [float(p) for p in value.split(",") if p.strip()]
    except ValueError:
        raise BenchArgError(f"percentiles={value!r} must be numbers like 50,90,99") from None
    if not pcts or any(not 0 < p <= 100 for p in pcts):
        raise BenchArgError(f"percentiles={value!r} must be in (0, 100]")
    return pcts


def _goodput(key: str, value: str) -> dict[str, float]:
    slos = {}
    for item in value.split(","):
        name, sep, ms = item.partition(":")
        name = name.strip()
        if not sep or name not in ("ttft", "tpot", "e2el"):
            raise BenchArgError(f"goodput item {item!r} must be ttft:MS, tpot:MS or e2el:MS")
        slos[name] = _float("goodput", ms)
    return slos


def _tools(key: str, value: str) -> list[str]:
    tools = [t.strip() for t in value.split(",") if t.strip()]
    bad = [t for t in tools if t not in ("tt", "vllm")]
    if bad or not tools:
        raise BenchArgError(f"tools={value!r}: expected tt and/or vllm")
    return ["tt", "vllm"] if tools == ["vllm"] else tools


def _sampling(key: str, value: str) -> Any:
    try:
        return sampling_setting(key, value)
    except ValueError as error:
        raise BenchArgError(str(error)) from None


def _ramp(key: str, value: str) -> tuple[float, float]:
    start, sep, end = value.partition(":")
    if not sep:
        raise BenchArgError(f"ramp={value!r} must be START:END requests/s")
    return (_float(key, start), _float(key, end))


def _dataset(key: str, value: str) -> tuple[str, str | None, int | None]:
    """(dataset, dataset_path, shared_prefix_len) from random, jsonl:PATH or shared_prefix[:LEN]."""
    if value in ("random", "lookup"):  # lookup: prompts an n-gram draft can hit (benchmarking.prompts)
        return value, None, None
    if value.startswith("jsonl:") and len(value) > 6:
        return "jsonl", value[6:], None
    if value == "shared_prefix" or value.startswith("shared_prefix:"):
        return "shared_prefix", None, _int(key, value.split(":", 1)[1], minimum=1) if ":" in value else None
    raise BenchArgError(f"dataset={value!r}: expected random, lookup, jsonl:PATH or shared_prefix[:LEN]")


def _metrics_urls(key: str, value: str) -> list[str]:
    """URL[,URL]: the /metrics endpoints whose spec-decode counters are summed (each a http(s) base URL)."""
    urls = [u.strip().rstrip("/") for u in value.split(",") if u.strip()]
    bad = [u for u in urls if not u.startswith(("http://", "https://")) or len(u.split("://", 1)[1]) == 0]
    if not urls or bad:
        raise BenchArgError(f"{key}={value!r}: expected URL[,URL] of http(s) base URLs (their /metrics is read)")
    return [u[: -len("/metrics")] if u.endswith("/metrics") else u for u in urls]


def _endpoint(key: str, value: str) -> str:
    endpoints = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
    if value not in endpoints and value not in endpoints.values():
        raise BenchArgError(f"endpoint={value!r}: expected completions or chat")
    return endpoints.get(value, value)


def _think_time(key: str, value: str) -> float:
    seconds = _float(key, value, positive=False)
    if seconds < 0:
        raise BenchArgError(f"think_time_s={value!r} must be >= 0")
    return seconds


# key -> parser(key, value) of the attribute of BenchArgs named like the key (dataset sets three: _apply_key)
_VALUE_PARSERS: dict[str, Callable[[str, str], Any]] = {
    "mode": _one_of(MODES), "only_targets": _bool, "points": _points, "percentiles": _percentiles,
    "goodput": _goodput, "tools": _tools, "tool": _one_of(TOOL_CHOICES), "vllm_python": _text,
    "agreement": _one_of(TOOL_CHOICES), "agreement_band": _float, "agreement_cycles": _count,
    "ab_cycles": _count,
    "perf_tiers": _one_of(PERF_TIERS),
    "precision": _sampling, "sample_budget_s": _sampling,
    **dict.fromkeys(("budget_s", "point_budget_s", "request_timeout_s", "stall_timeout_s"), _float),
    "request_rate": _rate, "burstiness": _rate, "ramp": _ramp, "endpoint": _endpoint,
    "sessions_file": _text, "sessions": _count,
    "warmup_requests": _whole, "num_prompts": _count, "seed": _whole, "workload": _one_of(WORKLOADS),
    "trace_file": _text, "time_scale": _float, "max_lateness_ms": _float, "think_time_s": _think_time,
    **dict.fromkeys(("block_tokens", "turns", "prefixes", "prefix_tokens"), _count),
    "spec_decode_metrics_url": _metrics_urls,
}


def _check_workload(args: BenchArgs, raw: dict) -> None:
    """A workload's keys need that workload; a trace needs its file; a workload drives our client only."""
    for key, workload in WORKLOAD_KEYS.items():
        if key in raw and args.workload != workload:
            raise BenchArgError(f"{key}= applies to workload={workload} only"
                                + (f" (this run has workload={args.workload})" if args.workload else ""))
    if args.workload is None:
        return
    if args.workload == "trace" and not args.trace_file:
        raise BenchArgError("workload=trace needs trace_file=PATH")
    if args.workload == "trace" and (args.points or args.num_prompts):
        raise BenchArgError("workload=trace replays the trace as written: points= and num_prompts= do not apply")
    if args.dataset != "random":
        raise BenchArgError(f"dataset={args.dataset} and workload={args.workload} both choose the prompts; give one")
    if "vllm" in args.tools:
        raise BenchArgError(f"workload={args.workload} is driven by our client only; tools=vllm cannot replay it")
