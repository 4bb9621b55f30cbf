"""Each load generator's own timing error against the stub's ground truth (a benchmark script).

Why: a ``tool=vllm|aiperf|guidellm`` point is only as good as that tool's clock, and ``certify.py``
measures our client alone. Here every named tool drives the same delay-programmed stub (chunk k of
a request written at ``t_received + ttft + k * itl``) at the same concurrency, request count and
output length, its output is parsed into our rows (``benchmarking.tools``) and set against what the
stub was programmed to do. Which tool can be trusted at which resolution is then a measured fact.

Per tool (the first ``warmup`` requests, one wave of the concurrency by default, are left out: they
pay connection set-up, as in ``certify.py``):

* |TTFT - programmed TTFT| per request and |gap - programmed gap| per inter-chunk gap: n, p50, p99
  with distribution-free 95% intervals (``certify.stat``). A tool that keeps no per-chunk times
  (guidellm) has no gap figure: it is reported as not measured, never estimated.
* the same against what the stub actually did (its write log), where the rows can be matched to it
  by request id: this removes the stub's own lateness and leaves the tool's error alone;
* the mean TTFT and mean TPOT as a signed relative error against the programmed ones, twice: as our
  point record computes them from the tool's rows, and as the tool's own summary reports them (that
  summary also holds the warm-up requests; of its figures, the one defined as vLLM's TPOT is taken);
* the stub's own lateness (``/stub/stats``), the tool's version and its wall time (start-up included).

Run (builds the tools' venvs, then runs this module in the benchmarks venv)::

    python3 scripts/tool_certify.py --tools ours,vllm,aiperf,guidellm --out /tmp/tool_certify.json

or ``python3 -m benchmarking.tool_certify ...`` with ``TT_<TOOL>_BIN`` set (a client package never
builds venvs). Exit 0: every tool measured; 1: some tool NOT RUN (one line says why); 2: bad
arguments; 130: interrupted (the stub is stopped and what was measured is printed).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from typing import Any, Callable

from benchmarking import tools
from benchmarking.certify import errors_vs_stub
from benchmarking.client import ClientConfig
from benchmarking.metrics import RequestRecord
from benchmarking.prompts import request_body
from benchmarking.runner import WorkItem, run_point
from benchmarking.stub_server import StubConfig
from benchmarking.tiny_tokenizer import count_tokens, make_tokenizer_dir
from contracts import REPO_ROOT
from contracts.model_spec import project_version

MODEL = StubConfig().model
STUB_TOKEN = StubConfig().token_text
ENDPOINT = "/v1/completions"
STUB_START_S = 30.0   # the stub prints its port within this
HTTP_TIMEOUT_S = 10.0  # one /stub/* call
#: `vllm bench serve`'s request ids (its default --request-id-prefix ``bench-<hex>-``, then the prompt's index)
VLLM_ID = re.compile(r"^bench-[0-9a-f]+-(\d+)$")
EXIT_NOT_RUN, EXIT_INTERRUPTED = 1, 130  # bad arguments: 2 (argparse)


@dataclass(frozen=True)
class Settings:
    """What every tool is asked to do, and what the stub is programmed to answer."""

    ttft_ms: float
    itl_ms: float
    isl: int
    osl: int
    num_requests: int      # measured requests, after the warm-up ones
    concurrency: int
    warmup: int
    tool_deadline_s: float
    work_dir: str

    @property
    def total(self) -> int:
        return self.warmup + self.num_requests


class StubError(RuntimeError):
    """The stub did not start or does not answer; the message is one line."""


def _child_setup() -> None:
    """Runs in the stub's process before exec: it dies with us (Linux parent-death signal)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Stub:
    """The delay-programmed stub: one started (pinned, stopped) here, or one already at ``url``."""

    def __init__(self, url: str, proc: subprocess.Popen[str] | None = None):
        self.url, self.proc = url.rstrip("/"), proc

    @classmethod
    def start(cls, ttft_ms: float, itl_ms: float, cpu: int | None) -> "Stub":
        """Start it in its own session (a Ctrl-C reaches us, and we stop it) and wait for its port."""
        cmd = [sys.executable, "-m", "benchmarking.stub_server", "--port", "0", "--ttft-ms", f"{ttft_ms:g}",
               "--itl-ms", f"{itl_ms:g}", *(["--cpu", str(cpu)] if cpu is not None else [])]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT,
                                start_new_session=True, preexec_fn=_child_setup)
        stub = cls("", proc)
        try:
            stub.url = f"http://127.0.0.1:{_listening_port(proc, STUB_START_S)}"
        except BaseException:
            stub.stop()
            raise
        return stub

    def call(self, path: str, post: bool = False) -> dict[str, Any]:
        req = urllib.request.Request(self.url + path, data=b"" if post else None, method="POST" if post else "GET")
        try:
            with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as resp:
                answer: dict[str, Any] = json.loads(resp.read())
                return answer
        except (OSError, ValueError) as exc:
            raise StubError(f"the stub at {self.url} did not answer {path}: {exc}") from None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def _listening_port(proc: subprocess.Popen[str], deadline_s: float) -> int:
    """The port of ``STUB_LISTENING <port>``, within ``deadline_s``."""
    end = time.monotonic() + deadline_s
    assert proc.stdout is not None
    while time.monotonic() < end:
        if select.select([proc.stdout], [], [], 0.2)[0]:
            line = proc.stdout.readline()
            if line.startswith("STUB_LISTENING "):
                return int(line.split()[1])
            if not line:
                break
        elif proc.poll() is not None:
            break
    state = f"exited {proc.returncode}" if proc.poll() is not None else f"no port within {deadline_s:g} s"
    raise StubError(f"the stub did not start ({state})")


