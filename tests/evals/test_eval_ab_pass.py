"""Evals A/B: the candidate's scored items scored again on the baseline (the same ``--limit``), paired item by item,
and the comparison written to ``evals/<task>/ab.json`` (``evals.ab_evals``). lm-eval itself is a fake here (its
samples file is written by the fake worker call); the real path runs in the A/B run the README shows."""
from __future__ import annotations

import json
from pathlib import Path

from evals.ab_evals import AB_FILE, BASELINE_DIR, compare_task
from evals.eval_spec import LOCAL_CHAT_COMPLETIONS, EvalTask, ScoreSpec
from records.ab_evals import EvalAB
from records.evals import EvalRecord

TASK = EvalTask("tt_offline_chat", model_class=LOCAL_CHAT_COMPLETIONS, apply_chat_template=True, offline=True,
                score=ScoreSpec(metric_keys=("contains,none",)))


def _samples(directory: Path, scores: list[float]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    rows = [{"doc_id": i, "filter": "none", "contains": s} for i, s in enumerate(scores)]
    (directory / f"samples_{TASK.task_name}_2026-12-06T00-00-00.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows))


class FakeRunner:
    """The TaskRunner surface compare_task uses; its lm-eval 'run' writes the baseline's samples."""

    def __init__(self, root: Path, baseline_scores: list[float], rc: int = 0) -> None:
        self.evals_dir, self.bearer, self.tokenizer_dir, self.model = root / "evals", None, None, "m"
        self.baseline_scores, self.rc, self.limits = baseline_scores, rc, []

    def rel(self, path: Path) -> str:
        return str(path)

    def _run_lm_eval(self, task, inv, env, log_path):
        self.limits.append(inv.cli_args[inv.cli_args.index("--limit") + 1])
        if self.rc == 0:
            _samples(self.evals_dir / task.task_name / BASELINE_DIR, self.baseline_scores)
        return self.rc, "", None if self.rc == 0 else "the baseline refused"


def test_the_same_items_are_scored_on_the_baseline_and_decided_on_the_pairs(tmp_path) -> None:
    candidate = [1.0] * 150 + [0.0] * 150
    runner = FakeRunner(tmp_path, [1.0] * 200 + [0.0] * 100)   # the baseline answered 50 more items right
    _samples(runner.evals_dir / TASK.task_name / "lm_eval", candidate)
    rec = EvalRecord(model_id="m", task=TASK.task_name, metric="contains,none", mode="ci", lm_eval_command="",
                     value=0.5)
    result = compare_task(runner, TASK, rec, "http://b:1", "--baseline-url http://b:1", 0.05, {})
    assert runner.limits == ["300"]                     # exactly the items the candidate scored
    assert (result.items, result.gains, result.losses, result.decision) == (300, 0, 50, "regressed"), result
    assert EvalAB.read(runner.evals_dir / TASK.task_name / AB_FILE).decision == "regressed"
    # a rerun keeps the finished comparison (resume): lm-eval is not run again
    assert compare_task(runner, TASK, rec, "http://b:1", "x", 0.05, {}).decision == "regressed"
    assert runner.limits == ["300"]


def test_a_task_that_cannot_be_paired_is_not_compared_and_says_why(tmp_path) -> None:
    runner = FakeRunner(tmp_path, [1.0], rc=1)
    rec = EvalRecord(model_id="m", task=TASK.task_name, metric="contains,none", mode="ci", lm_eval_command="")
    none = compare_task(runner, TASK, rec, "http://b:1", "x", 0.05, {})
    assert none.decision == "inconclusive" and "scored no items" in none.note
    (runner.evals_dir / TASK.task_name / AB_FILE).unlink()
    _samples(runner.evals_dir / TASK.task_name / "lm_eval", [1.0, 0.0])
    rec.value = 0.5
    refused = compare_task(runner, TASK, rec, "http://b:1", "x", 0.05, {})
    assert refused.decision == "inconclusive" and "the baseline refused" in refused.note
