"""Evals A/B (``--baseline-url`` / ``--baseline-vllm-args``): every task's items scored on this run's server are
scored again on the baseline server, and the accuracy difference is decided on the paired items
(``records.ab_evals``), never on two independent scores.

The baseline pass asks lm-eval for exactly the items the candidate scored (``--limit n`` takes the first n of
the task's fixed order), into ``evals/<task>/baseline_lm_eval/`` with its own request cache, and writes
``evals/<task>/ab.json``. A task that could not be scored on either server is recorded as not compared (an
undecided check: the user asked for the comparison). The orchestrator passes the baseline with the flags of
``contracts.client_main.add_baseline_arguments``.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Protocol

from evals.eval_spec import EvalTask
from evals.lm_eval_command import build_command, choose_tokenizer
from evals.lm_eval_results import ResultsError, item_scores, newest_samples_file
from records.ab_evals import EvalAB, paired_eval
from records.evals import EvalRecord


class TaskRunner(Protocol):
    """What the comparison uses of ``evals.run_evals.TaskRunner`` (named here: that module imports this one)."""

    evals_dir: Path
    bearer: str | None
    tokenizer_dir: str | None
    model: str

    def rel(self, path: Path) -> str: ...

    def _run_lm_eval(self, task: EvalTask, inv: Any, env: dict[str, str],
                     log_path: Path) -> tuple[int, str, str | None]: ...

AB_FILE = "ab.json"
BASELINE_DIR = "baseline_lm_eval"


def not_compared(task: str, metric: str, asked: str, tolerance: float, why: str) -> EvalAB:
    return EvalAB(task=task, metric=metric, baseline=asked, tolerance=tolerance, note=f"not compared: {why}")


def compare_task(runner: TaskRunner, task: EvalTask, rec: EvalRecord, baseline_url: str, asked: str,
                 tolerance: float, env: dict[str, str]) -> EvalAB:
    """Score the candidate's items on the baseline and decide the pairs; writes ``evals/<task>/ab.json``."""
    task_dir = runner.evals_dir / task.task_name
    metric = task.score.metric_keys[0] if task.score is not None else ""
    done = _finished(task_dir)
    if done is not None:
        return done
    result = _compare(runner, task, rec, baseline_url, asked, tolerance, env, task_dir, metric)
    result.write(task_dir / AB_FILE)
    return result


def _finished(task_dir: Path) -> EvalAB | None:
    try:
        return EvalAB.read(task_dir / AB_FILE)
    except Exception:  # noqa: BLE001 - no (or a broken) earlier comparison: compare again
        return None


def _compare(runner: TaskRunner, task: EvalTask, rec: EvalRecord, baseline_url: str, asked: str, tolerance: float,
             env: dict[str, str], task_dir: Path, metric: str) -> EvalAB:
    if task.score is None or task.score.score_func != "single":
        return not_compared(task.task_name, metric, asked, tolerance,
                            "the task's score is not one per-item metric: items cannot be paired")
    candidate_file = newest_samples_file(task_dir / "lm_eval", task.task_name)
    if rec.value is None or candidate_file is None:
        return not_compared(task.task_name, metric, asked, tolerance,
                            f"this run's server scored no items ({rec.error or rec.status})")
    try:
        candidate = item_scores(candidate_file, metric)
    except (ResultsError, ValueError, OSError) as exc:
        return not_compared(task.task_name, metric, asked, tolerance, f"this run's item scores: {exc}")
    out_dir = task_dir / BASELINE_DIR
    (out_dir / "cache").mkdir(parents=True, exist_ok=True)
    tok = choose_tokenizer(task, baseline_url, runner.bearer, runner.tokenizer_dir)
    inv = build_command(task, python=sys.executable, server_url=baseline_url, model_name=runner.model,
                        output_dir=out_dir, cache_path=out_dir / "cache" / "requests", tokenizer=tok,
                        limit=len(candidate))
    log_path = task_dir / "baseline_lm_eval.log"
    started = time.time()
    rc, _, cause = runner._run_lm_eval(task, inv, env, log_path)
    if rc != 0:
        return not_compared(task.task_name, metric, asked, tolerance,
                            f"lm-eval on the baseline exited {rc}: {cause or 'see ' + runner.rel(log_path)}")
    baseline_file = newest_samples_file(out_dir, task.task_name)
    if baseline_file is None or baseline_file.stat().st_mtime < started - 1:
        return not_compared(task.task_name, metric, asked, tolerance, "lm-eval on the baseline wrote no samples")
    try:
        baseline = item_scores(baseline_file, metric)
    except (ResultsError, ValueError, OSError) as exc:
        return not_compared(task.task_name, metric, asked, tolerance, f"the baseline's item scores: {exc}")
    return paired_eval(task.task_name, metric, candidate, baseline, tolerance, asked)


__all__ = ["AB_FILE", "BASELINE_DIR", "compare_task", "not_compared"]