def prompt_text(isl: int) -> str:
    """One prompt of ``isl`` words for every request (the stub's timing does not depend on it)."""
    return " ".join(["hello"] * isl)


def measured_rows(rows: list[RequestRecord], warmup: int) -> list[RequestRecord]:
    """The rows after the first ``warmup`` sent (by send time; rows without one keep their order)."""
    return sorted(rows, key=lambda r: (r.send_time, r.index))[warmup:]


def match_writes(rows: list[RequestRecord], writes: dict[str, list[float]]) -> dict[str, list[float]]:
    """The stub's write log keyed by our rows' ``request_id``: our client sends that id as x-request-id,
    aiperf keeps the id it sent (``server_request_id``), `vllm bench serve` sends ``bench-<hex>-<index>``
    (its rows keep the index); guidellm sends none, so its rows match nothing."""
    by_index = {int(m.group(1)): w for key, w in writes.items() if (m := VLLM_ID.match(key))}
    out = {}
    for r in rows:
        w = writes.get(r.request_id) or (writes.get(r.server_request_id) if r.server_request_id else None)
        if w is None and r.request_id.startswith("vllm-"):
            w = by_index.get(r.index)
        if w is not None:
            out[r.request_id] = w
    return out


def relative_error(measured: float | None, truth: float) -> float | None:
    """(measured - truth) / truth: signed, so a tool that reads late is positive."""
    return None if measured is None or truth <= 0 else (measured - truth) / truth


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def figures(rows: list[RequestRecord], writes: dict[str, list[float]], s: Settings) -> dict[str, Any]:
    """Every error figure of one tool's rows (see the module docstring); ``None`` where not measured."""
    measured = measured_rows(rows, s.warmup)
    ok = [r for r in measured if r.success]
    out: dict[str, Any] = errors_vs_stub(measured, match_writes(measured, writes), s.ttft_ms, s.itl_ms)
    out["notes"] = []
    if not any(r.chunk_times for r in ok):
        out["itl_vs_programmed"] = out["itl_vs_actual"] = None
        out["notes"].append("no per-chunk times in its output: no gap figure")
    if out["ttft_vs_actual"]["n"] == 0:
        out["ttft_vs_actual"] = out["itl_vs_actual"] = None
        out["notes"].append("its rows cannot be matched to the stub's write log: no figure against the stub's "
                            "actual writes")
    mean_ttft = _mean([r.ttft * 1000.0 for r in ok if r.ttft is not None])
    mean_tpot = _mean([t * 1000.0 for t in (r.tpot for r in ok) if t is not None])
    out["rows"] = {"mean_ttft_ms": mean_ttft, "mean_tpot_ms": mean_tpot,
                   "ttft_rel_err": relative_error(mean_ttft, s.ttft_ms),
                   "tpot_rel_err": relative_error(mean_tpot, s.itl_ms)}
    out.update(sent=len(rows), completed=len(ok), failed=len(measured) - len(ok), warmup_excluded=s.warmup)
    return out


