#!/usr/bin/env python3
"""Measure a whole release of the CPU default, step by step, and whether every check was decided.

Runs the README's main command (``run.py --workflow release --local-server``) in each asked mode, ``--runs``
times, each into its own run directory, and prints per mode: the wall time of each manifest step (median over
the runs, with min..max; steps that run side by side overlap, so they sum past the wall time), the total
against the mode's goal, and from ``report.json`` the verdict, the number of checks per decision, and per
check the samples behind it, how many looks and why sampling stopped. A run counts as "decided" only when no
check is inconclusive. The first run of a mode builds whatever is missing (venvs, the converted model); pass
``--warm-up`` to run one unmeasured release first.

    python3 scripts/measure_release_time.py --modes smoke,ci [--runs 2] [--warm-up] [--standby]

Without ``--standby`` every release starts its own server (``--fresh-server``); with it, one standby server
is started first and every release reuses it (the figure of a model engineer who keeps one running).

Exit status: 0 when every measured release exited 0, 1 otherwise (its last lines name why).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: The speed goals of a warm release on 2 cores, seconds.
GOALS_S = {"smoke": 60.0, "ci": 240.0}
#: A whole release in full mode may run for hours; smoke and ci have minutes.
RUN_DEADLINE_S = {"smoke": 900, "ci": 1800, "full": 4 * 3600}


@dataclass
class ReleaseTiming:
    """One measured release: its exit code, wall seconds, seconds per manifest step, and decisions."""

    mode: str
    exit_code: int
    wall_s: float
    steps: dict[str, float] = field(default_factory=dict)
    decisions: Counter = field(default_factory=Counter)
    result: str = "?"
    undecided: list[str] = field(default_factory=list)
    load_before: float = 0.0
    checks: list[dict] = field(default_factory=list)


def release_command(model: str, mode: str, run_dir: Path, standby: bool = False) -> list[str]:
    """The README's main command; without ``standby`` it starts its own server (``--fresh-server``) even where
    the user keeps a standby, so the figure includes the server's start."""
    return [sys.executable, str(REPO / "run.py"), "--model", model, "--device", "cpu", "--workflow", "release",
            "--local-server", "--workflow-args", f"mode={mode}", "--output-dir", str(run_dir),
            *([] if standby else ["--fresh-server"])]


def start_standby(model: str, root: Path) -> tuple[dict[str, str], int]:
    """``run.py --workflow server --local-server`` into a private standby folder: (the env that finds it, pgid)."""
    env = dict(os.environ, TT_STANDBY_DIR=str(root / "standby"))
    done = subprocess.run([sys.executable, str(REPO / "run.py"), "--model", model, "--device", "cpu", "--workflow",
                           "server", "--local-server", "--service-port", "8199", "--output-dir",
                           str(root / "standby-server")], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=900)
    pid_file = root / "standby-server" / "server.pid.json"
    if done.returncode != 0 or not pid_file.is_file():
        raise SystemExit(f"measure_release_time: the standby server did not start (exit {done.returncode}): "
                         f"{(done.stdout + done.stderr).strip().splitlines()[-1:]}")
    return env, int(json.loads(pid_file.read_text())["pgid"])


def measure_once(model: str, mode: str, run_dir: Path, env: dict[str, str] | None = None) -> ReleaseTiming:
    load = os.getloadavg()[0]
    started = time.monotonic()
    try:
        code = subprocess.run(release_command(model, mode, run_dir, standby=env is not None), cwd=REPO, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=RUN_DEADLINE_S.get(mode, 3600)).returncode
    except subprocess.TimeoutExpired:
        code = 124
    timing = ReleaseTiming(mode, code, time.monotonic() - started, load_before=load)
    manifest = run_dir / "manifest.json"
    if manifest.is_file():
        for step in json.loads(manifest.read_text()).get("steps", []):
            timing.steps[step["name"]] = float(step.get("duration_s") or 0.0)
    report = run_dir / "reports" / "report.json"
    if report.is_file():
        verdict = json.loads(report.read_text()).get("verdict") or {}
        timing.result = str(verdict.get("result"))
        timing.checks = [c for c in verdict.get("checks", []) if isinstance(c, dict)]
        for check in verdict.get("checks", []):
            timing.decisions[check.get("decision")] += 1
            if check.get("decision") == "inconclusive":
                timing.undecided.append(check.get("name", "?"))
    return timing


