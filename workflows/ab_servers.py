"""The baseline server of an A/B (``--baseline-url`` / ``--baseline-vllm-args``): attached or started, then stopped.

Why two live servers: a comparison with an earlier run mixes the build's change with the host's (another
load, another hour); with both servers up during one run the benchmarks client alternates blocks between
them (``benchmarking.ab_points``), so the host's drift cancels. This run's own server (local, Docker or
``--server-url``) is the candidate; the baseline is either a running server (``--baseline-url``: attached and
checked like ``--server-url``, never stopped) or a second local server of the same spec with the JSON of
``--baseline-vllm-args`` laid over its vLLM args, on a free port, its files under ``RUN_DIR/baseline_server/``
(stopped at teardown like the run's own; it dies with run.py even on SIGKILL). Both are warmed up alike.
"""
from __future__ import annotations

import copy
import json
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from workflows.context import RunContext

if TYPE_CHECKING:
    from workflows.servers import ServerLaunch

DEFAULT_TOLERANCE = 0.05  # reports.comparison.DEFAULT_TOLERANCE
BASELINE_DIR = "baseline_server"


def asked(ctx: RunContext) -> bool:
    """The user asked for an A/B of two servers."""
    return ctx.options.baseline_url is not None or ctx.options.baseline_vllm_args is not None


def label(ctx: RunContext) -> str:
    """What the baseline is, as asked: '--baseline-url URL' or "--baseline-vllm-args {...}"."""
    if ctx.options.baseline_url is not None:
        return f"--baseline-url {ctx.options.baseline_url}"
    return f"--baseline-vllm-args {json.dumps(ctx.options.baseline_vllm_args, sort_keys=True)}"


def tolerance(ctx: RunContext) -> float:
    """``regression_tolerance`` from --workflow-args (checked by run.py), else the spec's, else 5%."""
    own = ctx.spec.device_model_spec.regression_tolerance
    return float(ctx.options.workflow_args.get("regression_tolerance", DEFAULT_TOLERANCE if own is None else own))


class BaselineFailed(Exception):
    """The baseline could not be attached, started or warmed up; one line (the pipeline's step fails with it)."""


def start_baseline(ctx: RunContext, own_launch: ServerLaunch, warmup_pair: tuple[int, int]) -> str:
    """The pipeline step: attach to or start the baseline (``own_launch``: the run's own ServerLaunch, laid
    over), wait until it answers, warm it up (``warmup_pair`` when the spec plans none)."""
    from workflows.readiness import wait_until_ready
    from workflows.servers import ServerStartError, attach_external
    from workflows.servers import start_server as _start

    try:
        if ctx.options.baseline_url is not None:
            ctx.baseline = attach_external(ctx.options.baseline_url, ctx.spec.served_model_name, ctx.bearer)
            what = f"attached to the baseline at {ctx.baseline.base_url}"
        else:
            ctx.baseline = _start("local", baseline_launch(ctx, own_launch))
            what = (f"baseline local server at {ctx.baseline.base_url} with vLLM args "
                    f"{json.dumps(ctx.options.baseline_vllm_args, sort_keys=True)} (log: {BASELINE_DIR}/server.log)")
        info = wait_until_ready(ctx.baseline, bearer=ctx.bearer, timeout_s=ctx.spec.readiness_timeout_s,
                                progress=lambda m: ctx.run_dir.log(f"baseline: {m}", "readiness"))
    except ServerStartError as exc:
        raise BaselineFailed(f"A/B baseline: {exc}") from None
    warmed = _warm_up(ctx, warmup_pair)
    return f"{what}; ready after {info.elapsed_s:.1f}s; {warmed}"


def baseline_launch(ctx: RunContext, own: ServerLaunch) -> ServerLaunch:
    """The run's own launch (``own``) with the overlay on its spec's vLLM args, a free port and its own
    directory."""
    from dataclasses import replace

    where = ctx.run_dir.path / BASELINE_DIR
    where.mkdir(parents=True, exist_ok=True)
    port = _free_port(own.bind_host)
    spec = copy.deepcopy(ctx.spec)
    args = spec.device_model_spec.vllm_args
    for key, value in (ctx.options.baseline_vllm_args or {}).items():
        if value is None:  # null removes the argument ('{"speculative_config": null}': the spec without it)
            args.pop(key, None)
        else:
            args[key] = value
    args["port"] = str(port)
    spec_path = spec.write(where / "model_spec.json")
    return replace(own, spec=spec, spec_json_path=Path(spec_path), run_dir=where, service_port=port,
                   server_log_path=where / "server.log", outlive_orchestrator=False)


def _free_port(host: str) -> int:
    """A port nothing listens on now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host if host not in ("0.0.0.0", "") else "127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _warm_up(ctx: RunContext, warmup_pair: tuple[int, int]) -> str:
    """The baseline gets the warm-up the run's own server got (the benchmark's (isl, osl) pairs), so neither
    side's first block pays for a cold start."""
    from benchmarking.client import ClientConfig
    from benchmarking.trace_capture import plan_warmup
    from benchmarking.trace_capture import warm_up as send_warmup

    if ctx.options.disable_trace_capture:
        return "no warm-up (--disable-trace-capture)"
    assert ctx.baseline is not None
    plan = plan_warmup(ctx.spec, ctx.options.workflow_args)
    pairs = plan.pairs or [warmup_pair]
    tokenizer = None
    if ctx.host and ctx.host.tokenizer_dir:
        from benchmarking.prompts import LocalTokenizer
        try:
            tokenizer = LocalTokenizer(str(ctx.host.tokenizer_dir))
        except Exception:  # noqa: BLE001 - as the run's own warm-up: lengths are then approximate
            tokenizer = None
    config = ClientConfig(base_url=ctx.baseline.base_url, model=ctx.baseline.served_model_name, api_key=ctx.bearer,
                          stall_timeout_s=plan.stall_timeout_s, request_timeout_s=plan.request_timeout_s,
                          tokenizer=tokenizer)
    outcomes = send_warmup(config, pairs, tokenizer, log=lambda m: ctx.run_dir.log(f"baseline: {m}", "warmup"))
    silent = [o for o in outcomes if o.silent]
    if silent:
        raise BaselineFailed(f"A/B baseline warm-up: {silent[0].line} (stall_timeout_s={plan.stall_timeout_s:g})")
    return f"warmed {len(outcomes)} (isl, osl) pair(s)"


def stop_baseline(ctx: RunContext, timeout: float) -> str | None:
    """Stop a baseline this run started (an attached one is left alone); what was done, or None."""
    baseline, ctx.baseline = ctx.baseline, None
    if baseline is None or baseline.kind == "external":
        return None
    baseline.stop(timeout=timeout)
    return "baseline server stopped"


def child_args(ctx: RunContext) -> list[str]:
    """The benchmarks client's A/B flags (``benchmarking.ab_points.add_arguments``); none without a baseline."""
    if ctx.baseline is None:
        return []
    return ["--baseline-url", ctx.baseline.base_url, "--baseline-label", label(ctx),
            "--baseline-tolerance", f"{tolerance(ctx):g}"]