def own_summary(name: str, job: tools.ToolJob, s: Settings) -> dict[str, Any]:
    """The tool's own mean TTFT / TPOT from its summary file, against the programmed ones."""
    try:
        ttft, tpot = OWN_SUMMARY[name](job)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        return {"mean_ttft_ms": None, "mean_tpot_ms": None, "note": f"no summary ({type(exc).__name__}: {exc})"}
    return {"mean_ttft_ms": ttft, "mean_tpot_ms": tpot, "ttft_rel_err": relative_error(ttft, s.ttft_ms),
            "tpot_rel_err": relative_error(tpot, s.itl_ms)}


def _aiperf_means(job: tools.ToolJob) -> tuple[float | None, float | None]:
    """aiperf's ``inter_token_latency`` is (latency - TTFT) / (output tokens - 1): TPOT as vLLM defines it;
    it counts the output tokens with the tokenizer (hence the stub's token added to ours)."""
    records_dir = os.path.dirname(tools.module("aiperf").RECORDS_FILE)
    with open(os.path.join(job.out_dir, records_dir, "profile_export_aiperf.json"), encoding="utf-8") as fh:
        raw = json.load(fh)
    return raw["time_to_first_token"]["avg"], raw["inter_token_latency"]["avg"]


def _guidellm_means(job: tools.ToolJob) -> tuple[float | None, float | None]:
    """guidellm's ``time_per_output_token_ms`` divides the whole latency, TTFT included, by the output tokens;
    its ``inter_token_latency_ms`` is TPOT as vLLM (and our record) define it, so that one is compared."""
    with open(os.path.join(job.out_dir, tools.module("guidellm").REPORT), encoding="utf-8") as fh:
        metrics = json.load(fh)["benchmarks"][0]["metrics"]
    return (metrics["time_to_first_token_ms"]["successful"]["mean"],
            metrics["inter_token_latency_ms"]["successful"]["mean"])


def _vllm_means(job: tools.ToolJob) -> tuple[float | None, float | None]:
    """`vllm bench serve`'s result keys: its TPOT is the definition our record follows."""
    with open(os.path.join(job.out_dir, tools.module("vllm").RESULT), encoding="utf-8") as fh:
        raw = json.load(fh)
    return raw["mean_ttft_ms"], raw["mean_tpot_ms"]


OWN_SUMMARY: dict[str, Callable[[tools.ToolJob], tuple[float | None, float | None]]] = {
    "aiperf": _aiperf_means, "guidellm": _guidellm_means, "vllm": _vllm_means}


def not_run(name: str, why: str) -> dict[str, Any]:
    return {"tool": name, "not_run": why}


