"""What a token costs: the machine's price per hour over the output throughput measured at each point.

Why in the report and not in the clients: the price is a fact about the machine, not a measurement, and
each point's output throughput is already in its record (``BenchPoint.metrics.output_throughput``; the
capacity search's levels: completed requests, their output length and seconds). Pricing here needs no
client change, and a finished run is priced again by rebuilding its report with another price
(``run.py --workflow reports --output-dir RUN_DIR --workflow-args hourly_cost=3.10``).

    cost per 1M output tokens = hourly_cost / (output tokens/s * 3600) * 1e6

Keys: ``hourly_cost`` and ``currency`` (``contracts.workflow_keys.COST_ARGS``).
"""
from __future__ import annotations

import math

from records.report import Pricing, ReportRecord
from records.stress import CapacityLevel, CapacityRecord

DEFAULT_CURRENCY = "USD"
SECONDS_PER_HOUR = 3600.0
PER_TOKENS = 1e6


def parse_price(args: dict[str, str]) -> tuple[float | None, str, str | None]:
    """(hourly_cost, currency, note): the price the run gave, or None with a note saying why it is unusable."""
    currency = str(args.get("currency") or DEFAULT_CURRENCY).strip()
    raw = args.get("hourly_cost")
    if raw in (None, ""):
        return None, currency, None
    try:
        hourly = float(raw)
    except (TypeError, ValueError):
        hourly = math.nan
    if not math.isfinite(hourly) or hourly <= 0:
        return None, currency, f"ignored hourly_cost={raw!r}: a price per hour is a positive number (e.g. 2.50)"
    if not currency or len(currency) > 16 or not currency.isprintable():
        return None, currency, f"ignored currency={currency!r}: name it in at most 16 printable characters (USD)"
    return hourly, currency, None


def cost_per_1m(hourly_cost: float, output_tok_s: float | None) -> float | None:
    """The cost of a million output tokens at ``output_tok_s``; None without a positive throughput."""
    if output_tok_s is None or not math.isfinite(output_tok_s) or output_tok_s <= 0:
        return None
    return round(hourly_cost / (output_tok_s * SECONDS_PER_HOUR) * PER_TOKENS, 6)


def level_output_tok_s(record: CapacityRecord, level: CapacityLevel) -> float | None:
    """Output tokens/s at one capacity level: its completed requests times the output length they each ask
    for (``ignore_eos``: exactly osl tokens) over the level's seconds; None for media requests (no tokens)."""
    if record.items_per_request is not None or record.osl <= 0 or level.duration_s <= 0:
        return None
    return (level.sent - level.failed) * record.osl / level.duration_s


def _capacity(record: ReportRecord, capacity: CapacityRecord, pricing: Pricing) -> None:
    """A cost column on the capacity table (one cell per level) and the capacity level's cost in ``pricing``."""
    costs = [cost_per_1m(pricing.hourly_cost, level_output_tok_s(capacity, lv)) for lv in capacity.levels]
    for table in (t for t in record.stress_tests.tables if t.kind == "capacity"):
        header = f"Cost / 1M out tok ({pricing.currency})"
        table.headers.append(header)
        for row, cost in zip(table.rows, costs):
            row.append("n/a" if cost is None else f"{cost:,.2f}")
        table.legend[header] = (f"{pricing.hourly_cost:g} {pricing.currency}/h over the level's output tokens/s "
                                f"(completed requests x osl / seconds) x 3600, per million tokens")
    at = next((lv for lv in capacity.levels if capacity.capacity is not None and lv.level == capacity.capacity
               and lv.holds), None)
    if at is not None:
        pricing.capacity_metric, pricing.capacity_level = capacity.metric, at.level
        tok_s = level_output_tok_s(capacity, at)
        pricing.capacity_output_tok_s = None if tok_s is None else round(tok_s, 3)
        pricing.capacity_cost_per_1m_output_tokens = cost_per_1m(pricing.hourly_cost, tok_s)


def price(record: ReportRecord, args: dict[str, str], capacity: CapacityRecord | None) -> str | None:
    """Price the report's benchmark points and capacity at the run's hourly_cost (``args``: its workflow
    args); returns a note when the price given cannot be used, else None. Without a price nothing changes."""
    hourly, currency, note = parse_price(args)
    if hourly is None:
        return note
    pricing = Pricing(hourly_cost=hourly, currency=currency)
    for row in record.benchmarks:
        row.cost_per_1m_output_tokens = cost_per_1m(hourly, row.output_throughput)
    if capacity is not None:
        _capacity(record, capacity, pricing)
    record.pricing = pricing
    return None