def spread(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:7.1f}"
    return f"{statistics.median(values):7.1f} ({min(values):.1f}..{max(values):.1f})"


def print_mode(mode: str, timings: list[ReleaseTiming]) -> None:
    names = list(dict.fromkeys(name for t in timings for name in t.steps))
    print(f"\n== mode={mode}: {len(timings)} warm release(s); seconds, median (min..max)")
    for name in names:
        values = [t.steps[name] for t in timings if name in t.steps]
        print(f"  {name:<14} {spread(values)}")
    walls = [t.wall_s for t in timings]
    goal = GOALS_S.get(mode)
    verdict = f" (goal < {goal:g} s: {'met' if statistics.median(walls) < goal else 'missed'})" if goal else ""
    print(f"  {'total wall':<14} {spread(walls)}{verdict}")
    for i, t in enumerate(timings, 1):
        decided = "every check decided" if not t.undecided else f"undecided: {', '.join(t.undecided)}"
        print(f"  run {i}: exit {t.exit_code}, verdict {t.result}, checks {dict(t.decisions)}; {decided}; "
              f"load average before {t.load_before:.1f}")
    if timings and timings[-1].checks:
        print_checks(timings[-1].checks)


def print_checks(checks: list[dict]) -> None:
    """The last run's checks that sampled: samples behind each (n), looks at them, and why sampling stopped."""
    print("  checks of the last run (n = samples, looks, stopped; required marked *):")
    for c in checks:
        if c.get("n") is None and c.get("looks") is None:
            continue
        mark = "*" if c.get("required") else " "
        print(f"   {mark} {str(c.get('name'))[:58]:<58} {c.get('decision')!s:<12} n={c.get('n')!s:<5} "
              f"looks={c.get('looks') if c.get('looks') is not None else '-'!s:<3} {c.get('stopped') or '-'}")


def measure_modes(args: argparse.Namespace, modes: list[str], root: Path, env: dict[str, str] | None) -> list[str]:
    """Each mode's releases, measured and printed; the lines of those that did not exit 0."""
    if args.warm_up:
        warm = measure_once(args.model, modes[0], root / "warm-up", env)
        print(f"warm-up release (mode={modes[0]}): exit {warm.exit_code} in {warm.wall_s:.0f} s")
    if env is not None:
        print("releases reuse one standby server (run.py --workflow server --local-server, started first)")
    failed = []
    for mode in modes:
        timings = [measure_once(args.model, mode, root / f"{mode}-{i}", env) for i in range(1, args.runs + 1)]
        print_mode(mode, timings)
        failed += [f"{mode} run {i} exited {t.exit_code} (see {root / f'{mode}-{i}' / 'run.log'})"
                   for i, t in enumerate(timings, 1) if t.exit_code != 0]
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="SmolLM2-135M-Instruct")
    parser.add_argument("--modes", default="smoke,ci", help="comma-separated: smoke, ci, full")
    parser.add_argument("--runs", type=int, default=1, help="measured releases per mode")
    parser.add_argument("--warm-up", action="store_true", help="one unmeasured release first (builds venvs)")
    parser.add_argument("--keep", type=Path, help="keep the run directories under this folder")
    parser.add_argument("--standby", action="store_true",
                        help="start one standby server first (run.py --workflow server --local-server) and measure "
                             "releases that reuse it; stopped at the end")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or args.runs < 1 or any(m not in RUN_DEADLINE_S for m in modes):
        parser.error("--modes takes smoke, ci or full; --runs at least 1")
    root = args.keep or Path(tempfile.mkdtemp(prefix="tt-release-time-"))
    root.mkdir(parents=True, exist_ok=True)
    env, standby_pgid = start_standby(args.model, root) if args.standby else (None, None)
    try:
        failed = measure_modes(args, modes, root, env)
    finally:
        if standby_pgid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(standby_pgid, signal.SIGTERM)
    print(f"\nrun directories: {root}")
    if failed:
        print("measure_release_time: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