def _finish(name: str, out: dict[str, Any], stub: Stub, wall_s: float, duration_s: float) -> dict[str, Any]:
    """Common tail of one tool's result: the stub's lateness during it, its rate (every completed request, warm-up
    included, over the duration the tool itself measured: with a zero-delay stub, the client's own capacity), and
    NOT RUN when nothing completed."""
    out.update(tool=name, wall_s=wall_s, stub_lateness_us=stub.call("/stub/stats")["lateness_us"],
               duration_s=duration_s,
               requests_per_s=out["completed_all"] / duration_s if duration_s > 0 and out["completed_all"] else None)
    if not out["completed"]:
        out["not_run"] = f"{name}: no measured request completed (of {out['sent']} sent)"
    return out


def measure_ours(s: Settings, stub: Stub) -> dict[str, Any]:
    """Our client in process, as ``certify.py`` runs it (SIGINT ends the point with what completed)."""
    body = request_body(prompt_text(s.isl), s.osl, MODEL, chat=False)
    cfg = ClientConfig(base_url=stub.url, endpoint=ENDPOINT, request_timeout_s=s.tool_deadline_s,
                       stall_timeout_s=min(60.0, s.tool_deadline_s))
    stub.call("/stub/stats", post=True)
    t0 = time.perf_counter()
    run = run_point(cfg, [WorkItem(body, s.isl, s.osl)] * s.total, [0.0] * s.total, s.concurrency,
                    budget_s=s.tool_deadline_s, stop_on_signals=True)
    wall = time.perf_counter() - t0
    out = figures(run.records, stub.call("/stub/writes"), s)
    out.update(version=f"tt-bench {project_version()}", command="benchmarking.runner.run_point (in process)")
    out["own"] = dict(out["rows"])  # our point record computes its means from these rows
    if run.interrupted:
        out["interrupted"] = True
    out["completed_all"] = sum(1 for r in run.records if r.success)
    return _finish("ours", out, stub, wall, run.duration)


def measure_tool(name: str, s: Settings, stub: Stub, tokenizer_dir: str) -> dict[str, Any]:
    """One other tool through ``benchmarking.tools.run``; NOT RUN (one line) when it cannot run."""
    job = tools.ToolJob(base_url=stub.url, model=MODEL, api_key=None, tokenizer_dir=tokenizer_dir, endpoint=ENDPOINT,
                        isl=s.isl, osl=s.osl, concurrency=s.concurrency, num_prompts=s.total,
                        out_dir=os.path.join(s.work_dir, name), prompts=[prompt_text(s.isl)] * s.total,
                        request_timeout_s=s.tool_deadline_s)
    stub.call("/stub/stats", post=True)
    t0 = time.perf_counter()
    try:
        run = tools.run(name, job, s.tool_deadline_s, log=print)
    except tools.ToolUnavailable as exc:
        return not_run(name, str(exc))
    wall = time.perf_counter() - t0
    out = figures(run.rows, stub.call("/stub/writes"), s)
    out.update(version=run.version, command=run.command, warnings=run.warnings, raw_file=run.raw_file,
               own=own_summary(name, job, s))
    out["completed_all"] = sum(1 for r in run.rows if r.success)
    return _finish(name, out, stub, wall, run.duration)


def measure_all(names: list[str], s: Settings, stub: Stub, tokenizer_dir: str,
                given_not_run: dict[str, str]) -> tuple[list[dict[str, Any]], bool]:
    """Each tool in turn; returns (results, interrupted). Ctrl-C ends the tool in flight as NOT RUN."""
    results: list[dict[str, Any]] = []
    for name in names:
        print(f"== {name}: {s.total} requests ({s.warmup} warm-up) at concurrency {s.concurrency}, osl {s.osl}",
              flush=True)
        try:
            if name in given_not_run:
                result = not_run(name, given_not_run[name])
            elif name == "ours":
                result = measure_ours(s, stub)
            else:
                result = measure_tool(name, s, stub, tokenizer_dir)
        except KeyboardInterrupt:
            results.append(not_run(name, f"{name}: interrupted (Ctrl-C) before it finished"))
            return results, True
        except StubError as exc:
            result = not_run(name, f"{name}: {exc}")
        results.append(result)
        print(f"   {result.get('not_run') or 'done in %.1f s' % result['wall_s']}", flush=True)
        if result.get("interrupted"):
            return results, True
    return results, False


