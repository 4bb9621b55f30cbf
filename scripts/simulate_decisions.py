#!/usr/bin/env python3
"""Print the error rates of the adaptive decisions, by simulation with a known truth (for the release notes).

Simulated benchmark points (TTFT, t/s/u; lognormal latencies, i.i.d. and AR(1)) and eval scores (Bernoulli
items, with and without replacement) go through the real stop rule and judge, looking after every round
(tests/records/decision_simulation.py; tests/records/test_sequential_error_rates.py asserts on the same
table). Per truth x distribution x check: the false pass and false fail rates, the coverage of the final
interval (each with its 95% Monte-Carlo bound), the mean samples used and the share decided before the
budget; then the share of releases of a healthy build in which any check failed.

    python3 scripts/simulate_decisions.py [--runs 300] [--at-target-runs 800] [--seed 2024]

Pure Python, seeded; about 15 s with the defaults on one core.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="simulated checks per cell (default 300)")
    parser.add_argument("--at-target-runs", type=int, default=800,
                        help="simulated checks per cell whose truth sits on the target (default 800)")
    parser.add_argument("--seed", type=int, default=2024, help="seed of the simulation (default 2024)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.at_target_runs < 1:
        parser.error("--runs and --at-target-runs must be at least 1")
    import _repo  # noqa: F401  (the repository importable: scripts/_repo.py)
    from tests.records.decision_simulation import decision_table, format_release, format_table, healthy_release

    started = time.monotonic()
    print(format_table(decision_table(runs=args.runs, seed=args.seed, at_target_runs=args.at_target_runs)))
    print()
    print(format_release(healthy_release(runs=args.runs, seed=args.seed)))
    print(f"\n(seed {args.seed}; {time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
