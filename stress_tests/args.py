"""``--workflow-args`` of the stress_tests workflow, parsed into one typed value (stdlib only).

    run_mode=single|multiple|custom|endurance|capacity (comma list: several in one run)
    max_context_length=N  input_size=N  output_size=N  max_concurrent=N  num_prompts=N
    custom_isl_values=0.5,0.25 (fractions of max context, or token counts when > 1)
    custom_osl_values=128,2048  custom_concurrency_values=1,2,4
    endurance_s=SECONDS  window_s=SECONDS
    slo=ttft_p99:2000,tpot_p99:150  goodput_goal=0.95  capacity_metric=concurrency|rate
    capacity_start=N  capacity_max=N  capacity_target=N  requests_per_level=N
    saturation=on|off  max_error_rate=0.0  max_latency_drift_pct=20  max_memory_growth_pct=10
    (drift: p99 e2e latency, last vs first time slice after warm-up; memory: growth after warm-up)
    budget_s=SECONDS  server_container=NAME
    tool=ours|vllm|aiperf|guidellm: who sends each fixed-size load point (single, multiple, custom);
    another tool refuses what only our client does (endurance, capacity, workload=, saturation=on)
    workload=trace|multi_turn|shared_prefix and its keys (trace_file, time_scale, max_lateness_ms,
    block_tokens, turns, think_time_s, prefixes, prefix_tokens): a benchmarks workload run as a
    stress point (``stress_tests/workload.py``); alone unless run_mode= names load modes too
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from benchmarking.bench_args import WORKLOAD_KEYS, WORKLOADS
from benchmarking.tools import CHOICES as TOOL_CHOICES
from contracts.workflow_keys import STRESS_ARGS

RUN_MODES = ("single", "multiple", "custom", "endurance", "capacity")
SLO_METRICS = ("ttft", "tpot", "itl", "e2el")
WORKFLOW_ARG_KEYS = frozenset(STRESS_ARGS)  # declared in contracts.workflow_keys
# What each size runs when run_mode is not given, and its whole-workflow time budget (s).
# smoke runs the load point only: a capacity level is decided on its goodput interval, which needs about
# 73 requests per level (minutes for a media model; 80 requests at concurrency 4, 190-220 s of a 2-core
# host's smoke release, for SmolLM2 on vLLM's CPU build). ci and full search the capacity.
DEFAULT_RUN_MODES = {"smoke": ("single",), "ci": ("single", "capacity"),
                     "full": ("multiple", "endurance", "capacity")}
DEFAULT_BUDGET_S = {"smoke": 420.0, "ci": 1800.0, "full": None}
DEFAULT_ENDURANCE_S = {"smoke": 30.0, "ci": 300.0, "full": 86400.0}
# What another load generator (tool=) can send: a fixed number of requests at a concurrency. Endurance (time
# slices, memory drift), the capacity search and the saturation stop watch the load while it runs, which only
# our client's loop does (stress_tests/driver.py); a tool's output is read after it has ended.
TOOL_MODES = ("single", "multiple", "custom")
# Keys that tune only what our client runs: given with tool= they would be silently unused.
OURS_ONLY_KEYS = {"endurance_s": "endurance", "window_s": "endurance", "max_latency_drift_pct": "endurance",
                  "max_memory_growth_pct": "endurance", "slo": "capacity", "goodput_goal": "capacity",
                  "capacity_metric": "capacity", "capacity_start": "capacity", "capacity_max": "capacity",
                  "capacity_target": "capacity", "requests_per_level": "capacity"}


class StressArgError(ValueError):
    """Bad --workflow-args for stress_tests; the message is one line for the user."""


@dataclass(frozen=True)
class Slo:
    """One latency objective: ``percentile`` of ``metric`` must be <= ``limit_ms``."""

    metric: str
    percentile: float
    limit_ms: float

    @property
    def key(self) -> str:
        return f"{self.metric}_p{self.percentile:g}"


@dataclass
class StressArgs:
    size: str = "smoke"
    run_modes: tuple[str, ...] = ("single",)
    max_context: int | None = None
    input_size: int | None = None
    output_size: int | None = None
    max_concurrent: int | None = None
    num_prompts: int | None = None
    custom_isl: list[float] = field(default_factory=list)
    custom_osl: list[int] = field(default_factory=list)
    custom_concurrency: list[int] = field(default_factory=list)
    endurance_s: float = 30.0
    window_s: float = 5.0
    slos: list[Slo] = field(default_factory=list)
    goodput: float = 0.95
    capacity_metric: str = "concurrency"
    capacity_start: float | None = None
    capacity_max: float | None = None
    capacity_target: float | None = None
    requests_per_level: int | None = None
    saturation: bool = True
    max_error_rate: float = 0.0
    max_latency_drift_pct: float = 20.0
    max_memory_growth_pct: float = 10.0
    budget_s: float | None = None
    server_container: str | None = None
    ignored_keys: list[str] = field(default_factory=list)
    workload: str | None = None                                      # a benchmarks workload run as a stress point
    workload_args: dict[str, str] = field(default_factory=dict)      # its own keys, checked where it is planned
    tool: str = "ours"               # who sends the fixed-size load points (benchmarking/tools/)
    tool_left_out: tuple[str, ...] = ()  # default run modes not run because tool= cannot send them


def parse_slos(text: str) -> list[Slo]:
    """``ttft_p99:2000,tpot_p99:150`` -> Slo list; every name must be <metric>_p<percentile>."""
    out = []
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, sep, limit = item.partition(":")
        metric, _, pct = name.partition("_p")
        try:
            slo = Slo(metric, float(pct), float(limit))
        except ValueError:
            raise StressArgError(f"slo entry {item!r} is not <metric>_p<pct>:<limit ms>") from None
        if not sep or metric not in SLO_METRICS or not 0 < slo.percentile <= 100 or slo.limit_ms <= 0:
            raise StressArgError(f"slo entry {item!r}: metric one of {', '.join(SLO_METRICS)}, "
                                 f"percentile in (0, 100], limit > 0 ms")
        out.append(slo)
    if not out:
        raise StressArgError("slo= names no objective")
    return out


def _num(raw: dict, key: str, kind=float, lo: float | None = None):
    if key not in raw or raw[key] in ("", None):
        return None
    try:
        value = kind(raw[key])
    except ValueError:
        raise StressArgError(f"{key}={raw[key]!r} is not a {kind.__name__}") from None
    if lo is not None and (value < lo or (isinstance(value, float) and math.isnan(value))):
        raise StressArgError(f"{key}={raw[key]!r} must be >= {lo}")
    return value


def _list(raw: dict, key: str, kind) -> list:
    text = str(raw.get(key) or "")
    try:
        values = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise StressArgError(f"{key}={text!r} is not a comma-separated list of {kind.__name__}") from None
    if any(v <= 0 for v in values):
        raise StressArgError(f"{key}={text!r}: every value must be > 0")
    return values


def parse_stress_args(raw: dict) -> StressArgs:
    """The stress workflow's settings from its --workflow-args."""
    # Keys of other workflows are ignored: run.py validated them up front, and a release hands
    # every child the same arguments.
    a_ignored = sorted(set(raw) - WORKFLOW_ARG_KEYS - {"mode"})
    size = str(raw.get("mode") or "ci")
    if size not in DEFAULT_RUN_MODES:
        raise StressArgError(f"mode={size!r} is not one of smoke, ci, full")
    workload = str(raw.get("workload") or "").strip() or None
    if workload is not None and workload not in WORKLOADS:
        raise StressArgError(f"workload={workload!r} is not one of {', '.join(WORKLOADS)}")
    workload_args = {k: str(raw[k]) for k in WORKLOAD_KEYS if raw.get(k) not in (None, "")}
    for key in workload_args:
        if WORKLOAD_KEYS[key] != workload:
            raise StressArgError(f"{key}= applies to workload={WORKLOAD_KEYS[key]} only"
                                 + (f" (this run has workload={workload})" if workload else ""))
    tool, modes, left_out = _tool_and_modes(raw, size, workload)
    a = StressArgs(size=size, run_modes=modes, ignored_keys=a_ignored, workload=workload,
                   workload_args=workload_args, tool=tool, tool_left_out=left_out)
    a.max_context = _num(raw, "max_context_length", int, 2)
    a.input_size = _num(raw, "input_size", int, 1)
    a.output_size = _num(raw, "output_size", int, 1)
    a.max_concurrent = _num(raw, "max_concurrent", int, 1)
    a.num_prompts = _num(raw, "num_prompts", int, 1)
    a.custom_isl = _list(raw, "custom_isl_values", float)
    a.custom_osl = _list(raw, "custom_osl_values", int)
    a.custom_concurrency = _list(raw, "custom_concurrency_values", int)
    if "custom" in modes and not (a.custom_isl or a.custom_osl or a.custom_concurrency):
        raise StressArgError("run_mode=custom needs custom_isl_values, custom_osl_values or "
                             "custom_concurrency_values")
    a.endurance_s = _num(raw, "endurance_s", float, 1.0) or DEFAULT_ENDURANCE_S[size]
    a.window_s = _num(raw, "window_s", float, 0.5) or (5.0 if size != "full" else 60.0)
    if raw.get("slo"):
        a.slos = parse_slos(str(raw["slo"]))
    a.goodput = _num(raw, "goodput_goal", float, 0.0) or 0.95
    if a.goodput > 1:
        raise StressArgError(f"goodput_goal={a.goodput} must be a fraction in (0, 1]")
    a.capacity_metric = str(raw.get("capacity_metric") or "concurrency")
    if a.capacity_metric not in ("concurrency", "rate"):
        raise StressArgError(f"capacity_metric={a.capacity_metric!r} is not concurrency or rate")
    a.capacity_start = _num(raw, "capacity_start", float, 0.01)
    a.capacity_max = _num(raw, "capacity_max", float, 0.01)
    if a.capacity_start and a.capacity_max and a.capacity_start > a.capacity_max:
        raise StressArgError(f"capacity_start={a.capacity_start:g} is above capacity_max={a.capacity_max:g}")
    a.capacity_target = _num(raw, "capacity_target", float, 0.0)
    a.requests_per_level = _num(raw, "requests_per_level", int, 1)
    sat = str(raw.get("saturation") or "on").lower()
    if sat not in ("on", "off", "true", "false", "1", "0"):
        raise StressArgError(f"saturation={sat!r} is not on or off")
    a.saturation = sat in ("on", "true", "1") and tool == "ours"  # tool=: see tool_modes
    a.max_error_rate = _num(raw, "max_error_rate", float, 0.0) or 0.0
    a.max_latency_drift_pct = _num(raw, "max_latency_drift_pct", float, 0.0) or 20.0
    a.max_memory_growth_pct = _num(raw, "max_memory_growth_pct", float, 0.0) or 10.0
    a.budget_s = _num(raw, "budget_s", float, 1.0) or DEFAULT_BUDGET_S[size]
    a.server_container = raw.get("server_container") or None
    return a


