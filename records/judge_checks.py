"""What every section of the judge (``records.judge``) shares: the error-rate rule, the floor of samples
a target is decided on, and the shape of one section's judgement.

The rules themselves are listed in ``records.judge``'s docstring; this module is the bottom of the
judge's modules (``records.judge_benchmarks``, ``records.judge_media`` and ``records.judge_evals``
import it, it imports none of them).
"""
from __future__ import annotations

from typing import Any, NamedTuple

from contracts.intervals import FAIL, INCONCLUSIVE, decide_share
from contracts.model_spec import ModelSpec
from records.report import Blocker, Check, MediaTierCheck, TierCheck

#: A tier's target checks: (target key or metric, its check, missed: the target itself was missed).
Decided = list[tuple[str, Check, bool]]
#: (tier record, its target checks, the point ran): what ``settle_decisions`` writes back into the tier.
Settled = tuple[TierCheck | MediaTierCheck, Decided, bool]


class SectionJudgement(NamedTuple):
    """What judging one section gives the verdict: its checks, its blockers (before waivers), its notes."""

    checks: list[Check]
    blockers: list[Blocker]
    notes: list[str]


#: Share of a point's requests allowed to fail when the spec says nothing.
DEFAULT_MAX_ERROR_RATE = 0.0
#: A target is not decided on fewer per-request samples than this: the standard deviation of a handful of
#: requests is too often far below the truth (the comparison with a baseline run uses the same floor).
MIN_DECIDING_SAMPLES = 8


def max_error_rate(spec: ModelSpec) -> tuple[float, str | None]:
    """The spec's allowance ``device_model_spec.max_error_rate`` (0..1, default 0) and a note
    when the value given is unusable."""
    value = spec.device_model_spec.max_error_rate
    if value is None:
        return DEFAULT_MAX_ERROR_RATE, None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        return DEFAULT_MAX_ERROR_RATE, (f"ignored max_error_rate {value!r} (expected a share between 0 "
                                        f"and 1): no failed request is allowed")
    return float(value), None


def errors_within(error_rate: float | None, allowed: float, requests: int | None = None) -> bool:
    """A point's error rate is acceptable when it is known and not clearly above the allowance: with
    the point's request count, not failed on its 95% Wilson interval (``contracts.intervals.decide_share``:
    an allowance of 0 takes no failed request); without it, not above the allowance."""
    if error_rate is None:
        return False
    if not requests or allowed <= 0:
        return error_rate <= allowed
    return decide_share(round(error_rate * requests), requests, allowed)[0] != FAIL


ERROR_RATE_UNDECIDED = ("the 95% interval of the failed share holds max_error_rate: more requests can decide it "
                        "(mode=full)")


def error_rate_check(item: str, failed: int, total: int, allowed: float, fail_detail: str,
                     category: str = "benchmarks", label: str | None = None) -> Check:
    """The error-rate rule of one point as a check: the failed share (failed and never-sent requests over
    all its requests) against the spec's max_error_rate, decided on its 95% Wilson interval
    (``contracts.intervals.decide_share``: an allowance of 0 fails on one failed request and passes on
    none). A point with no request at all fails: nothing shows it works. Required for every status.
    ``label`` names the point in the check's name when its key is not unique in the run."""
    name = f"error_rate {label or item}"
    if total <= 0:
        return Check(name=name, category=category, item=item, required=True, n=0, target=allowed,
                     decision=FAIL, detail=fail_detail)
    decision, interval = decide_share(failed, total, allowed)
    return Check(name=name, category=category, item=item, required=True, value=round(failed / total, 6),
                 ci95=interval.as_list(), ci_method=interval.method, n=total, target=allowed, decision=decision,
                 detail={FAIL: fail_detail, INCONCLUSIVE: ERROR_RATE_UNDECIDED}.get(decision))


def target_value(value: Any) -> float | None:
    """A tier's target as a number, or None when it is not set (null, not a number, or not positive)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return float(value)


def fmt_ci(ci: list[float] | None) -> str:
    """A 95% interval as blockers and check details print it."""
    return "no interval" if not ci else f"[{ci[0]:.4g}, {ci[1]:.4g}]"

