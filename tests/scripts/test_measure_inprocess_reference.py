"""scripts/measure_inprocess_reference.py: the in-process run scores exactly what the served eval scores.

The real run (minutes of CPU) is the measurement itself, recorded in evals/reference_scores.json; these
tests cover what decides its correctness without running a model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import load_script

from evals.eval_config import EVAL_CONFIGS
from evals.eval_spec import MODES
from evals.offline_config import SMOKE_LIMIT
from evals.lm_eval_command import TokenizerChoice, build_command, build_inprocess_command, task_args

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "measure_inprocess_reference.py"
measure = load_script(SCRIPT)

TASKS = [t for t in EVAL_CONFIGS["SmolLM2-135M-Instruct"].tasks if t.offline]


def _after_model(argv: list[str]) -> list[str]:
    """The arguments from --tasks on: what lm-eval is told about the task (model and batching stripped)."""
    rest = argv[argv.index("--tasks"):]
    return [a for a in rest if a not in ("--use_cache",) and not a.endswith("/cache/requests")]


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.task_name)
def test_the_in_process_command_gives_lm_eval_the_served_evals_task_settings(task, tmp_path):
    for mode in MODES:
        limit = task.limit_for(mode)
        served = build_command(task, python="py", server_url="http://h:1", model_name="m", output_dir=tmp_path,
                               cache_path=tmp_path / "cache" / "requests", tokenizer=TokenizerChoice("remote", "x"),
                               limit=limit)
        inproc = build_inprocess_command(task, python="py", pretrained=Path("/ckpt"), dtype="float32",
                                         output_dir=tmp_path, limit=limit, batch_size=8)
        assert _after_model(served.argv) == _after_model(inproc.argv) == task_args(task, output_dir=tmp_path,
                                                                                     limit=limit)
        assert served.cwd == inproc.cwd
    argv = inproc.argv
    assert argv[argv.index("--model") + 1] == "hf" and "pretrained=/ckpt,dtype=float32" in argv
    assert ("--apply_chat_template" in argv) == task.apply_chat_template
    assert argv[argv.index("--num_fewshot") + 1] == str(task.num_fewshot)


def test_the_script_runs_every_item_once_and_derives_each_modes_subset(tmp_path):
    """One run over all items (the ci/full set); smoke = the first `limit` items, what --limit selects."""
    for task in TASKS:
        assert task.limit_for("ci") is None and task.limit_for("full") is None
        assert measure.mode_limits(task) == {"smoke": SMOKE_LIMIT, "ci": None, "full": None}
    samples = tmp_path / "samples.jsonl"
    rows = [{"doc_id": i, "filter": "strip", "exact_match": float(i % 3 == 0)} for i in (4, 0, 3, 1, 2, 5)]
    rows.append({"doc_id": 0, "filter": "none", "exact_match": 0.0})  # another filter's row is not this metric's
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = measure.per_item_scores(samples, "exact_match,strip")
    assert [d for d, _ in items] == [0, 1, 2, 3, 4, 5] and [s for _, s in items] == [1, 0, 0, 1, 0, 0]
    value, stderr = measure.mean_and_stderr([s for _, s in items])
    # lm-eval's mean_stderr: sample standard deviation (n - 1) / sqrt(n)
    assert value == pytest.approx(1 / 3) and stderr == pytest.approx((((2 * (2 / 3) ** 2 + 4 * (1 / 3) ** 2) / 5)
                                                                      ** 0.5) / 6 ** 0.5)
    assert measure.mean_and_stderr([1.0]) == (1.0, None)
    entry = measure.score_entry(1.0, 0.0, 25, 25, "h", "first 25", [1.0] * 25)
    assert entry["ci95"][0] < 0.9 and entry["ci95"][1] == 1.0  # a zero stderr gets the judge's Wilson interval
    assert entry["items"] == [1.0] * 25  # each item's score, by doc_id: the served run is paired with them


@pytest.mark.parametrize("args, message", [
    (["--model", "nope"], "no eval config"),
    (["--tasks", "tt_offline_mc,nope"], "unknown or not offline"),
    (["--batch-size", "0"], "--batch-size"),
])
def test_bad_input_is_exit_2_before_anything_is_built(args, message):
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr
