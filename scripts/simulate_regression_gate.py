#!/usr/bin/env python3
"""The regression gate's error rates, measured by simulation through its real decision code.

    python3 scripts/simulate_regression_gate.py [--draws 400] [--seed 7]

Why: a rule that decides is only as good as its error rates, and they are measured against a known truth,
not assumed. Runs are drawn as a host makes them, on the log scale of a latency (TPOT, lower is better):

* the host's speed is an AR(1) process in time (``Host.drift`` its stationary SD, ``Host.phi`` its
  correlation from one batch-time to the next): runs see it within themselves and between each other; a run
  is ``gap`` batch-times after the previous one (the rest of a release, the next job);
* each request adds its own noise: at concurrency 1 each request alone; at concurrency 4 a batch's shared
  state plus a little of its own (the requests of one batch have near-equal speed);
* a run measures two points, concurrency 1 then 4, of ``requests`` each (8: smoke; 32: ci);
* a server each run starts afresh adds a run level of its own (``Host.restart``) that no block sees; the gate
  then compares with the prior as a floor (``run_noise.choose_level``'s ``restarted``).

Each cell draws a baseline run, then (``history`` > 1) earlier runs of the same setup, and a candidate run of
a build whose truth is ``ratio`` times the baseline's; ``reports.comparison.compare_series`` decides both
points' TPOT. The rates are per comparison: ``regressed`` when any point was decided regressed (what fails a
release), ``both`` when both were. Stdlib only; seeded.
"""
from __future__ import annotations

import argparse
import math
import random
import sys
from dataclasses import dataclass
from typing import Any

TOLERANCE = 0.05
BOOTSTRAP_ITERATIONS = 100  # the hull's request bootstrap: enough for its edges here, 20x faster


@dataclass(frozen=True)
class Host:
    name: str
    drift: float         # stationary SD of the host's log speed
    phi: float           # its AR(1) correlation per batch-time
    request: float       # a request's own log noise (concurrency 1); a batch's shared noise (concurrency 4)
    gap: int = 40        # batch-times between two runs
    restart: float = 0.0  # SD of a run's own log level that no block sees (a server each run starts afresh)


@dataclass(frozen=True)
class Cell:
    host: Host
    requests: int        # per point
    ratio: float         # the candidate's truth / the baseline's
    history: int = 1     # accepted runs of this setup before the candidate (the baseline among them)


HOSTS = {
    "stub": Host("stub server (programmed delay)", 0.002, 0.9, 0.003),
    "steady": Host("steady 2-core host", 0.03, 0.9, 0.05),
    "busy": Host("busy host (one core kept busy)", 0.06, 0.8, 0.08),
    "slow-drift": Host("slow drift the blocks barely see", 0.05, 0.995, 0.05),
    "local": Host("local engine each run restarts (5% hidden run effect)", 0.03, 0.9, 0.05, restart=0.05),
}


class _Clock:
    """The host's AR(1) state, stepped once per batch-time."""

    def __init__(self, rng: random.Random, host: Host) -> None:
        self.rng, self.host, self.state = rng, host, rng.gauss(0, host.drift)

    def step(self, times: int = 1) -> float:
        h = self.host
        for _ in range(times):
            self.state = h.phi * self.state + math.sqrt(1 - h.phi ** 2) * self.rng.gauss(0, h.drift)
        return self.state


def draw_run(rng: random.Random, clock: _Clock, host: Host, requests: int, truth: float) -> dict[str, Any]:
    """One run's per-request TPOTs of both points, in the order sent (``comparison_data.MetricSeries``)."""
    from reports.comparison_data import MetricSeries

    out = {}
    own = rng.gauss(0, host.restart) if host.restart else 0.0
    for concurrency in (1, 4):
        values = []
        for i in range(requests):
            if i % concurrency == 0:
                state = clock.step()
                shared = rng.gauss(0, host.request) if concurrency > 1 else 0.0
            noise = rng.gauss(0, host.request if concurrency == 1 else host.request / 5)
            values.append(truth * math.exp(state + shared + noise + own))
        out[f"isl-128_osl-32_con-{concurrency} tpot_ms"] = MetricSeries(values, False, concurrency)
    clock.step(host.gap)
    return out


def judge(rng: random.Random, cell: Cell) -> list[str]:
    """The decisions of one comparison (both points)."""
    from reports.comparison import compare_series

    clock = _Clock(rng, cell.host)
    earlier = [draw_run(rng, clock, cell.host, cell.requests, 10.0) for _ in range(cell.history)]
    candidate = draw_run(rng, clock, cell.host, cell.requests, 10.0 * cell.ratio)
    metrics, _ = compare_series(candidate, earlier[-1], TOLERANCE, earlier[:-1], iterations=BOOTSTRAP_ITERATIONS,
                                restarted=cell.host.restart > 0)
    return [m.decision for m in metrics]


def simulate(cells: list[Cell], draws: int, seed: int = 7) -> list[dict]:
    rows = []
    for index, cell in enumerate(cells):
        rng = random.Random(seed + 1000 * index)
        outcomes = [judge(rng, cell) for _ in range(draws)]
        rows.append({"host": cell.host.name, "requests": cell.requests, "ratio": cell.ratio,
                     "history": cell.history, "draws": draws,
                     "regressed": sum("regressed" in o for o in outcomes) / draws,
                     "both": sum(all(d == "regressed" for d in o) for o in outcomes) / draws,
                     "within_noise": sum(all(d in ("within_noise", "improved") for d in o) for o in outcomes) / draws,
                     "inconclusive": sum("inconclusive" in o and "regressed" not in o for o in outcomes) / draws})
    return rows


#: The cells of the README's table: unchanged builds (false alarms), +40% from one baseline run (misses), on
#: each host, smoke-sized (8 requests a point) and ci-sized (32).
CELLS = [Cell(HOSTS[h], n, r, k) for h in ("stub", "steady", "busy") for n in (8, 32) for r in (1.0, 1.4)
         for k in (1,)] + [Cell(HOSTS["steady"], 32, r, 8) for r in (1.0, 1.15)] + \
        [Cell(HOSTS["slow-drift"], 32, r, k) for r in (1.0,) for k in (1, 8)] + \
        [Cell(HOSTS["local"], n, r) for n in (8, 32) for r in (1.0, 1.4)]


def table(rows: list[dict]) -> str:
    head = "| host | requests/point | truth ratio | runs of history | false or true `regressed` | both points | " \
           "within noise | inconclusive |\n|---|---|---|---|---|---|---|---|\n"
    return head + "".join(
        f"| {r['host']} | {r['requests']} | {r['ratio']:.2f} | {r['history']} | {r['regressed']:.1%} | "
        f"{r['both']:.1%} | {r['within_noise']:.1%} | {r['inconclusive']:.1%} |\n" for r in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=400, help="comparisons drawn per cell (default 400)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    import _repo  # noqa: F401  (the repository importable: scripts/_repo.py)

    if args.draws < 1:
        print("error: --draws must be at least 1", file=sys.stderr)
        return 2
    print(table(simulate(CELLS, args.draws, args.seed)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
