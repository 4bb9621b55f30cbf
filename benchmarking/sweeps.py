"""Which points a benchmarks run measures (stdlib only).

A point is (isl, osl, max_concurrency, num_prompts). The sweep follows the upstream
tt-inference-server's benchmark sweep: the spec's perf_reference points (they carry targets), then
common ISL/OSL pairs at concurrency 1 and at the spec's max_concurrency, minus points already in
perf_reference, minus points that do not fit the context (isl + osl > max_context). ``mode`` trims
it: smoke and ci = the perf_reference points, full = all. Why ci measures only what is judged: the
sweep points feed no target check (they draw the report's curves), and on a 2-core CPU they were
over half of a ci release's benchmark time; ``mode=full`` draws the curves. A spec without
perf_reference points has nothing to judge, so smoke measures two tiny points and ci the first
pair of each sweep, with half the prompts full sends (4 per user instead of 8).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from benchmarking.bench_args import BenchArgs
from contracts.model_spec import ModelSpec

BATCH_1_PAIRS: tuple[tuple[int, int], ...] = (
    (128, 128), (128, 1024), (1024, 128), (2048, 128), (3072, 128),
    (4096, 128), (8192, 128), (16384, 128), (32000, 128),
)
MAX_CONCURRENCY_PAIRS: tuple[tuple[int, int], ...] = (
    (128, 128), (128, 1024), (2048, 128), (2048, 2048), (3000, 64),
    (4000, 64), (4500, 64), (8000, 64), (16000, 64),
)
# smoke: a batch-1 point and a small-concurrency point, seconds each on a CPU engine
SMOKE_POINTS: tuple[tuple[int, int, int, int], ...] = ((64, 16, 1, 4), (128, 32, 4, 8))
CI_SWEEP_PAIRS = 1  # ci keeps the first N pairs of each sweep list
CI_SWEEP_PROMPT_SHARE = 2  # ci sweep points send num_prompts_for(...) // this (at least 2 per user)


@dataclass
class Point:
    """One benchmark point; `targets` holds the spec's expanded tiers when the point is a perf_reference one."""

    isl: int
    osl: int
    max_concurrency: int
    num_prompts: int
    source: str = "custom"  # perf_reference | batch_1 | max_concurrency | custom
    targets: dict = field(default_factory=dict)
    # (check name, metric key, target) of a requirements document's mean targets at this point: in a run given a
    # document the adaptive stop samples until they are decided, instead of the spec's tiers (None: no document;
    # benchmarking.requirement_points)
    requirement_checks: list | None = None

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.isl, self.osl, self.max_concurrency)

    @property
    def stem(self) -> str:
        """File stem shared by the summary, request log and metrics snapshot of this point."""
        return f"point_isl-{self.isl}_osl-{self.osl}_con-{self.max_concurrency}_n-{self.num_prompts}"


def num_prompts_for(isl: int, osl: int, concurrency: int) -> int:
    """Prompt count per point: long sequences get 2x concurrency, medium 4x, short 8x."""
    if osl > 1024 or isl > 4000:
        return 2 * concurrency
    if 128 < osl <= 1024 or 128 < isl <= 4000:
        return 4 * concurrency
    return 8 * concurrency


def sweep_prompts(isl: int, osl: int, concurrency: int, mode: str) -> int:
    """Prompt count of an untargeted sweep point: num_prompts_for, halved in ci (never below 2 per user)."""
    n = num_prompts_for(isl, osl, concurrency)
    return max(2 * concurrency, n // CI_SWEEP_PROMPT_SHARE) if mode == "ci" else n


def perf_reference_points(spec: ModelSpec) -> list[Point]:
    """The spec's perf_reference entries (text only) as points with their target tiers."""
    points = []
    for entry in spec.device_model_spec.perf_reference:
        if entry.task_type != "text":
            continue
        isl, osl, con = int(entry.isl), int(entry.osl), int(entry.max_concurrency)
        n = int(entry.num_prompts or num_prompts_for(isl, osl, con))
        targets = {tier: dataclasses.asdict(target) for tier, target in entry.targets.items()}
        points.append(Point(isl, osl, con, n, "perf_reference", targets))
    return points


def build_points(spec: ModelSpec, args: BenchArgs) -> list[Point]:
    """The ordered, de-duplicated list of points this run measures."""
    dms = spec.device_model_spec
    max_context = int(dms.max_context or 0) or None
    max_con = max(1, int(dms.max_concurrency or 1))
    reference = perf_reference_points(spec)
    ref_by_key = {p.key: p for p in reference}

    candidates: list[Point] = []
    if args.points:
        for isl, osl, con, n in args.points:
            ref = ref_by_key.get((isl, osl, con))
            candidates.append(Point(isl, osl, con, n or (ref.num_prompts if ref else num_prompts_for(isl, osl, con)),
                                    "perf_reference" if ref else "custom", dict(ref.targets) if ref else {}))
    elif args.mode in ("smoke", "ci") and reference:
        # The perf_reference points carry the targets the verdict needs: smoke and ci measure exactly
        # those (their sample budgets differ), full adds the sweep.
        candidates.extend(reference)
    elif args.mode == "smoke" and not args.only_targets:
        for isl, osl, con, n in SMOKE_POINTS:
            con = min(con, max_con)
            ref = ref_by_key.get((isl, osl, con))
            candidates.append(Point(isl, osl, con, max(n, con), "batch_1" if con == 1 else "custom",
                                    dict(ref.targets) if ref else {}))
    else:
        candidates.extend(reference)
        if not args.only_targets:
            b1 = BATCH_1_PAIRS[:CI_SWEEP_PAIRS] if args.mode == "ci" else BATCH_1_PAIRS
            mc = MAX_CONCURRENCY_PAIRS[:CI_SWEEP_PAIRS] if args.mode == "ci" else MAX_CONCURRENCY_PAIRS
            candidates += [Point(i, o, 1, sweep_prompts(i, o, 1, args.mode), "batch_1") for i, o in b1]
            if max_con > 1:
                candidates += [Point(i, o, max_con, sweep_prompts(i, o, max_con, args.mode), "max_concurrency")
                               for i, o in mc]

    seen: set[tuple[int, int, int]] = set()
    out = []
    for p in candidates:
        if p.key in seen:
            continue
        if max_context and p.isl + p.osl > max_context and p.source != "perf_reference" and not args.points:
            continue
        seen.add(p.key)
        if args.num_prompts:
            p.num_prompts = args.num_prompts
        out.append(p)
    return out
