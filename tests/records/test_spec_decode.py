"""Speculative decoding figures from counter snapshots (records/spec_decode.py): the counters read as vLLM and a
Tenstorrent worker spell them, and the intervals checked by simulation against a known acceptance."""
from __future__ import annotations

import random

import pytest

from records.spec_decode import (
    SpecDecode,
    counter_deltas,
    figures,
    from_snapshots,
    has_counters,
    speedup_decision,
    sum_snapshots,
    summary_line,
)

E0, E1 = '{engine="0",model_name="m"}', '{engine="1",model_name="m"}'


def _snap(drafts, tokens, accepted, per_pos, engine=E0, prefix="vllm:spec_decode_") -> dict[str, float]:
    out = {f"{prefix}num_drafts_total{engine}": drafts, f"{prefix}num_draft_tokens_total{engine}": tokens,
           f"{prefix}num_accepted_tokens_total{engine}": accepted, "vllm:generation_tokens_total" + engine: 99.0}
    for k, n in enumerate(per_pos):
        out[f'{prefix}num_accepted_tokens_per_pos_total{engine[:-1]},position="{k}"}}'] = n
    return out


def test_the_repeating_sequence_of_the_first_try_reads_15_of_15() -> None:
    """vLLM's counters over a 20-token greedy completion that drafted 5 times 3 tokens, all accepted."""
    before = _snap(0, 0, 0, [0, 0, 0])
    after = _snap(5, 15, 15, [5, 5, 5])
    rec = from_snapshots(before, after, "server")
    assert rec.status == "measured" and (rec.drafts, rec.draft_tokens, rec.accepted_tokens) == (5, 15, 15)
    assert rec.acceptance_rate == 1.0 and rec.mean_accepted_length == 4.0
    low, high = rec.acceptance_rate_ci95
    assert high == 1.0 and 0.4 < low < 0.6  # five drafts, not fifteen tokens, are the trials: a wide interval
    assert [p.rate for p in rec.per_position] == [1.0, 1.0, 1.0]
    assert rec.mean_accepted_length_ci95[1] == 4.0 and rec.mean_accepted_length_ci95[0] < 3.0
    assert "15 of 15 drafted tokens accepted over 5 drafts" in summary_line(rec.to_dict())


def test_engines_and_both_spellings_are_summed_and_other_metrics_ignored() -> None:
    before = {**_snap(10, 30, 12, [6, 4, 2]), **_snap(1, 3, 0, [0, 0, 0], E1, "tt_spec_decode_")}
    after = {**_snap(20, 60, 24, [12, 8, 4]), **_snap(11, 33, 6, [4, 2, 0], E1, "tt_spec_decode_")}
    totals, positions = counter_deltas(before, after)
    assert totals == {"drafts": 20, "draft_tokens": 60, "accepted_tokens": 18}
    assert positions == {0: 10, 1: 6, 2: 2}
    rec = from_snapshots(before, after, "server")
    assert rec.acceptance_rate == pytest.approx(0.3) and rec.mean_accepted_length == pytest.approx(1.9)
    assert [p.accepted for p in rec.per_position] == [10, 6, 2]


def test_no_counters_no_drafts_and_a_restart_are_told_apart() -> None:
    plain = {"vllm:generation_tokens_total": 5.0}
    assert from_snapshots(plain, plain, "server") is None and not has_counters(plain)
    still = _snap(3, 9, 4, [2, 1, 1])
    assert from_snapshots(still, still, "server").status == "no_drafts"
    reset = from_snapshots(_snap(30, 90, 40, [20, 10, 10]), _snap(2, 6, 1, [1, 0, 0]), "server")
    assert reset.status == "reset" and reset.acceptance_rate is None and "backwards" in reset.detail
    assert SpecDecode.from_dict(reset.to_dict()) == reset


def test_workers_are_summed_before_the_delta() -> None:
    a0, a1 = _snap(1, 3, 1, [1, 0, 0]), _snap(2, 6, 2, [1, 1, 0])
    b0, b1 = _snap(5, 15, 9, [4, 3, 2]), _snap(4, 12, 6, [3, 2, 1])
    merged = from_snapshots(sum_snapshots([a0, a1]), sum_snapshots([b0, b1]), "workers")
    assert (merged.drafts, merged.draft_tokens, merged.accepted_tokens) == (6, 18, 12)
    assert sum_snapshots([None, None]) is None and sum_snapshots([None, a0]) == a0


def _simulate(rng: random.Random, accept: float, k: int, drafts: int) -> tuple[int, int, list[int]]:
    """vLLM's rule: a draft's tokens are accepted as a prefix, each next one with probability ``accept``."""
    accepted, per_pos = 0, [0] * k
    for _ in range(drafts):
        n = 0
        while n < k and rng.random() < accept:
            per_pos[n] += 1
            n += 1
        accepted += n
    return k * drafts, accepted, per_pos


@pytest.mark.parametrize("accept, drafts", [(0.5, 40), (0.8, 120), (0.95, 30)])
def test_intervals_cover_the_known_acceptance_at_least_95_percent_of_the_time(accept, drafts) -> None:
    """400 simulated points each; the truth: acceptance share E[L]/k, position j accept^(j+1), length 1 + E[L]."""
    k, reps, rng = 3, 400, random.Random(7)
    per_pos_truth = [accept ** (j + 1) for j in range(k)]
    share_truth = sum(per_pos_truth) / k
    covered = {"rate": 0, "length": 0, **{j: 0 for j in range(k)}}
    for _ in range(reps):
        tokens, accepted, per_pos = _simulate(rng, accept, k, drafts)
        rec = figures("sim", drafts, tokens, accepted, dict(enumerate(per_pos)))
        covered["rate"] += rec.acceptance_rate_ci95[0] <= share_truth <= rec.acceptance_rate_ci95[1]
        lo, hi = rec.mean_accepted_length_ci95
        covered["length"] += lo <= 1 + k * share_truth <= hi
        for j, p in enumerate(rec.per_position):
            covered[j] += p.ci95[0] <= per_pos_truth[j] <= p.ci95[1]
    rates = {name: n / reps for name, n in covered.items()}
    # 0.93: the 95% level less the simulation's own error at 400 draws (about 1.1 points)
    assert all(r >= 0.93 for r in rates.values()), rates


@pytest.mark.parametrize("decision, ci, word", [
    ("improved", [0.7, 0.8], "faster"), ("regressed", [1.2, 1.4], "slower"),
    ("within_noise", [0.97, 1.03], "same"), ("within_noise", [0.8, 1.03], "inconclusive"),
    ("inconclusive", [0.9, 1.2], "inconclusive"), ("inconclusive", None, "inconclusive")])
def test_speedup_words(decision, ci, word) -> None:
    assert speedup_decision(decision, ci, 0.05) == word
