"""Simulated benchmark points and eval scores with a KNOWN truth, decided by the real stop rule and judge.

Why: the adaptive stop (``records.sampling.sampling_stop``) looks at a point's 95% interval after every
round and stops once each required check is decided; the error rates that promises (a healthy build
fails a check at most 5% of the time, a build that misses its target passes at most 5% of the time)
are properties of the whole procedure, looks included, so they are shown by running the procedure.

What runs here is the product code, not a copy: an LLM point sends rounds through
``records.sampling.SampleGoal`` / ``sampling_stop`` on ``records.judge.target_estimates`` with
``records.judge.target_decision``, combined as ``benchmarking.run_control.sampling_stop`` combines them,
and the report's judge then decides the stopped point from all its samples (the same call). An eval
score is looked at every ``EVAL_CHUNK`` items with ``contracts.sequential.bounded_mean_cs`` and
``contracts.intervals.decide`` and stops when decided or at its item budget.

The truths: the target met exactly, 10% better, 10% worse. Latencies are lognormal (TTFT CV 0.4, TPOT
CV 0.3), i.i.d. or an AR(1) series in request order (a Gaussian AR(1) with phi = 0.5 under the
lognormal: the marginal stays lognormal with the stated mean and CV, lag-1 correlation about 0.48). The
time of a request is a constant (``PER_REQUEST_S``), so the sampling budget and the request cap stop a
point as in a full-mode run. Seeded: the same arguments give the same table.

``decision_table`` returns the table (``scripts/simulate_decisions.py`` prints it for the release
notes); ``healthy_release`` the share of releases of a healthy build in which any check fails.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from contracts.intervals import FAIL, INCONCLUSIVE, PASS, Interval, decide, wilson
from contracts.sequential import bounded_mean_cs_path
from records.judge import target_decision, target_estimates
from records.sampling import DEFAULT_SAMPLE_BUDGETS, SampleGoal, sampling_stop

TTFT_TARGET_MS = 100.0
TPUT_USER_TARGET = 20.0          # t/s/u: a mean TPOT of 50 ms
ACCURACY_TARGET = 0.8
TTFT_CV, TPOT_CV = 0.4, 0.3
AR_PHI = 0.5
#: The simulated point: 4 concurrent users, 32 requests first (8 x concurrency, a short-sequence point);
#: the cap is 16 x that (512); 0.5 s per request under the full mode's 300 s budget, so the cap binds first.
CONCURRENCY = 4
MIN_REQUESTS = 32
PER_REQUEST_S = 0.5
BUDGET_S = DEFAULT_SAMPLE_BUDGETS["full"]
#: An eval looks every 16 scored items and stops when decided or after EVAL_BUDGET items; the
#: without-replacement case draws those from a fixed set of EVAL_POPULATION items.
EVAL_CHUNK = 16
EVAL_BUDGET = 400
EVAL_POPULATION = 500

TRUTHS = ("10% better", "at target", "10% worse")
DISTRIBUTIONS = ("iid lognormal", "AR(1) lognormal")
CHECKS = ("ttft_ms", "tput_user")
EVAL_DISTRIBUTIONS = ("Bernoulli", f"Bernoulli WoR N={EVAL_POPULATION}")

Series = Iterator[float]


def truth_value(check: str, truth: str) -> float:
    """The true mean of the checked figure: TTFT (lower is better) 90 / 100 / 110 ms, t/s/u (higher is
    better) 22 / 20 / 18, accuracy 0.88 / 0.8 / 0.72."""
    target, higher = {"ttft_ms": (TTFT_TARGET_MS, False), "tput_user": (TPUT_USER_TARGET, True),
                      "accuracy": (ACCURACY_TARGET, True)}[check]
    better = {"10% better": 1, "at target": 0, "10% worse": -1}[truth]
    return target * (1 + 0.1 * better * (1 if higher else -1))


def lognormal_series(rng: random.Random, mean: float, cv: float, phi: float = 0.0) -> Series:
    """Lognormal values with the given mean and CV, in time order: exp(mu + s z_t) with z a stationary
    Gaussian AR(1), z_t = phi z_{t-1} + sqrt(1 - phi^2) e_t (phi 0: i.i.d.)."""
    s = math.sqrt(math.log(1 + cv * cv))
    mu = math.log(mean) - s * s / 2
    innovation = math.sqrt(1 - phi * phi)
    z = rng.gauss(0.0, 1.0)
    while True:
        yield math.exp(mu + s * z)
        z = phi * z + innovation * rng.gauss(0.0, 1.0)


def _latency_series(rng: random.Random, dist: str, mean: float, cv: float) -> Series:
    return lognormal_series(rng, mean, cv, AR_PHI if dist.startswith("AR(1)") else 0.0)


@dataclass
class Outcome:
    """One simulated check: its final decision, whether its final interval holds the truth, the samples
    it used, and whether the stop rule stopped because everything was decided (before the budget)."""

    decision: str
    covered: bool
    n: int
    decided_early: bool


def simulate_point(rng: random.Random, checks: dict[str, tuple[float, str]]) -> dict[str, Outcome]:
    """One benchmark point through the real stop rule, then the report's judge.

    ``checks``: metric key (``ttft_ms``, ``tput_user``) -> (true value, distribution). The point sends
    ``MIN_REQUESTS``, then the rounds ``sampling_stop`` asks for, until it stops; the verdict is
    ``target_decision`` on ``target_estimates`` of all samples, which must equal the stop's decisions."""
    targets = {"ttft_ms": TTFT_TARGET_MS, "tput_user": TPUT_USER_TARGET}
    goal = SampleGoal(checks=[(key, key, targets[key]) for key in checks], min_requests=MIN_REQUESTS,
                      concurrency=CONCURRENCY, users=CONCURRENCY, budget_s=BUDGET_S)
    ttft = (_latency_series(rng, checks["ttft_ms"][1], checks["ttft_ms"][0], TTFT_CV)
            if "ttft_ms" in checks else None)
    tpot = (_latency_series(rng, checks["tput_user"][1], 1000.0 / checks["tput_user"][0], TPOT_CV)
            if "tput_user" in checks else None)
    ttfts: list[float] = []
    tpots: list[float] = []

    def send(count: int) -> None:
        for _ in range(count):
            if ttft is not None:
                ttfts.append(next(ttft))
            if tpot is not None:
                tpots.append(next(tpot))

    send(goal.min_requests)
    while True:
        sent = max(len(ttfts), len(tpots))
        state = sampling_stop(goal, target_estimates(ttfts, tpots, goal.users), target_decision, sent=sent,
                              failed=0, elapsed_s=sent * PER_REQUEST_S)
        if state.stop_reason is not None:
            break
        send(state.next_round)
    final = target_estimates(ttfts, tpots, goal.users)   # the report's judge, from the point's samples
    out = {}
    for key, (truth, _) in checks.items():
        interval = final[key].interval
        decision = target_decision(key, interval, targets[key])
        if decision != state.decisions[key]:
            raise AssertionError(f"the report decided {key} {decision}, the stop rule {state.decisions[key]}")
        out[key] = Outcome(decision, _holds(interval, truth), final[key].n, state.stop_reason == "decided")
    return out


