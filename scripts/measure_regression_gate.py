#!/usr/bin/env python3
"""The regression gate on real runs: how often it calls an unchanged build regressed, and a slowed one not.

    python3 scripts/measure_regression_gate.py stub [--runs 10]   # ~3 min on 2 cores
    python3 scripts/measure_regression_gate.py cpu [--runs 5]     # ~6 min: the CPU default's smoke releases

``stub``: the shipped delay-programmed stub (a named fake: no engine) at 10 ms per token, one baseline
benchmarks run (mode=smoke), then ``--runs`` runs of the same stub and ``--runs`` runs of a stub 40% slower per
token (14 ms), each with ``--compare-to`` the baseline (a gate: regressed exits 3, undecided 4) and a run history
holding the baseline alone.
``cpu``: ``--runs`` healthy smoke releases of the README's main command on one standby server (started first,
stopped last), each with the release's own comparison with the last accepted run (advisory where undecided;
a smoke release's regression warns by default, so the count is of regressions decided, and of verdicts the
gate failed). Each mode uses a private run history. Prints per group the decisions per comparison and the
exit codes; exit 0 when every run finished (whatever the gate decided), 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

MODEL = "SmolLM2-135M-Instruct"
RUN_DEADLINE_S = 900


def _stub(itl_ms: float, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "benchmarking.stub_server", "--port", str(port), "--ttft-ms", "50",
                             "--itl-ms", str(itl_ms), "--model", MODEL], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(1.5)
    return proc


def _bench(url: str, out: Path, env: dict[str, str], *extra: str) -> int:
    return subprocess.run([sys.executable, str(REPO / "run.py"), "--model", MODEL, "--device", "cpu", "--workflow",
                           "benchmarks", "--server-url", url, "--no-auth", "--workflow-args", "mode=smoke",
                           "--output-dir", str(out), *extra], cwd=REPO, env=env, capture_output=True,
                          timeout=RUN_DEADLINE_S).returncode


def _summary(run_dir: Path, code: int) -> dict:
    """The comparison's decisions and the verdict of one run."""
    try:
        report = json.loads((run_dir / "reports" / "report.json").read_text())
    except (OSError, ValueError):
        return {"exit": code, "decisions": Counter(), "verdict": "?", "gate_failed": False}
    comparison = report.get("comparison") or {}
    decisions = Counter(m.get("decision") for m in comparison.get("metrics") or [])
    blockers = (report.get("verdict") or {}).get("blockers") or []
    return {"exit": code, "decisions": decisions, "verdict": (report.get("verdict") or {}).get("result"),
            "gate_failed": any(b.get("category") == "comparison" for b in blockers),
            "sources": Counter(m.get("noise_source") for m in comparison.get("metrics") or [])}


def print_group(name: str, rows: list[dict]) -> None:
    """One line per group: comparisons with any metric regressed, all within noise, any undecided; exit codes."""
    n = len(rows)
    regressed = sum(r["decisions"].get("regressed", 0) > 0 for r in rows)
    within = sum(bool(r["decisions"]) and set(r["decisions"]) <= {"within_noise", "improved"} for r in rows)
    undecided = sum(r["decisions"].get("inconclusive", 0) > 0 and not r["decisions"].get("regressed") for r in rows)
    failed = sum(r["gate_failed"] for r in rows)
    codes = Counter(r["exit"] for r in rows)
    sources = sum((r.get("sources") or Counter() for r in rows), Counter())
    print(f"{name}: {n} runs; any metric regressed {regressed}/{n}; all within noise {within}/{n}; undecided "
          f"{undecided}/{n}; verdict failed by the gate {failed}/{n}; exit codes "
          f"{dict(sorted(codes.items()))}; noise from {dict(sources)}", flush=True)


def measure_stub(runs: int, root: Path) -> bool:
    env = dict(os.environ, TT_HISTORY_URL=f"sqlite:///{root / 'history.sqlite3'}")
    fast, slow = _stub(10, 18461), _stub(14, 18462)
    try:
        base = root / "base"
        if _bench("http://127.0.0.1:18461", base, env) != 0:
            print("measure_regression_gate: the baseline run failed; see " + str(base), file=sys.stderr)
            return False
        groups = {"unchanged stub (10 ms/token)": "http://127.0.0.1:18461",
                  "stub 40% slower per token (14 ms)": "http://127.0.0.1:18462"}
        for name, url in groups.items():
            rows = []
            for i in range(runs):
                # each compared run on a copy of the baseline's history: one earlier run, as the gate is asked to
                # decide from (the runs compared before it, of another build, would otherwise count as its setup)
                out = root / f"{url[-1]}-{i}"
                history = root / f"history-{url[-1]}-{i}.sqlite3"
                shutil.copyfile(root / "history.sqlite3", history)
                own = dict(env, TT_HISTORY_URL=f"sqlite:///{history}")
                rows.append(_summary(out, _bench(url, out, own, "--compare-to", str(base))))
            print_group(name, rows)
        return True
    finally:
        for proc in (fast, slow):
            os.killpg(proc.pid, signal.SIGTERM)


def measure_cpu(runs: int, root: Path) -> bool:
    from measure_release_time import release_command, start_standby  # a sibling script (scripts/_repo.py)

    env, pgid = start_standby(MODEL, root)
    env["TT_HISTORY_URL"] = f"sqlite:///{root / 'history.sqlite3'}"
    rows = []
    try:
        for i in range(runs + 1):  # the first release is the first baseline: it compares with nothing
            out = root / f"release-{i}"
            code = subprocess.run(release_command(MODEL, "smoke", out, standby=True), cwd=REPO, env=env,
                                  capture_output=True, timeout=RUN_DEADLINE_S).returncode
            if i:
                rows.append(_summary(out, code))
        print_group("healthy CPU-default smoke releases (comparison with last)", rows)
        return all(r["verdict"] != "?" for r in rows)
    finally:
        os.killpg(pgid, signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("stub", "cpu"))
    ap.add_argument("--runs", type=int, default=None, help="runs per group (stub: 10, cpu: 5)")
    args = ap.parse_args(argv)
    import _repo  # noqa: F401  (the repository importable: scripts/_repo.py)

    runs = args.runs if args.runs is not None else (10 if args.what == "stub" else 5)
    if runs < 1:
        print("error: --runs must be at least 1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="tt-gate-") as tmp:
        ok = (measure_stub if args.what == "stub" else measure_cpu)(runs, Path(tmp))
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("measure_regression_gate: interrupted", file=sys.stderr)
        sys.exit(130)
