"""Other load generators that can drive a benchmarks point (``tool=``), one module per tool.

Why: a number measured by one client alone cannot tell the client's error from the server's. Any
tool here measures the same point against the same server, and its output is turned into our own
per-request rows (``benchmarking.metrics.RequestRecord``), so the point record, its intervals and
the judge are the same whoever sent the requests.

Each tool module defines ``VENV`` (the venv of ``workflows/venvs.py`` it runs in), ``EXECUTABLE``
(its console script there), ``PROMPTS`` ("ours": it reads our prompts from a dataset file;
"tool": it makes its own synthetic prompts of the point's ISL/OSL), ``command(exe, job)`` and
``parse(job) -> (rows, duration_s, raw_file)``. ``run(name, job, ...)`` runs one point; a tool
that cannot run raises ``ToolUnavailable`` with one line saying why: the point is then not run,
never silently measured by another client.
"""
from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from benchmarking.metrics import RequestRecord

#: tool= value -> module under benchmarking/tools/ ("ours" is our own client: benchmarking/run_benchmarks.py)
TOOLS: dict[str, str] = {"vllm": "vllm", "aiperf": "aiperf", "guidellm": "guidellm"}
#: tool= value -> the ``tool`` a point record names
RECORD_TOOL: dict[str, str] = {"ours": "tt-bench", "vllm": "vllm-bench", "aiperf": "aiperf", "guidellm": "guidellm"}
CHOICES: tuple[str, ...] = ("ours", *TOOLS)


class ToolUnavailable(RuntimeError):
    """The tool is missing, failed, or wrote no per-request output; the message is one line."""


@dataclass
class ToolJob:
    """One point for a tool: where to send, what to send, where the tool writes."""

    base_url: str
    model: str
    api_key: str | None
    tokenizer_dir: str | None
    endpoint: str
    isl: int
    osl: int
    concurrency: int
    num_prompts: int
    out_dir: str                      # the tool's own files for this point
    prompts: list[str] = field(default_factory=list)  # our prompt texts, for a tool that reads a dataset file
    request_rate: float = float("inf")
    seed: int = 0
    request_timeout_s: float = 1800.0
    body_fields: dict[str, Any] = field(default_factory=dict)

    @property
    def chat(self) -> bool:
        return self.endpoint.endswith("chat/completions")

    def body_extras(self) -> dict[str, Any]:
        """Request body fields every tool sends beside its own: exactly ``osl`` tokens, greedy (as our
        client asks, ``benchmarking.prompts.request_body``), plus the run's request body fields."""
        return {"temperature": 0.0, **self.body_fields, "ignore_eos": True, "min_tokens": self.osl}


@dataclass
class ToolRun:
    """What a tool measured at one point, in our terms."""

    rows: list[RequestRecord]
    duration: float
    raw_file: str
    version: str
    command: str           # the exact command, the API key replaced by <redacted>
    prompts: str           # "ours" or "tool" (see the module docstring)
    warnings: list[str] = field(default_factory=list)


def module(name: str) -> ModuleType:
    return importlib.import_module(f"benchmarking.tools.{TOOLS[name]}")


def bin_variable(name: str) -> str:
    """The environment variable naming the tool's executable: ``TT_AIPERF_BIN`` for aiperf."""
    return f"TT_{name.upper()}_BIN"


def executable(name: str) -> str:
    """The tool's console script, from ``TT_<NAME>_BIN``: run.py builds the tool's pinned venv before the
    benchmarks step starts and sets it (a client package never builds venvs: that is the orchestrator's layer);
    outside run.py, point it at an installed tool."""
    variable = bin_variable(name)
    path = os.environ.get(variable)
    if not path:
        raise ToolUnavailable(f"{name}: {variable} is not set (run.py sets it to the tool's venv; without run.py "
                              "set it to the tool's executable)")
    if not os.access(path, os.X_OK):
        raise ToolUnavailable(f"{name}: {variable}={path} is not an executable file")
    return path


