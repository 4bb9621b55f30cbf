"""``--workflow-args`` keys the benchmarks workflow does not own: extra fields of each request body (stdlib only).

Why: a documented run tunes sampling with free-form keys (``temperature=0.7 top_k=40``); the benchmark
sends them in every request body. Fields that decide what a point measures stay the benchmark's own
(``contracts.workflow_keys.BENCHMARK_OWNED_BODY_FIELDS``): ``max_tokens`` is each point's output
length, so it is chosen with ``points=ISLxOSLxCON``.
Values that read as JSON numbers, booleans or null are sent as such; any other value as a string.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from contracts.workflow_keys import BENCHMARK_PASSTHROUGH


def check_passthrough(key: str, value: str) -> str | None:
    """Why ``key=value`` cannot be a request body field of the benchmark, or None when it can."""
    return BENCHMARK_PASSTHROUGH.problem(key, value)


def body_value(value: str) -> Any:
    """``"0.7"`` -> 0.7, ``"40"`` -> 40, ``"true"`` -> True; anything else stays the string it was."""
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    if isinstance(parsed, float) and not math.isfinite(parsed):
        return value  # NaN/Infinity are not JSON: a server could not read the body
    return parsed if parsed is None or isinstance(parsed, (bool, int, float)) else value


def body_fields(extra: Mapping[str, str]) -> dict[str, Any]:
    """The request body fields for ``extra``; ValueError names the first key that cannot be one."""
    for key, value in extra.items():
        problem = check_passthrough(key, str(value))
        if problem:
            raise ValueError(problem)
    return {key: body_value(str(value)) for key, value in extra.items()}