def _holds(interval: Interval | None, truth: float) -> bool:
    return interval is not None and interval.low - 1e-12 <= truth <= interval.high + 1e-12


def eval_items(rng: random.Random, p: float, population: int | None) -> tuple[list[float], float]:
    """``EVAL_BUDGET`` scored items (1 right, 0 wrong) in the order they are scored, and the true mean:
    i.i.d. Bernoulli(p), or drawn without replacement from a fixed set of ``population`` items of which
    round(p * population) are right (the truth is then that set's mean)."""
    if population is None:
        return [1.0 if rng.random() < p else 0.0 for _ in range(EVAL_BUDGET)], p
    right = round(p * population)
    items = [1.0] * right + [0.0] * (population - right)
    rng.shuffle(items)
    return items[:EVAL_BUDGET], right / population


def simulate_eval(rng: random.Random, p: float, population: int | None = None) -> Outcome:
    """One eval score decided sequentially: a look every ``EVAL_CHUNK`` items with ``bounded_mean_cs``
    and ``decide`` against ``ACCURACY_TARGET`` (higher is better), stopping when decided or after
    ``EVAL_BUDGET`` items. The path is computed once: its element t - 1 is ``bounded_mean_cs`` of the
    first t items (tests/records/test_sequential_error_rates.py checks that)."""
    items, truth = eval_items(rng, p, population)
    path = bounded_mean_cs_path(items, population=population)
    n = 0
    decision = INCONCLUSIVE
    while n < len(items) and decision == INCONCLUSIVE:
        n = min(n + EVAL_CHUNK, len(items))
        decision = decide(path[n - 1], ACCURACY_TARGET, higher_is_better=True)
    return Outcome(decision, _holds(path[n - 1], truth), n, decision != INCONCLUSIVE)