def version(name: str, exe: str) -> str:
    """The installed tool's version, read from the package metadata of the python beside ``exe``."""
    python = os.path.join(os.path.dirname(exe), "python")
    dist = module(name).DISTRIBUTION
    try:
        out = subprocess.run([python, "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def shown(cmd: list[str], api_key: str | None) -> str:
    """The command as a shell line with the API key redacted (it is kept in the record)."""
    line = shlex.join(cmd)
    return line.replace(api_key, "<redacted>") if api_key else line


def tool_env(api_key: str | None) -> dict[str, str]:
    """The tool's environment: offline (the tokenizer is a local directory; no hub, no telemetry)."""
    env = dict(os.environ)
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    env.update({"HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
                "TOKENIZERS_PARALLELISM": "false"})
    return env


def run(name: str, job: ToolJob, deadline_s: float | None, log=print) -> ToolRun:
    """Run one point with tool ``name`` within ``deadline_s`` and parse its output into our rows.

    Raises ToolUnavailable (one line) when the tool is missing, exits non-zero, overruns the
    deadline or leaves no per-request output; its log stays in ``job.out_dir`` for the reader."""
    mod = module(name)
    exe = executable(name)
    os.makedirs(job.out_dir, exist_ok=True)
    cmd = mod.command(exe, job)
    env = tool_env(job.api_key)
    env.update(getattr(mod, "ENV", {}))
    for key in getattr(mod, "UNSET_ENV", ()):
        env.pop(key, None)
    log_path = os.path.join(job.out_dir, f"{name}.log")
    try:
        with open(log_path, "w", encoding="utf-8") as fh:
            proc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=job.out_dir,
                                  timeout=deadline_s, start_new_session=True)
    except FileNotFoundError:
        raise ToolUnavailable(f"{name}: {cmd[0]} not found") from None
    except subprocess.TimeoutExpired:
        raise ToolUnavailable(f"{name}: did not finish within the point budget ({deadline_s:.0f} s); "
                              f"log {log_path}") from None
    if proc.returncode != 0:
        raise ToolUnavailable(f"{name}: exit {proc.returncode}{_last_line(log_path)}; log {log_path}")
    try:
        rows, duration, raw_file = mod.parse(job)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise ToolUnavailable(f"{name}: no per-request output to read ({type(exc).__name__}: {exc}); "
                              f"log {log_path}") from None
    if not rows:
        raise ToolUnavailable(f"{name}: its output holds no request rows; log {log_path}")
    return ToolRun(rows=rows, duration=duration, raw_file=raw_file, version=version(name, exe),
                   command=shown(cmd, job.api_key), prompts=mod.PROMPTS, warnings=list(getattr(mod, "WARNINGS", [])))


def _last_line(log_path: str) -> str:
    """': <why>' for the one-line reason: the tool log's first error line (a logged ERROR, or an exception
    line of a traceback), else its last line; '' when the log is empty."""
    try:
        with open(log_path, encoding="utf-8", errors="replace") as fh:
            lines = [ln.strip(" │║\n") for ln in fh if ln.strip() and set(ln.strip()) - set("─│╭╮╰╯═|-")]
    except OSError:
        return ""
    errors = [ln for ln in lines if re.search(r"\bERROR\b|\w(Error|Exception): ", ln)]
    pick = errors[0] if errors else (lines[-1] if lines else "")
    return f": {' '.join(pick.split())[:240]}" if pick else ""


def error_class(status: int | None, text: str | None) -> str:
    """Our failure class for a tool's failed request (the classes of ``BenchMetrics.failures_by_class``)."""
    if status and 400 <= status < 500:
        return "http_4xx"
    if status and status >= 500:
        return "http_5xx"
    low = (text or "").lower()
    for needle, cls in (("timeout", "timeout"), ("reset", "connection_reset"), ("connect", "connect_error")):
        if needle in low:
            return cls
    return "other"
