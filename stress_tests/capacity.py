"""SLO capacity search: the highest load at which latency SLOs hold with enough goodput (stdlib only).

A level (a concurrency, or a request rate) holds when every SLO percentile is within its limit
AND the goodput -- the fraction of sent requests that succeeded and met every limit on their own
-- is at least the goal (default 95%). Failed requests count as bad, never as absent.

Search: bracket by doubling from the start level until a level fails (or the ceiling holds), then
bisect between the last level that held and the first that failed until they are one resolution
step apart. Noise rule: a level whose goodput is within one standard error of the goal (with some requests
good and some not), or whose SLO percentile sits within ``noise_band`` of its limit, is measured once more and the samples pooled;
if it is still undecided the search stops there and answers the last level that held clearly,
because further bisection would only be reading noise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from contracts.intervals import percentile
from stress_tests.args import Slo


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


def wilson_interval(good: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion (sound at 0 and 1, unlike the normal one)."""
    if total <= 0:
        return 0.0, 1.0
    p = good / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


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


def judge_level(level: float, s: LevelSamples, slos: list[Slo], goal: float, noise_band: float = 0.05) -> LevelJudgement:
    sent = max(s.sent, 1)
    goodput = s.good / sent
    ci = wilson_interval(s.good, sent)
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
    holds = not misses and goodput >= goal and not s.stopped_reason
    # Goodput is undecided when some requests missed and the goal is within one standard error of
    # the measured fraction (all good or all bad is evidence enough, however few requests).
    goodput_noisy = 0 < s.good < sent and abs(goodput - goal) < math.sqrt(goal * (1 - goal) / sent)
    marginal = not s.stopped_reason and (goodput_noisy or bool(near))
    if s.stopped_reason:
        reason = f"stopped early: {s.stopped_reason}"
    elif misses:
        reason = "; ".join(misses)
    elif goodput < goal:
        reason = f"goodput {goodput:.1%} < {goal:.0%}"
    else:
        reason = f"holds: goodput {goodput:.1%}"
    if marginal:
        reason += " (within noise: " + (", ".join(near) + " near its limit" if near else
                                        f"goodput {goodput:.1%} within one standard error of {goal:.0%}") + ")"
    return LevelJudgement(level, holds, marginal, goodput, ci, values, s.sent, s.failed, reason, s.duration_s,
                          items=s.items)


@dataclass
class SearchResult:
    capacity: float                 # highest level that held (0 when even the start failed)
    bracket: tuple[float, float | None]   # (held, failed); failed None when the ceiling held
    levels: list[LevelJudgement]    # in the order measured (the curve)
    stop_reason: str
    converged: bool


def _next_up(level: float, integer: bool) -> float:
    return level * 2 if not integer else max(level + 1, level * 2)


def search_capacity(measure: Callable[[float], LevelSamples], slos: list[Slo], *, goal: float = 0.95,
                    start: float = 1, ceiling: float = 64, integer: bool = True, resolution: float = 1,
                    max_levels: int = 16, repeat_marginal: bool = True,
                    out_of_time: Callable[[], bool] = lambda: False,
                    on_level: Callable[[LevelJudgement], None] = lambda j: None) -> SearchResult:
    """Bracket then bisect; ``resolution`` is absolute for integer levels, relative for rates."""
    levels: list[LevelJudgement] = []

    def judge(level: float) -> LevelJudgement:
        samples = measure(level)
        j = judge_level(level, samples, slos, goal)
        if j.marginal and repeat_marginal and not out_of_time():
            samples = samples.merged(measure(level))
            j = judge_level(level, samples, slos, goal)
            j.repeats = 2
        levels.append(j)
        on_level(j)
        return j

    def result(capacity: float, failed: float | None, why: str, converged: bool) -> SearchResult:
        return SearchResult(capacity, (capacity, failed), levels, why, converged)

    held: float = 0
    failed: float | None = None
    level = start
    while True:  # bracketing
        if out_of_time() or len(levels) >= max_levels:
            return result(held, failed, "time or level budget ran out while bracketing", False)
        j = judge(level)
        if j.marginal and not j.holds:
            return result(held, level, f"level {level:g} is within measurement noise of the SLOs", False)
        if not j.holds:
            failed = level
            break
        held = level
        if level >= ceiling:
            return result(held, None, f"SLOs hold at the search ceiling {ceiling:g}", True)
        level = min(_next_up(level, integer), ceiling)
    if held == 0:
        return result(0, failed, f"SLOs do not hold even at the start level {start:g}", True)

    def close_enough(lo: float, hi: float) -> bool:
        return (hi - lo <= resolution) if integer else (hi - lo <= resolution * hi)

    while not close_enough(held, failed):  # bisection
        if out_of_time() or len(levels) >= max_levels:
            return result(held, failed, "time or level budget ran out while bisecting", False)
        mid = (held + failed) // 2 if integer else float(f"{(held + failed) / 2:.4g}")  # a rate a reader can read
        j = judge(mid)
        if j.marginal and not j.holds:
            return result(held, mid, f"level {mid:g} is within measurement noise of the SLOs; "
                                     f"bisection stops there", False)
        if j.holds:
            held = mid
        else:
            failed = mid
    return result(held, failed, f"bracket {held:g}..{failed:g} is one resolution step wide", True)