# ---- the table -------------------------------------------------------------------------------------------

def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _quantile_cell(figure: dict[str, Any] | None, key: str) -> str:
    """``p50 [low, high]`` in ms; ``[–]`` when the sample is too small to bound it."""
    if figure is None:
        return "not measured"
    if not figure["n"]:
        return "–"
    ci = figure.get(f"{key}_ci95")
    return f"{_ms(figure[key])} [{_ms(ci[0])}, {_ms(ci[1])}]" if ci else f"{_ms(figure[key])} [–]"


def _rel(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:+.1f}%"


def _n_cell(r: dict[str, Any], ttft_key: str, itl_key: str) -> str:
    gaps = r[itl_key]["n"] if r.get(itl_key) else "–"
    return f"{r[ttft_key]['n'] if r.get(ttft_key) else '–'} / {gaps}"


def table(results: list[dict[str, Any]], against: str = "programmed") -> str:
    """A markdown table, one row per tool: errors against the programmed timeline (``against='programmed'``)
    or against the stub's actual writes (``'actual'``)."""
    tk, ik = f"ttft_vs_{against}", f"itl_vs_{against}"
    head = ["tool", "version", "wall s", "ok / sent", "n TTFT / gaps", "TTFT err p50 ms [95% CI]",
            "TTFT err p99 ms [95% CI]", "gap err p50 ms [95% CI]", "gap err p99 ms [95% CI]"]
    if against == "programmed":
        head += ["mean TTFT err (rows / own)", "mean TPOT err (rows / own)", "stub late p50 / p99 µs", "req/s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        if r.get("not_run"):
            lines.append(f"| {r['tool']} | NOT RUN: {r['not_run']} |" + " |" * (len(head) - 2))
            continue
        name = r["tool"] + (" (interrupted)" if r.get("interrupted") else "")
        cells = [name, r["version"], f"{r['wall_s']:.1f}", f"{r['completed']} / {r['sent']}",
                 _n_cell(r, tk, ik), _quantile_cell(r.get(tk), "p50"), _quantile_cell(r.get(tk), "p99"),
                 _quantile_cell(r.get(ik), "p50"), _quantile_cell(r.get(ik), "p99")]
        if against == "programmed":
            own, rows, late = r.get("own") or {}, r["rows"], r["stub_lateness_us"]
            cells += [f"{_rel(rows['ttft_rel_err'])} / {_rel(own.get('ttft_rel_err'))}",
                      f"{_rel(rows['tpot_rel_err'])} / {_rel(own.get('tpot_rel_err'))}",
                      f"{late['p50']:.0f} / {late['p99']:.0f}",
                      "n/a" if r.get("requests_per_s") is None else f"{r['requests_per_s']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(results: list[dict[str, Any]], s: Settings) -> str:
    """Both tables with their legend, as printed (and pasted into benchmarking/README.md)."""
    notes = [f"- {r['tool']}: {note}" for r in results if not r.get("not_run") for note in r.get("notes", [])]
    return "\n".join([
        f"Error against the programmed timeline (TTFT {s.ttft_ms:g} ms, gap {s.itl_ms:g} ms), |measured - "
        f"programmed| in ms; mean errors signed, relative:", "", table(results, "programmed"), "",
        "Error against what the stub actually wrote (its write log; the stub's own lateness removed):", "",
        table(results, "actual"), "",
        "[–]: too few samples for a 95% interval (a p99 needs about 370); rows: our point record's mean from the "
        "tool's rows, warm-up excluded; own: the tool's own summary, warm-up included; req/s: every completed "
        "request over the duration the tool measured (against a zero-delay stub: the client's own capacity).",
        *notes])


# ---- command line ----------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, checked: anything wrong exits 2 with one line (argparse's ``error``)."""
    ap = argparse.ArgumentParser(prog="tool_certify", description=__doc__.split("\n")[0])
    ap.add_argument("--tools", default=",".join(tools.CHOICES), help=f"comma list of {', '.join(tools.CHOICES)}")
    ap.add_argument("--url", help="a stub started with the same --ttft-ms/--itl-ms (default: start one here)")
    ap.add_argument("--ttft-ms", type=float, default=50.0)
    ap.add_argument("--itl-ms", type=float, default=10.0)
    ap.add_argument("--isl", type=int, default=16, help="prompt words (vllm: its own random prompts of this length)")
    ap.add_argument("--osl", type=int, default=32)
    ap.add_argument("--num-requests", "-n", type=int, default=64, help="measured requests per tool")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=None, help="requests left out first (default: the concurrency)")
    ap.add_argument("--tool-deadline-s", type=float, default=600.0, help="the most one tool may take")
    ap.add_argument("--stub-cpu", type=int, default=None,
                    help="pin the stub started here to this CPU (default: the last one, with 2 or more)")
    ap.add_argument("--cpu", default=None, help="comma list of CPUs for this process and the tools it starts "
                    "(default: every CPU but the stub's)")
    ap.add_argument("--tokenizer-dir", help="a local tokenizer directory for the tools (default: a tiny one made here)")
    ap.add_argument("--work-dir", help="where the tools write (default: a new temporary directory, kept)")
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--not-run", action="append", default=[], metavar="TOOL=WHY",
                    help="report TOOL as NOT RUN for WHY (scripts/tool_certify.py: its venv could not be built)")
    a = ap.parse_args(argv)
    _check(ap, a)
    return a


