"""SLO capacity search: the highest load at which latency SLOs hold with enough goodput (stdlib only).

A level (a concurrency, or a request rate) holds when every SLO percentile is within its limit
AND the goodput -- the fraction of sent requests that succeeded and met every limit on their own
-- is at least the goal (default 95%). Failed requests count as bad, never as absent.

Decision on the interval: a level's goodput is decided on its 95% Wilson interval
(``contracts.intervals.wilson`` and ``decide``): it holds only when the whole interval is at or above
the goal and every SLO percentile is within its limit; it fails when a percentile misses its limit,
the whole interval is below the goal, or it stopped early; otherwise it is undecided. All requests
good is not proof by itself: 4 good requests give 51%..100%, and 95% is cleared from 73 on.

Search: with a capacity target inside [start, ceiling], the target level is measured first:
that answers "target met?" with the fewest levels (a load that holds at the target holds below it).
Then bracket by doubling (from the target when it held, else from the start level below it) until a
level fails (or the ceiling holds) -- when the start itself fails, halve down from it until a level holds
(``_Search.descend``) -- and bisect between the last level that held and the first that
failed until they are one resolution step apart. Sequential rule: an undecided level (its goodput
interval holds the goal, or an SLO percentile sits within ``noise_band`` of its limit) is measured
again, the samples pooled, until it is decided or ``level_requests`` requests or the time budget are
spent; if it is still undecided the search stops there, names it (``undecided``) and answers the last
level that held clearly, because further bisection would only be reading noise.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from contracts.intervals import FAIL, PASS, decide, percentile, wilson
from stress_tests.args import Slo

DESCENT_HALVINGS = 4   # a failed start rate is halved at most this often (down to 1/16 of it) before capacity 0


@dataclass
class LevelSamples:
    """Per-request measurements at one level: ms values of the requests that succeeded."""

    ttft_ms: list[float] = field(default_factory=list)
    tpot_ms: list[float] = field(default_factory=list)
    itl_ms: list[float] = field(default_factory=list)
    e2el_ms: list[float] = field(default_factory=list)
    good: int = 0            # requests that succeeded and met every SLO limit on their own
    failed: int = 0
    sent: int = 0
    stopped_reason: str | None = None
    duration_s: float = 0.0
    items: int = 0           # media: items (clips, photos, texts, images) the successful requests carried

    def merged(self, other: "LevelSamples") -> "LevelSamples":
        return LevelSamples(self.ttft_ms + other.ttft_ms, self.tpot_ms + other.tpot_ms, self.itl_ms + other.itl_ms,
                            self.e2el_ms + other.e2el_ms, self.good + other.good, self.failed + other.failed,
                            self.sent + other.sent, self.stopped_reason or other.stopped_reason,
                            self.duration_s + other.duration_s, self.items + other.items)


def level_samples(run, add_success: Callable[["LevelSamples", object], None],
                  stopped_early: str = "stopped_early") -> "LevelSamples":
    """A level's samples from one load run (``stress_tests.driver.LoadRun``): every request sent or
    never sent counts, a failure counts unless the stop cut it (``stopped_early``, not the server's
    doing), and each success is added by ``add_success`` (the LLM and media searches read different
    latencies from it)."""
    s = LevelSamples(sent=len(run.records) + run.not_sent, duration_s=run.duration_s,
                     stopped_reason=run.stopped_reason)
    for r in run.records:
        if not r.success:
            s.failed += r.error_class != stopped_early
            continue
        add_success(s, r)
    return s


def wilson_interval(good: int, total: int) -> tuple[float, float]:
    """95% Wilson score interval of a proportion as (low, high) (``contracts.intervals.wilson``)."""
    interval = wilson(good, total)
    return interval.low, interval.high


def request_is_good(values_ms: dict[str, float | None], slos: list[Slo]) -> bool:
    """One successful request meets every limit (a metric it does not have, e.g. TPOT of 1 token, passes)."""
    return all(values_ms.get(s.metric) is None or values_ms[s.metric] <= s.limit_ms for s in slos)


@dataclass
class LevelJudgement:
    level: float
    holds: bool
    marginal: bool
    goodput: float
    goodput_ci: tuple[float, float]
    slo_values_ms: dict[str, float | None]
    sent: int
    failed: int
    reason: str
    duration_s: float = 0.0
    repeats: int = 1
    items: int = 0
    goodput_decision: str = "inconclusive"  # the Wilson interval against the goal: pass | fail | inconclusive


def judge_level(level: float, s: LevelSamples, slos: list[Slo], goal: float,
                noise_band: float = 0.05) -> LevelJudgement:
    sent = max(s.sent, 1)
    goodput = s.good / sent
    interval = wilson(s.good, sent)
    ci = (interval.low, interval.high)
    goodput_decision = decide(interval, goal, higher_is_better=True)
    values: dict[str, float | None] = {}
    misses, near = [], []
    for slo in slos:
        data = getattr(s, f"{slo.metric}_ms")
        v = percentile(data, slo.percentile) if data else None
        values[slo.key] = v
        if v is None or v > slo.limit_ms:
            misses.append(f"{slo.key} {'n/a' if v is None else f'{v:.0f}'} > {slo.limit_ms:g} ms")
        if v is not None and abs(v - slo.limit_ms) <= noise_band * slo.limit_ms:
            near.append(slo.key)
    holds = not misses and goodput_decision == PASS and not s.stopped_reason
    failed = bool(misses) or goodput_decision == FAIL or bool(s.stopped_reason)
    # Undecided: the goodput interval holds the goal, or a percentile sits within the noise band of its limit.
    marginal = not s.stopped_reason and (not (holds or failed) or bool(near))
    interval_text = f"goodput {goodput:.1%} (95% CI {ci[0]:.1%}..{ci[1]:.1%}, n={s.sent})"
    if s.stopped_reason:
        reason = f"stopped early: {s.stopped_reason}"
    elif misses:
        reason = "; ".join(misses)
    elif goodput_decision == FAIL:
        reason = f"{interval_text} < {goal:.0%}"
    elif holds:
        reason = f"holds: {interval_text}"
    else:
        reason = f"undecided: {interval_text} holds the goal {goal:.0%}"
    if near:
        reason += " (within noise: " + ", ".join(near) + " near its limit)"
    return LevelJudgement(level, holds, marginal, goodput, ci, values, s.sent, s.failed, reason, s.duration_s,
                          items=s.items, goodput_decision=goodput_decision)


@dataclass
class SearchResult:
    capacity: float                 # highest level that held (0 when even the start failed)
    bracket: tuple[float, float | None]   # (held, failed); failed None when the ceiling held
    levels: list[LevelJudgement]    # in the order measured (the curve)
    stop_reason: str
    converged: bool
    undecided: float | None = None  # the level the search stopped at because its interval could not decide it


def _next_up(level: float, integer: bool) -> float:
    return level * 2 if not integer else max(level + 1, level * 2)


def search_capacity(measure: Callable[[float], LevelSamples], slos: list[Slo], *, goal: float = 0.95,
                    start: float = 1, ceiling: float = 64, integer: bool = True, resolution: float = 1,
                    max_levels: int = 16, repeat_marginal: bool = True,
                    out_of_time: Callable[[], bool] = lambda: False,
                    on_level: Callable[[LevelJudgement], None] = lambda j: None,
                    target: float | None = None, level_requests: int = 100,
                    above_target: bool = True) -> SearchResult:
    """Bracket then bisect; ``resolution`` is absolute for integer levels, relative for rates. With a
    ``target`` in [start, ceiling] the target level is decided first (see the module docstring).
    ``above_target`` False ends the search once the target level holds: the release's question
    (is the target met?) is answered, and the levels above it only refine how far it is exceeded,
    which costs most of a search's time when every level is decided on its interval."""
    search = _Search(measure, slos, goal=goal, start=start, ceiling=ceiling, integer=integer, resolution=resolution,
                     max_levels=max_levels, repeat_marginal=repeat_marginal, out_of_time=out_of_time,
                     on_level=on_level, level_requests=level_requests)
    done = search.decide_target(target, above_target)
    if done is None:
        done = search.bracket()
    return done if done is not None else search.bisect()


