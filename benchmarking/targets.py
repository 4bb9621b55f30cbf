"""Judge one point's metrics against the spec's target tiers (stdlib only).

Tiers (functional, complete, target) each may give ttft_ms (lower is better), tput_user and tput
(higher is better; tput is compared with decode_throughput, the reference's 'Tput Decode').
A missing target or a missing measurement gives a null ratio and a null pass, never a guess.
"""
from __future__ import annotations

TIERS = ("functional", "complete", "target")
# target key -> (measured metric key, higher_is_better)
_CHECKS = {"ttft_ms": ("mean_ttft_ms", False), "tput_user": ("tput_user", True), "tput": ("decode_throughput", True)}
_RATIO_NAME = {"ttft_ms": "ttft", "tput_user": "tput_user", "tput": "tput"}


def judge(metrics: dict, tiers: dict | None) -> dict:
    """{tier: {ttft_ms, tput_user, tput, <x>_ratio, <x>_pass}} for each tier present in the spec."""
    out: dict = {}
    for tier in TIERS:
        spec = (tiers or {}).get(tier)
        if not spec:
            continue
        row: dict = {}
        for tkey, (mkey, higher) in _CHECKS.items():
            target = spec.get(tkey)
            measured = metrics.get(mkey)
            name = _RATIO_NAME[tkey]
            row[tkey] = target
            if target in (None, 0) or measured is None or (not higher and measured == 0):
                row[f"{name}_ratio"] = None
                row[f"{name}_pass"] = None
                continue
            ratio = float(measured) / float(target)
            row[f"{name}_ratio"] = round(ratio, 4)
            row[f"{name}_pass"] = ratio >= 1.0 if higher else ratio <= 1.0
        out[tier] = row
    return out
