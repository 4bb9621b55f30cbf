"""The measured reference scores of the offline task set, read from ``evals/reference_scores.json``.

Why a data file: the scores are measurements, not configuration. Two kinds sit side by side for
each model, each with its provenance: ``served`` (our served endpoint on known-good hardware and
software, the accuracy target's basis) and ``in_process`` (lm-eval's ``hf`` backend running the
same weights in process, no server; written by ``scripts/measure_inprocess_reference.py``). The
in-process score is the independent witness: a served score outside its interval is a serving bug.

File layout (schema ``tt-eval-references/1``)::

    {"schema": ..., "models": {MODEL: {
        "served": {"source": str, "scores": {TASK: {MODE: score}}},
        "in_process": {"source": str, "provenance": {...}, "scores": {TASK: {MODE: {
            "value", "stderr", "samples", "ci95", "limit", "task_config_sha256", "measured_as",
            "items" (optional: each item's score by doc_id)}}}}}}}

Stdlib only: ``evals.eval_config`` (imported by the orchestrator's CLI) reads it.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from evals.eval_spec import MODES, InProcessScore

SCHEMA = "tt-eval-references/1"
REFERENCE_FILE = Path(__file__).resolve().parent / "reference_scores.json"
TASKS_DIR = Path(__file__).resolve().parent / "tasks"
#: What an in-process measurement's provenance must name (scripts/measure_inprocess_reference.py).
PROVENANCE_KEYS = ("engine", "versions", "weights", "dtype", "batch_size", "cpu", "date", "command")
IN_PROCESS_SCORE_KEYS = ("value", "stderr", "samples", "ci95", "limit", "task_config_sha256", "measured_as")


class ReferenceFileError(ValueError):
    """The reference file does not hold what the schema promises; the message names the place."""


def load(path: Path = REFERENCE_FILE) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ReferenceFileError(f"{path}: {e}") from None
    validate(data, str(path))
    return data


def validate(data: Any, where: str = "reference file") -> None:
    """Raise ReferenceFileError unless ``data`` follows the schema above (scores in [0, 1], known
    modes, every in-process score with its interval, sample count, task hash and full provenance)."""
    def need(cond: bool, msg: str) -> None:
        if not cond:
            raise ReferenceFileError(f"{where}: {msg}")

    need(isinstance(data, dict) and data.get("schema") == SCHEMA, f"schema must be {SCHEMA!r}")
    models = data.get("models")
    need(isinstance(models, dict) and bool(models), "'models' must be a non-empty object")
    for model, entry in models.items():
        served = entry.get("served") or {}
        need(isinstance(served.get("source"), str) and bool(served["source"]), f"{model}: served.source missing")
        for task, by_mode in (served.get("scores") or {}).items():
            need(set(by_mode) <= set(MODES), f"{model}/{task}: unknown served modes {sorted(by_mode)}")
            need(all(isinstance(v, (int, float)) and 0 <= v <= 1 for v in by_mode.values()),
                 f"{model}/{task}: served scores must be fractions in [0, 1]")
        inproc = entry.get("in_process")
        if inproc is None:
            continue
        prov = inproc.get("provenance") or {}
        missing = [k for k in PROVENANCE_KEYS if not prov.get(k)]
        need(not missing, f"{model}: in_process.provenance lacks {missing}")
        need(isinstance(inproc.get("source"), str) and bool(inproc["source"]), f"{model}: in_process.source missing")
        for task, by_mode in (inproc.get("scores") or {}).items():
            need(set(by_mode) <= set(MODES), f"{model}/{task}: unknown in-process modes {sorted(by_mode)}")
            for mode, score in by_mode.items():
                lacking = [k for k in IN_PROCESS_SCORE_KEYS if k not in score]
                need(not lacking, f"{model}/{task}/{mode}: in-process score lacks {lacking}")
                ci = score["ci95"]
                need(isinstance(ci, list) and len(ci) == 2 and ci[0] <= score["value"] <= ci[1],
                     f"{model}/{task}/{mode}: ci95 must be [low, high] around the value")
                need(0 <= score["value"] <= 1 and int(score["samples"]) >= 1,
                     f"{model}/{task}/{mode}: value must be in [0, 1] with at least one sample")
                items = score.get("items")
                need(items is None or (isinstance(items, list) and len(items) == int(score["samples"])
                                       and all(isinstance(v, (int, float)) and 0 <= v <= 1 for v in items)),
                     f"{model}/{task}/{mode}: items must list one score in [0, 1] per sample, by doc_id")


def served_scores(model: str, data: dict[str, Any] | None = None) -> tuple[str, dict[str, dict[str, float]]]:
    """(source, {task: {mode: score}}) of the model's served reference scores."""
    entry = _model(model, data)
    served = entry["served"]
    return served["source"], {t: {m: float(v) for m, v in s.items()} for t, s in served.get("scores", {}).items()}


def in_process_scores(model: str, data: dict[str, Any] | None = None) -> dict[str, dict[str, InProcessScore]]:
    """{task: {mode: InProcessScore}}; empty when the model has no in-process measurement."""
    inproc = _model(model, data).get("in_process")
    if not inproc:
        return {}
    return {task: {mode: InProcessScore(value=float(s["value"]),
                                        stderr=None if s["stderr"] is None else float(s["stderr"]),
                                        samples=int(s["samples"]), task_config_sha256=s["task_config_sha256"],
                                        source=f"{inproc['source']}; {s['measured_as']}",
                                        items=tuple(float(v) for v in s.get("items") or ()))
                   for mode, s in by_mode.items()}
            for task, by_mode in inproc.get("scores", {}).items()}


def _model(model: str, data: dict[str, Any] | None) -> dict[str, Any]:
    data = load() if data is None else data
    try:
        return data["models"][model]
    except KeyError:
        raise ReferenceFileError(f"no reference scores for {model!r} in {REFERENCE_FILE.name}") from None


def task_files(task_name: str, tasks_dir: Path = TASKS_DIR) -> list[Path]:
    """The files that define an offline task: its YAML, the data files the YAML names, and the
    helper module when the YAML calls ``!function utils.*``."""
    yaml_path = tasks_dir / f"{task_name}.yaml"
    text = yaml_path.read_text()
    files = [yaml_path]
    for name in sorted(set(re.findall(r"[\w./-]+\.jsonl?\b", text))):
        files.append(tasks_dir / name)
    if "!function utils." in text:
        files.append(tasks_dir / "utils.py")
    return files


def task_config_sha256(task_name: str, tasks_dir: Path = TASKS_DIR) -> str:
    """sha256 over the task's files (names and contents): the task as lm-eval sees it."""
    digest = hashlib.sha256()
    for path in task_files(task_name, tasks_dir):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()
