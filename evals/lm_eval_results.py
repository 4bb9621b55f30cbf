"""Reading lm-eval's results files: find the newest one, and turn ``results[task]`` into one score.

Why here and not with the eval record: this is the eval client's knowledge of lm-eval's output
layout; the record (``records.evals``) only carries the score it yields.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evals.eval_spec import ScoreSpec


class ResultsError(ValueError):
    """The lm-eval results file lacks what the score spec asks for."""


def find_results_file(output_dir: Path) -> Path | None:
    """Newest ``results_<datetime>.json`` lm-eval wrote under ``output_dir`` (it adds a model subdir)."""
    found = sorted(output_dir.rglob("results_*.json"), key=lambda p: (p.stat().st_mtime, p.name))
    return found[-1] if found else None


def _number(v: Any) -> float | None:
    """lm-eval writes "N/A" for stderrs it could not compute; treat anything non-numeric as None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return None if math.isnan(v) else float(v)


def _stderr_key(metric_key: str) -> str:
    metric, _, flt = metric_key.partition(",")
    return f"{metric}_stderr,{flt}"


def count_samples(results: Mapping[str, Any], task: str) -> int | None:
    """Effective sample count for a task, summing subtasks for a group such as ``mmlu``."""
    n_samples = results.get("n-samples") or {}
    if task in n_samples:
        return int(n_samples[task].get("effective", n_samples[task].get("original", 0)))
    subtasks = (results.get("group_subtasks") or {}).get(task)
    if subtasks:
        counts = [count_samples(results, sub) for sub in subtasks]
        if any(c is not None for c in counts):
            return sum(c or 0 for c in counts)
    return None


def score_results(results: Mapping[str, Any], task: str, spec: ScoreSpec) -> tuple[float, float | None, int | None]:
    """(value, stderr, samples) for ``task`` from a parsed lm-eval results JSON.

    ``single`` uses the first metric key (and its stderr); ``mean`` averages every key and reports
    no stderr, since the keys are computed on the same samples and are not independent.
    """
    per_task = (results.get("results") or {}).get(task)
    if per_task is None:
        have = sorted((results.get("results") or {}).keys())
        raise ResultsError(f"task {task!r} not in lm-eval results (have {have})")
    values = []
    for key in spec.metric_keys:
        v = _number(per_task.get(key))
        if v is None:
            have = sorted(k for k in per_task if "," in k and "_stderr" not in k)
            raise ResultsError(f"metric {key!r} missing for {task!r} (have {have})")
        values.append(v)
    if spec.score_func == "single":
        value, stderr = values[0], _number(per_task.get(_stderr_key(spec.metric_keys[0])))
    else:
        value, stderr = sum(values) / len(values), None
    return value, stderr, count_samples(results, task)


def newest_samples_file(output_dir: Path, task: str) -> Path | None:
    """Newest ``samples_<task>_<datetime>.jsonl`` under ``output_dir`` (lm-eval's per-item log)."""
    found = sorted(output_dir.rglob(f"samples_{task}_*.jsonl"), key=lambda p: (p.stat().st_mtime, p.name))
    return found[-1] if found else None


def item_scores(samples_file: Path, metric_key: str) -> list[float]:
    """Each item's score of ``metric_key`` ('acc,none': metric, filter) in doc_id order, from lm-eval's
    samples log; ResultsError when an item lacks it or the doc ids are not 0..n-1 (lm-eval's --limit
    takes the first n items, so they always are)."""
    metric, _, flt = metric_key.partition(",")
    rows: dict[int, float] = {}
    for line in samples_file.read_text().splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        if rec.get("filter", "none") == flt and metric in rec:
            value = _number(rec[metric])
            if value is None:
                raise ResultsError(f"{samples_file.name}: item {rec.get('doc_id')} has no number for {metric_key}")
            rows[int(rec["doc_id"])] = value
    if sorted(rows) != list(range(len(rows))):
        raise ResultsError(f"{samples_file.name}: doc ids of {metric_key} are not 0..{len(rows) - 1}")
    return [rows[i] for i in range(len(rows))]
