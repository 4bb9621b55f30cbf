"""Agreement of two load generators (``--workflow-args agreement=TOOL``): the ABBA block loop.

Each judged point is measured again, after the sweep's own measurements (which it never starves: the
points share what the sweep budget leaves, equally), in blocks of the point's size sent alternately by
our client (A) and the named tool (B) in the order A B B A, cycle after cycle, until every metric's
ratio is decided against the noise band or the cycles or the point's share of time run out
(the statistic and its stopping rule: ``records.agreement``). The block measurement is a callable, so
the loop is the same in the workflow and in the simulation test that measures its error rates.
"""
from __future__ import annotations

import time
from typing import Callable

from records.agreement import (
    MIN_CYCLES,
    AgreementBlock,
    abba_order,
    agreement_stop,
    judge_metrics,
    settle,
)

#: Measure one block: (side "A" ours | "B" the tool, block index) -> the block. Raises to stop the run.
MeasureBlock = Callable[[str, int], AgreementBlock]


class BlockFailed(RuntimeError):
    """A block could not be measured (the tool could not run, or no request completed); one line."""


#: Decide every metric over the blocks so far: (blocks in run order, looks taken) -> the metrics, each with a
#: ``decision`` that is ``inconclusive`` while undecided.
JudgeBlocks = Callable[[list, int], list]


def run_abba(record, measure: MeasureBlock, deadline: float | None = None,
             interrupted: Callable[[], bool] = lambda: False, judge: JudgeBlocks | None = None,
             side_names: tuple[str, str] | None = None):
    """Fill ``record`` (point, tool, band, max_cycles set) with blocks in ABBA order and decide its metrics.

    Looks after each whole cycle from ``MIN_CYCLES`` on; stops when every metric is decided (``decided``),
    when the cycles end or the next cycle would not finish before ``deadline`` (``budget``: time.monotonic
    seconds, judged from the mean block time so far), on a signal (``interrupted``) or when a block fails
    (``failed``, the reason in ``notes``). The metrics are decided on what was measured in every case.

    The same loop serves another paired comparison (``benchmarking.ab_points``: two servers): ``record`` then
    is any record with ``blocks``, ``metrics``, ``notes``, ``max_cycles`` and ``stopped``; ``judge`` decides its
    metrics (default: the agreement of two tools against the record's band) and ``side_names`` names sides A and
    B in its notes (default: ours and the record's tool)."""
    if judge is None:
        def judge(blocks: list, looks: int) -> list:
            return judge_metrics(record.point, record.tool, blocks, record.band, record.max_cycles, looks)
    names = side_names or ("ours", record.tool)
    looks, stopped = 0, "budget"
    order = abba_order(record.max_cycles)
    started = time.monotonic()
    for index, side in enumerate(order):
        if interrupted():
            stopped = "interrupted"
            break
        if index % 4 == 0 and index and deadline is not None:
            per_block = (time.monotonic() - started) / index
            if time.monotonic() + 4 * per_block > deadline:
                record.notes.append(f"the point's time budget ends before cycle {index // 4 + 1}: stopped after "
                                    f"{index // 4} cycles")
                break
        try:
            record.blocks.append(measure(side, index))
        except BlockFailed as exc:
            record.notes.append(f"block {index} ({names[0] if side == 'A' else names[1]}) failed: {exc}")
            stopped = "failed"
            break
        cycle_done = (index + 1) % 4 == 0
        if cycle_done and (index + 1) // 4 >= MIN_CYCLES:
            looks += 1
            record.metrics = judge(record.blocks, looks)
            if agreement_stop(record.metrics):
                stopped = "decided"
                break
    if not record.metrics or stopped != "decided":
        whole = record.blocks[:len(record.blocks) - len(record.blocks) % 2]  # an unpaired last block is left out
        record.metrics = judge(whole, max(looks, 1))
    return settle(record, stopped)