def _check(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """Value checks argparse cannot do; each failure is ``ap.error`` (exit 2, one line)."""
    a.tools = [t.strip() for t in a.tools.split(",") if t.strip()]
    bad = [t for t in a.tools if t not in tools.CHOICES]
    if bad or not a.tools or len(set(a.tools)) != len(a.tools):
        ap.error(f"--tools {','.join(a.tools)!r}: expected distinct names from {', '.join(tools.CHOICES)}")
    for flag, value, low in (("--num-requests", a.num_requests, 1), ("--concurrency", a.concurrency, 1),
                             ("--osl", a.osl, 2), ("--isl", a.isl, 1)):
        if value < low:
            why = " (TPOT needs two tokens)" if flag == "--osl" else ""
            ap.error(f"{flag} {value}: must be at least {low}{why}")
    if not (a.ttft_ms > 0 and a.itl_ms > 0 and a.tool_deadline_s > 0):
        ap.error("--ttft-ms, --itl-ms and --tool-deadline-s must be positive (the errors are relative to them)")
    a.warmup = a.concurrency if a.warmup is None else a.warmup
    if a.warmup < 0:
        ap.error(f"--warmup {a.warmup}: must be at least 0")
    if a.url is not None and not re.match(r"^https?://[^/\s]+/?$", a.url):
        ap.error(f"--url {a.url!r}: expected http://HOST:PORT of a running stub")
    a.not_run = dict(_split_not_run(ap, item) for item in a.not_run)
    a.cpus = _check_cpus(ap, a)


def _split_not_run(ap: argparse.ArgumentParser, item: str) -> tuple[str, str]:
    name, sep, why = item.partition("=")
    if not sep or name not in tools.CHOICES or not why.strip():
        ap.error(f"--not-run {item!r}: expected TOOL=WHY")
    return name, why.strip()


def _check_cpus(ap: argparse.ArgumentParser, a: argparse.Namespace) -> set[int] | None:
    """The stub's CPU (``a.stub_cpu``, set here) and this process's CPUs, both within our affinity."""
    allowed = sorted(os.sched_getaffinity(0))
    if a.stub_cpu is not None and a.stub_cpu not in allowed:
        ap.error(f"--stub-cpu {a.stub_cpu}: not one of the CPUs this process may use ({allowed})")
    if a.stub_cpu is None and a.url is None and len(allowed) > 1:
        a.stub_cpu = allowed[-1]
    if a.cpu is None:
        rest = set(allowed) - ({a.stub_cpu} if a.url is None and a.stub_cpu is not None else set())
        return rest or None
    try:
        cpus = {int(c) for c in a.cpu.split(",") if c.strip()}
    except ValueError:
        cpus = set()
    if not cpus or not cpus <= set(allowed):
        ap.error(f"--cpu {a.cpu!r}: expected a comma list of the CPUs this process may use ({allowed})")
    return cpus


def machine(a: argparse.Namespace) -> dict[str, Any]:
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "cpus": os.cpu_count(), "affinity": sorted(os.sched_getaffinity(0)), "stub_cpu": a.stub_cpu,
            "client_cpus": sorted(a.cpus) if a.cpus else None, "loadavg_start": os.getloadavg()}