@dataclass
class Row:
    """One cell of the table: a check, a distribution and a truth, over ``runs`` simulated checks.
    ``false_pass`` is the share that passed when the truth is at or worse than the target (None when the
    truth is better: a pass is then right); ``false_fail`` the share that failed when it is at or better
    (None when worse). ``decided`` is the share the stop rule stopped as decided, before its budget."""

    check: str
    distribution: str
    truth: str
    runs: int
    passed: int
    failed: int
    covered: int
    mean_n: float
    decided: float

    @property
    def false_pass(self) -> float | None:
        return None if self.truth == "10% better" else self.passed / self.runs

    @property
    def false_fail(self) -> float | None:
        return None if self.truth == "10% worse" else self.failed / self.runs

    @property
    def coverage(self) -> float:
        return self.covered / self.runs


def _row(check: str, dist: str, truth: str, outcomes: list[Outcome]) -> Row:
    runs = len(outcomes)
    return Row(check, dist, truth, runs, sum(o.decision == PASS for o in outcomes),
               sum(o.decision == FAIL for o in outcomes), sum(o.covered for o in outcomes),
               sum(o.n for o in outcomes) / runs, sum(o.decided_early for o in outcomes) / runs)


def _rng(seed: int, *cell: str) -> random.Random:
    return random.Random("/".join([str(seed), *cell]))   # a str seed is hashed with SHA-512: stable


def decision_table(runs: int = 300, seed: int = 2024, at_target_runs: int | None = None,
                   progress: Callable[[Row], None] | None = None) -> list[Row]:
    """Truth x distribution x check -> pass / fail shares, coverage of the final interval, mean samples,
    decided share; ``runs`` simulated checks per cell (``at_target_runs`` for the cells whose truth sits
    on the target: the hardest, whose error rates sit nearest their limit and so need the most runs for
    a tight Monte-Carlo bound). LLM cells: a point with that one check (TTFT or t/s/u); eval cells: an
    accuracy score, with replacement and without (a set of ``EVAL_POPULATION`` items)."""
    def count(truth: str) -> int:
        return at_target_runs if at_target_runs and truth == "at target" else runs

    rows = []
    for check in CHECKS:
        for dist in DISTRIBUTIONS:
            for truth in TRUTHS:
                rng = _rng(seed, check, dist, truth)
                value = truth_value(check, truth)
                outcomes = [simulate_point(rng, {check: (value, dist)})[check] for _ in range(count(truth))]
                rows.append(_row(check, dist, truth, outcomes))
                if progress:
                    progress(rows[-1])
    for dist in EVAL_DISTRIBUTIONS:
        population = EVAL_POPULATION if "WoR" in dist else None
        for truth in TRUTHS:
            rng = _rng(seed, "accuracy", dist, truth)
            p = truth_value("accuracy", truth)
            rows.append(_row("accuracy", dist, truth,
                             [simulate_eval(rng, p, population) for _ in range(count(truth))]))
            if progress:
                progress(rows[-1])
    return rows


def monte_carlo_bounds(count: int, runs: int) -> tuple[float, float]:
    """The 95% Wilson interval of a rate seen ``count`` times in ``runs`` simulated checks: how far the
    true rate can be from the one simulated. A limit is shown to hold when the whole interval is within
    it (e.g. 5 false passes in 300 runs: 1.7%, at most 3.8%)."""
    interval = wilson(count, runs)
    return interval.low, interval.high


