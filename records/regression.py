"""The one rule that decides a ratio of this build to a baseline against a tolerance, wherever it is made:
the comparison with a baseline run (``reports.comparison``) and the paired A/B of two live servers
(``records.ab``) say the same word for the same interval. Stdlib only.

On the ratio made "worse" (candidate / baseline for a lower-is-better metric, its inverse for a higher-is-better
one), with its 95% interval ``[low, high]``:

* ``regressed``: the whole interval lies above ``1 + tolerance``;
* ``improved``: the whole interval lies below ``1 - tolerance``;
* ``within_noise``: the interval shows no regression beyond the tolerance (``high <= 1 + tolerance``);
* ``inconclusive``: it holds both a change beyond the tolerance and none, or there is no interval.

Why one-sided ``within_noise``: the gate's question is "did it get worse by more than the tolerance?"; an
interval wholly inside ``1 + tolerance`` answers no, whatever its better end. The distance from the ratio to
``1 + tolerance`` is then what more samples must resolve (``edge_distance``).
"""
from __future__ import annotations

import math

REGRESSED, IMPROVED, WITHIN_NOISE, INCONCLUSIVE = "regressed", "improved", "within_noise", "inconclusive"
DECISIONS = (REGRESSED, IMPROVED, WITHIN_NOISE, INCONCLUSIVE)


def decide_ratio(ci: list[float] | tuple[float, float] | None, tolerance: float, higher_is_better: bool) -> str:
    """The decision of an interval of candidate / baseline (module docstring)."""
    if ci is None or ci[0] <= 0:
        return INCONCLUSIVE
    low, high = (1 / ci[1], 1 / ci[0]) if higher_is_better else (ci[0], ci[1])
    if low > 1 + tolerance:
        return REGRESSED
    if high < 1 - tolerance:
        return IMPROVED
    if high <= 1 + tolerance:
        return WITHIN_NOISE
    return INCONCLUSIVE


def edge_distance(ratio: float, tolerance: float, higher_is_better: bool) -> float:
    """|log(worse ratio) - log(1 + tolerance)|: the log half-width an interval must come inside to decide."""
    worse = 1 / ratio if higher_is_better else ratio
    return abs(math.log(worse) - math.log(1 + tolerance))
