"""When each request of a point is released (stdlib only).

Closed loop: rate inf, every request is released at t=0 and the concurrency cap does the pacing.
Open loop: gaps drawn from Gamma(shape=burstiness, scale=1/(rate*burstiness)) -- burstiness 1 is
a Poisson process, inf is constant spacing -- then the cumulative times are rescaled so the last
release lands exactly at N/rate, as vLLM does, so throughput does not wobble with the seed.
Ramp: the rate grows linearly from start to end across the requests (no rescaling, like vLLM).
"""
from __future__ import annotations

import math
import random


def release_offsets(n: int, rate: float = math.inf, burstiness: float = 1.0,
                    ramp: tuple[float, float] | None = None, seed: int = 0) -> list[float]:
    """Seconds after the start at which request i may be sent; non-decreasing, length n."""
    if n <= 0:
        return []
    if burstiness <= 0:
        raise ValueError(f"burstiness must be > 0, got {burstiness}")
    rng = random.Random(seed)
    gaps = []
    for i in range(n):
        if ramp:
            start, end = ramp
            current = start + (end - start) * (i / max(n - 1, 1))
        else:
            current = rate
        if current <= 0:
            raise ValueError(f"request rate must be > 0, got {current}")
        if math.isinf(current):
            gaps.append(0.0)
        elif math.isinf(burstiness):
            gaps.append(1.0 / current)
        else:
            gaps.append(rng.gammavariate(burstiness, 1.0 / (current * burstiness)))
    offsets = []
    total = 0.0
    for g in gaps:
        total += g
        offsets.append(total)
    if not ramp and not math.isinf(rate) and offsets[-1] > 0:
        scale = (n / rate) / offsets[-1]
        offsets = [o * scale for o in offsets]
    return offsets
