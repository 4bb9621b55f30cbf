"""The offline task set: data is reproducible, well-formed, and wired to YAMLs and configs."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evals.eval_config import EVAL_CONFIGS
from evals.offline_config import SMOKE_LIMIT

ROOT = Path(__file__).resolve().parents[2]

TASKS = ROOT / "evals" / "tasks"
# The lm-eval `!function utils.*` module, loaded under a private name so it cannot shadow any other `utils`.
_spec = importlib.util.spec_from_file_location("tt_offline_task_utils", TASKS / "utils.py")
utils = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(utils)


def _jsonl(name):
    return [json.loads(line) for line in (TASKS / name).read_text().splitlines()]


def test_committed_data_matches_generator():
    proc = subprocess.run(
        [sys.executable, str(TASKS / "make_data.py"), "--check"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_multiple_choice_items():
    items = _jsonl("tt_offline_mc.jsonl")
    assert 50 <= len(items) <= 200
    for it in items:
        assert 3 <= len(it["choices"]) <= 4 and len(set(it["choices"])) == len(it["choices"])
        assert 0 <= it["label"] < len(it["choices"])
    # the smoke subset (the first SMOKE_LIMIT items) mixes categories
    assert len({it["category"] for it in items[:SMOKE_LIMIT]}) >= 4


def test_short_answer_items():
    items = _jsonl("tt_offline_qa.jsonl")
    assert 50 <= len(items) <= 200
    assert len({it["question"] for it in items}) == len(items)
    for it in items:
        assert it["answer"] in it["aliases"]
        # `contains` would be meaningless if the question already held the answer
        assert not utils.contains_answer(it["question"], it["aliases"]), it


def test_yamls_point_at_data_and_match_configs():
    names = {t.task_name for t in EVAL_CONFIGS["SmolLM2-135M-Instruct"].tasks}
    found = set()
    for path in TASKS.glob("*.yaml"):
        text = path.read_text()
        task = re.search(r"^task: (\S+)$", text, re.MULTILINE).group(1)
        data = re.search(r"^\s+test: (\S+)$", text, re.MULTILINE).group(1)
        assert (TASKS / data).exists(), (path.name, data)
        found.add(task)
    assert found == names


@pytest.mark.parametrize(
    "reply, aliases, hit",
    [
        ("The capital of France is Paris.", ["Paris"], True),
        ("The answer is 12.", ["12", "twelve"], True),
        ("It is twelve.", ["12", "twelve"], True),
        ("The answer is 120.", ["12", "twelve"], False),
        ("I feel tired.", ["red"], False),
        ("The capital is Buenos Aires!", ["Buenos Aires"], True),
        ("", ["x"], False),
    ],
)
def test_contains_answer(reply, aliases, hit):
    assert utils.contains_answer(reply, aliases) is hit
    assert utils.process_contains({"answer": aliases[0], "aliases": aliases}, [reply]) == {"contains": float(hit)}
