"""Each load generator's timing error against the stub (benchmarking/tool_certify.py, scripts/tool_certify.py).

The end-to-end test keeps only bounds a real timing bug crosses, as test_bench_timing.py does: a tool whose
output is misread (ms taken for s, gaps read as running totals, chunk times stamped after buffering) is off
by a whole programmed TTFT or gap on the typical request, while a busy 2-core host moves the tail by
milliseconds. The strict figures are the benchmark's (benchmarking/README.md).
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from benchmarking.metrics import RequestRecord
from benchmarking.tool_certify import Settings, figures, match_writes, relative_error, table
from contracts import REPO_ROOT

TTFT_MS, ITL_MS = 50.0, 10.0


def _module(*args: str, env_extra: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "benchmarking.tool_certify", *args], capture_output=True,
                          text=True, env=env, cwd=REPO_ROOT, timeout=timeout, stdin=subprocess.DEVNULL)


def _numbers(value):
    """Every number in a nested result (the figures must all be finite)."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _numbers(v)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value


def _rows_of(stdout: str, tool: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if ln.startswith(f"| {tool} ")]


@pytest.mark.integration
def test_ours_and_aiperf_against_the_stub(tmp_path):
    """The documented script (venvs built or reused, then the benchmarks venv) measures our client and aiperf
    against a stub it starts itself (about 25 s: aiperf's own start-up is most of it)."""
    out = tmp_path / "tc.json"
    cmd = [sys.executable, str(REPO_ROOT / "scripts" / "tool_certify.py"), "--tools", "ours,aiperf",
           "--num-requests", "16", "--concurrency", "4", "--osl", "16", "--work-dir", str(tmp_path / "work"),
           "--out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    doc = json.loads(out.read_text())
    ours, aiperf = doc["tools"]
    assert (ours["tool"], aiperf["tool"]) == ("ours", "aiperf") and aiperf["version"] != "unknown"
    for r in (ours, aiperf):
        assert r["completed"] == 16 and r["sent"] == 20 and r["warmup_excluded"] == 4
        assert r["ttft_vs_programmed"]["n"] == 16 and r["itl_vs_programmed"]["n"] == 16 * 15
        assert r["ttft_vs_actual"]["n"] == 16  # both send request ids the stub logs
        assert all(math.isfinite(v) for v in _numbers(r)), r
        assert len(_rows_of(p.stdout, r["tool"])) == 2  # one row in each table
    # bounds a real timing bug crosses (a whole gap or TTFT off on the typical request)
    assert ours["ttft_vs_programmed"]["p50"] < 20.0 and ours["itl_vs_programmed"]["p50"] < ITL_MS / 2
    assert aiperf["ttft_vs_actual"]["p50"] < TTFT_MS and aiperf["itl_vs_actual"]["p50"] < ITL_MS / 2
    assert abs(ours["rows"]["tpot_rel_err"]) < 0.5 and abs(aiperf["rows"]["tpot_rel_err"]) < 0.5
    assert aiperf["own"]["mean_tpot_ms"] is not None  # aiperf counted the stub's tokens as the stub sent them


def test_a_tool_that_cannot_run_is_one_line_in_its_row_and_exit_1(tmp_path):
    """Our client is still measured; aiperf's missing executable and a venv the script could not build are
    each one NOT RUN line, never a silent gap in the table."""
    p = _module("--tools", "ours,aiperf,vllm", "-n", "8", "--concurrency", "4", "--work-dir", str(tmp_path),
                "--not-run", "vllm=vllm: its venv could not be built", "--out", str(tmp_path / "tc.json"),
                env_extra={"TT_AIPERF_BIN": "/nonexistent/aiperf"})
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    aiperf = _rows_of(p.stdout, "aiperf")[0]
    assert "NOT RUN: aiperf: TT_AIPERF_BIN=/nonexistent/aiperf is not an executable file" in aiperf
    assert "NOT RUN: vllm: its venv could not be built" in _rows_of(p.stdout, "vllm")[0]
    results = {r["tool"]: r for r in json.loads((tmp_path / "tc.json").read_text())["tools"]}
    assert results["ours"]["completed"] == 8 and "not_run" not in results["ours"]


def test_ctrl_c_stops_the_stub_and_prints_what_was_measured(tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "benchmarking.tool_certify", "--tools", "ours,aiperf", "-n", "5000",
                          "--work-dir", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)), cwd=REPO_ROOT)
    try:
        url = _wait_for_line(p, "tool_certify: stub at ").split()[3]
        _wait_for_line(p, "== ours:")
        time.sleep(3.0)  # a wave takes 0.37 s; on a busy host the warm-up wave alone can take a second
        p.send_signal(signal.SIGINT)
        rest, _ = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 130, rest[-2000:]
    # what was measured is printed: the interrupted row, or (a host too busy to finish a measured request in
    # time) the one line saying none completed
    assert "| ours (interrupted) |" in rest or "| ours | NOT RUN: ours: no measured request completed" in rest
    assert "NOT RUN: aiperf: not reached (interrupted)" in rest
    with pytest.raises(OSError):
        urllib.request.urlopen(url + "/health", timeout=2)