@dataclass
class ReleaseRates:
    """Releases of a healthy build (every truth 10% better than its target): the share in which any of
    its checks failed, in which all passed, and in which some check stayed undecided (no fail)."""

    runs: int
    checks: int
    any_fail: int
    all_pass: int

    @property
    def any_fail_share(self) -> float:
        return self.any_fail / self.runs

    @property
    def all_pass_share(self) -> float:
        return self.all_pass / self.runs


#: The healthy release's six checks: a point with TTFT and t/s/u checks (i.i.d.), a point with a TTFT check
#: (AR(1)), two accuracy scores (i.i.d. items) and one drawn without replacement from a fixed set.
RELEASE_CHECKS = ("ttft_ms iid", "tput_user iid", "ttft_ms AR(1)", "accuracy", "accuracy", "accuracy WoR")


def healthy_release(runs: int = 300, seed: int = 2024) -> ReleaseRates:
    """``runs`` releases of a healthy build, each with the six checks of ``RELEASE_CHECKS``."""
    rng = _rng(seed, "release")
    better = "10% better"
    any_fail = all_pass = 0
    for _ in range(runs):
        a = simulate_point(rng, {"ttft_ms": (truth_value("ttft_ms", better), "iid lognormal"),
                                 "tput_user": (truth_value("tput_user", better), "iid lognormal")})
        b = simulate_point(rng, {"ttft_ms": (truth_value("ttft_ms", better), "AR(1) lognormal")})
        p = truth_value("accuracy", better)
        evals = [simulate_eval(rng, p), simulate_eval(rng, p), simulate_eval(rng, p, EVAL_POPULATION)]
        decisions = [o.decision for o in (*a.values(), *b.values(), *evals)]
        any_fail += FAIL in decisions
        all_pass += all(d == PASS for d in decisions)
    return ReleaseRates(runs, len(RELEASE_CHECKS), any_fail, all_pass)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _bounded(count: int, runs: int, at_most: bool) -> str:
    low, high = monte_carlo_bounds(count, runs)
    return f"{_pct(count / runs)} ({'<=' if at_most else '>='} {_pct(high if at_most else low)})"


def format_table(rows: list[Row]) -> str:
    """The table as Markdown (the release notes' form); each rate with its 95% Monte-Carlo bound in
    brackets (``monte_carlo_bounds``: the high end for the false rates, the low end for coverage)."""
    lines = ["| check | distribution | truth | runs | false pass | false fail | coverage | mean n | decided |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        false_pass = "-" if r.false_pass is None else _bounded(r.passed, r.runs, True)
        false_fail = "-" if r.false_fail is None else _bounded(r.failed, r.runs, True)
        lines.append(f"| {r.check} | {r.distribution} | {r.truth} | {r.runs} | {false_pass} | {false_fail} | "
                     f"{_bounded(r.covered, r.runs, False)} | {r.mean_n:.0f} | {_pct(r.decided)} |")
    return "\n".join(lines)


def format_release(rates: ReleaseRates) -> str:
    return (f"healthy release ({rates.checks} checks: {', '.join(RELEASE_CHECKS)}; every truth 10% better): "
            f"any check failed in {_pct(rates.any_fail_share)} "
            f"(<= {_pct(monte_carlo_bounds(rates.any_fail, rates.runs)[1])}) "
            f"of {rates.runs} releases; all passed in {_pct(rates.all_pass_share)} (the rest: some check undecided "
            f"within its budget)")


__all__ = ["ACCURACY_TARGET", "CHECKS", "DISTRIBUTIONS", "EVAL_DISTRIBUTIONS", "TPUT_USER_TARGET", "TRUTHS",
           "TTFT_TARGET_MS", "Outcome", "ReleaseRates", "Row", "decision_table", "eval_items", "format_release",
           "format_table", "healthy_release", "lognormal_series", "monte_carlo_bounds", "simulate_eval",
           "simulate_point", "truth_value"]
