"""Run `vllm bench serve` over the same points, for comparison (tools=vllm).

vLLM's console script may be broken in some builds (its import of package metadata fails), so we
invoke the CLI module through a tiny shim that patches ``importlib.metadata.version`` for "vllm"
only. The result JSON uses vLLM's own keys; ``to_point_metrics`` keeps them in our metrics
layout and the point record derives the rest, so the report can put both tools side by side.
"""
from __future__ import annotations

import os
import subprocess
import sys

SHIM = (
    "import sys, importlib.metadata as m\n"
    "_v = m.version\n"
    "def version(name):\n"
    "    try:\n"
    "        return _v(name)\n"
    "    except Exception:\n"
    "        if name == 'vllm':\n"
    "            import vllm\n"
    "            return getattr(vllm, '__version__', '0.0.0')\n"
    "        raise\n"
    "m.version = version\n"
    "from vllm.entrypoints.cli.main import main\n"
    "sys.argv = ['vllm'] + sys.argv[1:]\n"
    "sys.exit(main())\n"
)


def bench_command(python: str, base_url: str, model: str, tokenizer: str, isl: int, osl: int, concurrency: int,
                  num_prompts: int, result_dir: str, result_file: str, *, endpoint: str = "/v1/completions",
                  request_rate: float = float("inf"), burstiness: float = 1.0, percentiles: str = "50,90,99",
                  detailed: bool = False, seed: int = 0) -> list[str]:
    """argv for one `vllm bench serve` run matching one of our points."""
    cmd = [python, "-c", SHIM, "bench", "serve", "--backend", "openai-chat" if "chat" in endpoint else "openai",
           "--base-url", base_url, "--endpoint", endpoint, "--model", model, "--served-model-name", model,
           "--tokenizer", tokenizer, "--dataset-name", "random", "--random-input-len", str(isl),
           "--random-output-len", str(osl), "--num-prompts", str(num_prompts), "--max-concurrency", str(concurrency),
           "--request-rate", "inf" if request_rate == float("inf") else str(request_rate),
           "--burstiness", str(burstiness), "--ignore-eos", "--percentile-metrics", "ttft,tpot,itl,e2el",
           "--metric-percentiles", percentiles, "--seed", str(seed), "--save-result", "--result-dir", result_dir,
           "--result-filename", result_file, "--disable-tqdm"]
    if detailed:
        cmd.append("--save-detailed")
    return cmd


def run(cmd: list[str], api_key: str | None, timeout: float | None = None, cpu: int | None = None,
        log=None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.update(client_env())
    pre = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    return subprocess.run(cmd, env=env, timeout=timeout, preexec_fn=pre, text=True,
                          stdout=log or subprocess.PIPE, stderr=subprocess.STDOUT)


def client_env() -> dict:
    """The benchmark client needs no accelerator kernels; some CPU builds crash (SIGILL) importing the
    generic platform's kernels, so pin the client process to the CPU platform unless told otherwise."""
    return {"VLLM_TARGET_DEVICE": os.environ.get("VLLM_TARGET_DEVICE", "cpu")}


def to_point_metrics(raw: dict) -> dict:
    """vLLM's numeric result keys in our metrics layout; the derived figures (t/s/u, decode and
    prefill throughput, error rate) are filled by the record (``BenchMetrics.derive``)."""
    m = {k: v for k, v in raw.items() if isinstance(v, (int, float, type(None))) and not isinstance(v, bool)}
    m["mean_ttft_first_nonempty_ms"] = None
    m["failures_by_class"] = {"unclassified": raw.get("failed", 0)} if raw.get("failed") else {}
    m["output_token_source"] = "usage"
    return m


def default_python() -> str | None:
    """Env TT_VLLM_BENCH_PYTHON, else this interpreter if it has vllm."""
    env = os.environ.get("TT_VLLM_BENCH_PYTHON")
    if env:
        return env
    try:
        import importlib.util
        return sys.executable if importlib.util.find_spec("vllm") else None
    except Exception:  # noqa: BLE001
        return None