@dataclass
class _Search:
    """One capacity search: its settings (``search_capacity``'s arguments), the levels judged so far (the
    curve), and the bracket: ``held`` the highest level that held, ``failed`` the lowest that failed, ``level``
    the next to judge. Each phase returns the search's result when it ends the search, else None."""

    measure: Callable[[float], LevelSamples]
    slos: list[Slo]
    goal: float
    start: float
    ceiling: float
    integer: bool
    resolution: float
    max_levels: int
    repeat_marginal: bool
    out_of_time: Callable[[], bool]
    on_level: Callable[[LevelJudgement], None]
    level_requests: int
    levels: list[LevelJudgement] = field(default_factory=list)
    held: float = 0
    failed: float | None = None
    level: float = 0

    def __post_init__(self) -> None:
        self.level = self.start

    def judge(self, level: float) -> LevelJudgement:
        """Measure ``level``; a marginal one is measured again (merged) while there is time and too few requests."""
        samples = self.measure(level)
        j = judge_level(level, samples, self.slos, self.goal)
        repeats = 1
        while (j.marginal and self.repeat_marginal and not self.out_of_time()
               and (repeats < 2 or samples.sent < self.level_requests)):
            samples = samples.merged(self.measure(level))
            repeats += 1
            j = judge_level(level, samples, self.slos, self.goal)
        j.repeats = repeats
        self.levels.append(j)
        self.on_level(j)
        return j

    def result(self, capacity: float, failed: float | None, why: str, converged: bool,
               undecided: float | None = None) -> SearchResult:
        return SearchResult(capacity, (capacity, failed), self.levels, why, converged, undecided)

    def out_of_budget(self) -> bool:
        return self.out_of_time() or len(self.levels) >= self.max_levels

    def decide_target(self, target: float | None, above_target: bool) -> SearchResult | None:
        """With a target in [start, ceiling], judge it first: it holds (search above it) or fails (below it)."""
        if target is None or not self.start <= target <= self.ceiling:
            return None
        j = self.judge(target)
        if j.marginal and not j.holds:
            return self.result(self.held, None, _undecided_text(j) + "; the target level decides the search", False,
                               target)
        if not j.holds:
            self.failed = target
            return None
        self.held = target
        if target >= self.ceiling:
            return self.result(self.held, None, f"SLOs hold at the search ceiling {self.ceiling:g}", True)
        if not above_target:
            return self.result(self.held, None, f"the target level {target:g} holds; the levels above it are "
                                                f"searched with mode=full (the capacity is at least {target:g})",
                               True)
        self.level = min(_next_up(target, self.integer), self.ceiling)
        return None

    def bracket(self) -> SearchResult | None:
        """Double the level until one fails (or the ceiling holds)."""
        while self.failed is None or self.level < self.failed:
            if self.out_of_budget():
                return self.result(self.held, self.failed, "time or level budget ran out while bracketing", False)
            level = self.level
            j = self.judge(level)
            if j.marginal and not j.holds:
                return self.result(self.held, level, _undecided_text(j) + " (within measurement noise of the SLOs)",
                                   False, level)
            if not j.holds:
                self.failed = level
                break
            self.held = level
            if level >= self.ceiling:
                return self.result(self.held, None, f"SLOs hold at the search ceiling {self.ceiling:g}", True)
            self.level = min(_next_up(level, self.integer), self.ceiling)
        if self.held == 0:
            return self.descend()
        return None

    def descend(self) -> SearchResult | None:
        """The lowest level tried failed: halve it until one holds, then bisect above it. The start is a guess
        (for rates: half the unloaded rate, which a busy host overshoots), so a failed start is not a capacity
        of 0; integer levels stop at 1 and rates after ``DESCENT_HALVINGS`` halvings below the start."""
        assert self.failed is not None
        floor = 1 if self.integer else self.start / 2 ** DESCENT_HALVINGS
        while True:
            lower = self.failed // 2 if self.integer else float(f"{self.failed / 2:.4g}")
            if lower < floor * (1 - 1e-9) or lower <= 0:
                return self.result(0, self.failed, f"SLOs do not hold even at level {self.failed:g}, the lowest "
                                                   f"searched (start {self.start:g})", True)
            if self.out_of_budget():
                return self.result(0, self.failed, "time or level budget ran out while descending below the "
                                                   f"start level {self.start:g}", False)
            j = self.judge(lower)
            if j.marginal and not j.holds:
                return self.result(0, lower, _undecided_text(j) + " (within measurement noise of the SLOs)",
                                   False, lower)
            if j.holds:
                self.held = lower
                return None
            self.failed = lower

    def bisect(self) -> SearchResult:
        """Halve the bracket until it is one resolution step wide."""
        held, failed = self.held, self.failed
        assert failed is not None  # the bracket ended on a failed level
        while not self.close_enough(held, failed):
            if self.out_of_budget():
                return self.result(held, failed, "time or level budget ran out while bisecting", False)
            # a rate a reader can read
            mid = (held + failed) // 2 if self.integer else float(f"{(held + failed) / 2:.4g}")
            j = self.judge(mid)
            if j.marginal and not j.holds:
                return self.result(held, mid, _undecided_text(j) + " (within measurement noise of the SLOs); "
                                              "bisection stops there", False, mid)
            if j.holds:
                held = mid
            else:
                failed = mid
        return self.result(held, failed, f"bracket {held:g}..{failed:g} is one resolution step wide", True)

    def close_enough(self, lo: float, hi: float) -> bool:
        return (hi - lo <= self.resolution) if self.integer else (hi - lo <= self.resolution * hi)


def _undecided_text(j: LevelJudgement) -> str:
    return f"level {j.level:g} is undecided after {j.sent} requests: {j.reason}"
