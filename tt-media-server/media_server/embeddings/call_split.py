"""The cheapest split of a micro-batch's length-sorted texts into session calls.

Both ONNX layouts (padded: `onnx_backend.padded_groups`; unpadded: `unpadded_bert.groups`) pick
contiguous groups of the sorted texts by the same exact search; only the cost of one call differs.
"""

from __future__ import annotations

from typing import Callable, Optional


def cheapest_split(count: int, call_cost: Callable[[int, int], Optional[float]]) -> list[tuple[int, int]]:
    """Contiguous (start, end) groups of `count` sorted texts with the least total cost.

    `call_cost(start, end)` is the cost of one call over texts start..end-1, or None when that call
    is too big (then no longer group ending at `end` is tried; a single text is always allowed by
    the callers). Exact over contiguous groups, at most count^2 steps.
    """
    best = [0.0] + [float("inf")] * count
    cut = [0] * (count + 1)
    for end in range(1, count + 1):
        for start in range(end - 1, -1, -1):
            cost = call_cost(start, end)
            if cost is None:
                break
            if best[start] + cost < best[end]:
                best[end], cut[end] = best[start] + cost, start
    groups = []
    end = count
    while end > 0:
        groups.append((cut[end], end))
        end = cut[end]
    return groups[::-1]