def _wait_for_line(p: subprocess.Popen, prefix: str, deadline_s: float = 60.0) -> str:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        line = p.stdout.readline()
        if line.startswith(prefix):
            return line
        if not line and p.poll() is not None:
            break
    raise AssertionError(f"no line starting {prefix!r} within {deadline_s} s")


@pytest.mark.parametrize("args,why", [
    (["--tools", "ours,locust"], "expected distinct names from ours, vllm, aiperf, guidellm"),
    (["--osl", "1"], "--osl 1: must be at least 2"),
    (["--itl-ms", "0"], "must be positive"),
    (["--url", "localhost"], "expected http://HOST:PORT"),
    (["--cpu", "999"], "--cpu '999'"),
])
def test_bad_arguments_exit_2_with_one_clear_line(args, why):
    p = _module(*args, timeout=60)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "tool_certify: error: " in p.stderr and why in p.stderr, p.stderr


# ---- the error computation, on hand-made rows ---------------------------------------------------------

def _row(index: int, ttft_ms: float, gap_ms: float, chunks: int = 4, send: float = 0.0, rid: str = "") -> RequestRecord:
    times = [(ttft_ms + k * gap_ms) / 1000.0 for k in range(chunks)]
    return RequestRecord(index=index, request_id=rid or f"tt-{index}", prompt_len=1, requested_output_len=chunks,
                         send_time=send, success=True, ttft=times[0], latency=times[-1], chunk_times=times,
                         output_tokens=chunks, status=200)


def _settings(warmup: int = 1) -> Settings:
    return Settings(ttft_ms=TTFT_MS, itl_ms=ITL_MS, isl=1, osl=4, num_requests=3, concurrency=1, warmup=warmup,
                    tool_deadline_s=60, work_dir="/unused")


def test_errors_on_hand_made_rows_with_a_known_error():
    """TTFT 2 ms late, gaps 1 ms long; the stub itself 1 ms late on the first chunk, on time after. The first
    row sent (a warm-up, 100 ms off) is left out."""
    rows = [_row(i, TTFT_MS + 2.0, ITL_MS + 1.0, send=10.0 + i) for i in range(1, 4)]
    rows.append(_row(0, TTFT_MS + 100.0, ITL_MS + 100.0, send=9.0))
    writes = {r.request_id: [0.0] + [(TTFT_MS + 1.0 + k * (ITL_MS + 1.0)) / 1000.0 for k in range(4)] for r in rows}
    out = figures(rows, writes, _settings())
    assert out["sent"] == 4 and out["completed"] == 3 and out["warmup_excluded"] == 1
    assert out["ttft_vs_programmed"]["n"] == 3 and out["ttft_vs_programmed"]["p50"] == pytest.approx(2.0)
    assert out["itl_vs_programmed"]["n"] == 9 and out["itl_vs_programmed"]["p99"] == pytest.approx(1.0)
    assert out["ttft_vs_actual"]["p50"] == pytest.approx(1.0)     # the stub's own 1 ms removed
    assert out["itl_vs_actual"]["max"] == pytest.approx(0.0, abs=1e-9)
    assert out["rows"]["ttft_rel_err"] == pytest.approx(2.0 / TTFT_MS)
    assert out["rows"]["tpot_rel_err"] == pytest.approx(1.0 / ITL_MS)
    assert relative_error(9.0, 10.0) == pytest.approx(-0.1) and relative_error(None, 10.0) is None


def test_a_tool_without_chunk_times_has_no_gap_figure_and_says_so():
    rows = [_row(i, TTFT_MS + 3.0, ITL_MS, rid=f"guidellm-{i}") for i in range(3)]
    for r in rows:
        r.chunk_times = []
    out = figures(rows, {}, _settings(warmup=0))
    assert out["itl_vs_programmed"] is None and out["ttft_vs_actual"] is None
    assert out["ttft_vs_programmed"]["p50"] == pytest.approx(3.0)
    assert any("no per-chunk times" in n for n in out["notes"])
    result = {**out, "tool": "guidellm", "version": "0.8.1", "wall_s": 1.0, "own": {},
              "stub_lateness_us": {"p50": 1.0, "p99": 2.0}}
    [row] = [ln for ln in table([result]).splitlines() if ln.startswith("| guidellm")]
    assert row.count("not measured") == 2


def test_rows_are_matched_to_the_stubs_write_log_by_each_tools_request_id():
    ours, aiperf, vllm, guide = (_row(0, 1, 1), _row(1, 1, 1, rid="aiperf-x-1"), _row(2, 1, 1, rid="vllm-x-2"),
                                 _row(3, 1, 1, rid="guidellm-x-3"))
    aiperf.server_request_id = "0c2c538f-uuid"
    writes = {"tt-0": [1.0], "0c2c538f-uuid": [2.0], "bench-1a2b3c4d-2": [3.0], "stub-4": [4.0]}
    assert match_writes([ours, aiperf, vllm, guide], writes) == {"tt-0": [1.0], "aiperf-x-1": [2.0],
                                                                  "vllm-x-2": [3.0]}