def _tool_and_modes(raw: dict[str, Any], size: str,
                    workload: str | None) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(tool, run modes, default modes left out for the tool) from run_mode=, tool= and the size's defaults."""
    modes = tuple(filter(None, (m.strip() for m in str(raw.get("run_mode") or "").split(","))))
    bad = [m for m in modes if m not in RUN_MODES]
    if bad:
        raise StressArgError(f"run_mode {', '.join(bad)} is not one of {', '.join(RUN_MODES)}")
    tool = str(raw.get("tool") or "ours")
    if tool not in TOOL_CHOICES:
        raise StressArgError(f"tool={tool!r}: expected one of {', '.join(TOOL_CHOICES)}")
    if tool != "ours":
        return (tool, *tool_modes(tool, modes, size, workload, raw))
    if not modes and workload is None:  # a workload runs alone unless run_mode= names load modes too
        modes = DEFAULT_RUN_MODES[size]
    return tool, modes, ()


def tool_modes(tool: str, modes: tuple[str, ...], size: str, workload: str | None,
               raw: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the run modes, the default ones left out) of a run whose fixed-size points another tool sends.

    What only our client does is refused, not skipped: endurance and the capacity search named in
    run_mode=, workload=, saturation=on, and the keys that tune only those. Left to the size's defaults,
    the run keeps their fixed-size modes (smoke and ci: single; full: multiple) and names what it left out,
    for the run to say so in its log."""
    why = f"needs our client (tool=ours): {tool} sends a fixed number of requests and is read after it ends"
    if workload is not None:
        raise StressArgError(f"tool={tool}: workload={workload} {why}")
    ours = [m for m in modes if m not in TOOL_MODES]
    if ours:
        raise StressArgError(f"tool={tool}: run_mode={','.join(ours)} {why}")
    if str(raw.get("saturation") or "").lower() in ("on", "true", "1"):
        raise StressArgError(f"tool={tool}: saturation=on (stopping a point once the server is over-saturated) {why}")
    keys = sorted(k for k in OURS_ONLY_KEYS if raw.get(k) not in (None, ""))
    if keys:
        uses = " and ".join(sorted({OURS_ONLY_KEYS[k] for k in keys}))
        raise StressArgError(f"tool={tool}: {', '.join(keys)} apply to {uses} only, which {why}")
    if modes:
        return modes, ()
    default = DEFAULT_RUN_MODES[size]
    return (tuple(m for m in default if m in TOOL_MODES),
            tuple(m for m in default if m not in TOOL_MODES))