def settings(a: argparse.Namespace) -> Settings:
    """What every tool is asked to do; the work directory is made here (and kept: the tools' logs are there)."""
    work = a.work_dir or tempfile.mkdtemp(prefix="tt-tool-certify-")
    os.makedirs(work, exist_ok=True)
    return Settings(ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, isl=a.isl, osl=a.osl, num_requests=a.num_requests,
                    concurrency=a.concurrency, warmup=a.warmup, tool_deadline_s=a.tool_deadline_s, work_dir=work)


def tokenizer_for(a: argparse.Namespace, s: Settings) -> str:
    """The tools' tokenizer directory: the one given, else the tiny one made here with the stub's token as one
    token (checked), so that a tool counting output tokens with it counts what the stub sent."""
    if a.tokenizer_dir or all(t == "ours" for t in a.tools):
        return a.tokenizer_dir or ""
    directory = make_tokenizer_dir(os.path.join(s.work_dir, "tokenizer"), added=(STUB_TOKEN,))
    if count_tokens(directory, STUB_TOKEN * s.osl) != s.osl:
        raise RuntimeError(f"the tokenizer made in {directory} does not count the stub's token as one token")
    return directory


def write_out(path: str | None, doc: dict[str, Any]) -> None:
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    facts = machine(a)
    if a.cpus:
        os.sched_setaffinity(0, a.cpus)  # the tools started below inherit it
    stub: Stub | None = None
    results: list[dict[str, Any]] = []
    interrupted = False
    s = settings(a)
    print(f"tool_certify: tools {','.join(a.tools)}; work dir {s.work_dir}", flush=True)
    try:
        tokenizer_dir = tokenizer_for(a, s)
        stub = Stub(a.url) if a.url else Stub.start(a.ttft_ms, a.itl_ms, a.stub_cpu)
        stub.call("/stub/stats")  # a --url that is no stub fails here, once for every tool
        print(f"tool_certify: stub at {stub.url}" + (f" (pid {stub.proc.pid}, started here)" if stub.proc else ""),
              flush=True)
        results, interrupted = measure_all(a.tools, s, stub, tokenizer_dir, a.not_run)
    except KeyboardInterrupt:
        interrupted = True
    except StubError as exc:
        results = [not_run(name, f"{name}: {exc}") for name in a.tools]
    finally:
        if stub is not None:
            stub.stop()
    done = {r["tool"] for r in results}
    results += [not_run(name, f"{name}: not reached (interrupted)") for name in a.tools if name not in done]
    facts["loadavg_end"] = os.getloadavg()
    print("\n" + report(results, s), flush=True)
    write_out(a.out, {"settings": asdict(s), "machine": facts, "tools": results, "interrupted": interrupted})
    if interrupted:
        print("tool_certify: interrupted; the stub is stopped, the table holds what was measured", flush=True)
        return EXIT_INTERRUPTED
    return EXIT_NOT_RUN if any(r.get("not_run") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
