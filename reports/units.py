"""Numbers as a reader reads them: each formatted by its unit, in every renderer alike.

Why: one format for all numbers printed a TTFT target as ``5,000.0000`` and an error rate of 0 as
``0.0000``: digits that say nothing, and a share that reads as a count. A latency in ms needs at most one
decimal (none from 100 ms up), a throughput one or two, a share of requests is a percentage, and only
scores (accuracy in 0..1) need three or four. The unit comes from the metric's name (``ttft_ms``,
``tput_user``, ``error_rate`` ...), which is how checks, targets and comparison metrics are named.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Unit:
    """How to print one kind of number: ``kind`` picks the digits, ``suffix`` follows a lone value."""

    kind: str  # ms, rate, share, pct, score, ratio, count, money, other
    suffix: str = ""


MS, SHARE, PCT, SCORE, RATIO, COUNT, OTHER = (Unit("ms", " ms"), Unit("share"), Unit("pct"), Unit("score"),
                                              Unit("ratio"), Unit("count"), Unit("other"))
#: Metrics that are shares of requests or items (0..1), printed as percentages.
SHARE_METRICS = ("error_rate", "batch_divergence", "goodput", "disagreement")


def unit_of(metric: str) -> Unit:
    """The unit of a metric by its name: '*_ms' ms, 't/s' rates, shares, '*_pct' percentages ..."""
    if metric.endswith("_ms"):
        return MS
    if metric == "tput_user":
        return Unit("rate", " t/s/u")
    if metric in ("tput", "output_tok_s", "decode_throughput", "output_throughput"):
        return Unit("rate", " t/s")
    if metric.endswith("_per_s"):
        return Unit("rate", f" {metric.removesuffix('_per_s').replace('_', ' ')}/s")
    if metric in SHARE_METRICS or metric.endswith("_rate"):
        return SHARE
    if metric.endswith("_pct"):
        return PCT
    if metric in ("accuracy", "score"):
        return SCORE
    if metric in ("rtf", "ratio"):
        return RATIO
    if metric == "s_per_step":
        return Unit("ratio", " s")
    if metric.startswith("cost_per_1m"):
        return Unit("money")
    return OTHER


def check_unit(name: str, ci_method: str | None = None) -> Unit:
    """The unit of a verdict check from its name ('<metric> <item> [<tier>]', 'capacity goodput ...',
    'served vs in-process <task>', 'regression <point> <metric>', 'accuracy <task>')."""
    words = name.split()
    head = words[0] if words else ""
    if head == "capacity":
        return SHARE
    if head == "served":  # paired: the share of items that disagree; else the served score
        return SHARE if (ci_method or "").startswith("paired") else SCORE
    if head == "regression":
        return RATIO
    if head == "tests" or head == "completed_any":
        return COUNT
    return unit_of(head)


def _digits(value: float, kind: str) -> int:
    if kind == "ms":
        return 0 if abs(value) >= 100 else 1
    if kind in ("rate", "money"):
        return 1 if abs(value) >= 100 else 2
    if kind in ("share", "pct"):
        return 1
    if kind == "score":
        return 4
    if kind == "ratio":
        return 3
    return 0


def number(value: float | None, unit: Unit, digits: int | None = None, suffix: bool = False) -> str:
    """One value in its unit ('507', '14.14', '32.4%'); ``suffix`` adds the unit's name ('507 ms')."""
    if value is None:
        return "n/a"
    tail = unit.suffix if suffix else ""
    if unit.kind == "count" or (unit.kind == "other" and float(value).is_integer()):
        return f"{value:,.0f}{tail}"
    if unit.kind == "other":
        return f"{value:,.4g}{tail}"
    shown = value * 100 if unit.kind == "share" else value
    d = _digits(shown, unit.kind) if digits is None else digits
    percent = "%" if unit.kind in ("share", "pct") else ""
    return f"{shown:,.{d}f}{percent}{tail}"


def with_interval(value: float | None, ci95: list[float] | None, unit: Unit) -> str:
    """'507 ms [490, 526]': the value with its unit, then its 95% interval at the value's digits."""
    if value is None:
        return "n/a"
    shown = value * 100 if unit.kind == "share" else value
    digits = None if unit.kind in ("count", "other") else _digits(shown, unit.kind)
    text = number(value, unit, digits, suffix=True)
    if not ci95:
        return text
    if unit.kind == "score":  # an interval of a score: one digit fewer than the score itself
        digits = 3
    return f"{text} [{number(ci95[0], unit, digits)}, {number(ci95[1], unit, digits)}]"
