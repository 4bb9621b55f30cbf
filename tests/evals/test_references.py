"""evals/reference_scores.json: schema, provenance, and that it still describes the tasks in the checkout."""

from __future__ import annotations

import copy
import json

import pytest

from contracts.intervals import Z95
from evals import references
from evals.eval_config import EVAL_CONFIGS
from evals.offline_config import MODEL_NAME, SMOKE_LIMIT
from evals.references import ReferenceFileError, task_config_sha256, task_files, validate

DATA = references.load()
OFFLINE = [t for t in EVAL_CONFIGS[MODEL_NAME].tasks if t.offline]


def test_every_offline_task_has_served_and_in_process_scores_for_every_mode():
    inproc = DATA["models"][MODEL_NAME]["in_process"]["scores"]
    served = DATA["models"][MODEL_NAME]["served"]["scores"]
    for task in OFFLINE:
        assert set(served[task.task_name]) == set(inproc[task.task_name]) == {"smoke", "ci", "full"}
        assert task.score.in_process_scores["ci"].value == inproc[task.task_name]["ci"]["value"]


@pytest.mark.parametrize("task", OFFLINE, ids=lambda t: t.task_name)
def test_in_process_scores_cover_exactly_the_items_each_mode_runs(task):
    data = next(p for p in task_files(task.task_name) if p.suffix == ".jsonl")
    lines = sum(1 for line in data.read_text().splitlines() if line.strip())
    for mode, score in DATA["models"][MODEL_NAME]["in_process"]["scores"][task.task_name].items():
        limit = task.limit_for(mode)
        assert score["limit"] == limit and score["samples"] == (limit or lines)
        low, high = score["ci95"]
        assert low == pytest.approx(max(0.0, score["value"] - Z95 * score["stderr"]), abs=1e-5)
        assert high == pytest.approx(min(1.0, score["value"] + Z95 * score["stderr"]), abs=1e-5)
    assert task.limit_for("smoke") == SMOKE_LIMIT


@pytest.mark.parametrize("task", OFFLINE, ids=lambda t: t.task_name)
def test_the_in_process_reference_was_measured_on_the_tasks_as_they_are_now(task):
    """A changed YAML, data file or scorer needs a new measurement (scripts/measure_inprocess_reference.py)."""
    for score in DATA["models"][MODEL_NAME]["in_process"]["scores"][task.task_name].values():
        assert score["task_config_sha256"] == task_config_sha256(task.task_name)


def test_provenance_names_engine_versions_weights_cpu_date_and_command():
    prov = DATA["models"][MODEL_NAME]["in_process"]["provenance"]
    assert set(prov["versions"]) >= {"lm_eval", "torch", "transformers", "gguf"}
    assert prov["versions"]["lm_eval"] == "0.4.13" and "hf backend" in prov["engine"]
    assert len(prov["weights"]["checkpoint_sha256"]) == 64 and len(prov["weights"]["gguf_sha256"]) == 64
    assert prov["cpu"]["isa"] and prov["date"] and "measure_inprocess_reference.py" in prov["command"]
    assert set(prov["lm_eval_commands"]) == {t.task_name for t in OFFLINE}


def test_task_files_are_the_yaml_its_data_and_its_scorer():
    assert [p.name for p in task_files("tt_offline_chat")] == ["tt_offline_chat.yaml", "tt_offline_qa.jsonl",
                                                                "utils.py"]
    assert [p.name for p in task_files("tt_offline_mc")] == ["tt_offline_mc.yaml", "tt_offline_mc.jsonl"]


@pytest.mark.parametrize("breakage, message", [
    (lambda d: d["in_process"]["provenance"].pop("weights"), "lacks \\['weights'\\]"),
    (lambda d: d["in_process"]["scores"]["tt_offline_mc"]["ci"].pop("task_config_sha256"), "lacks"),
    (lambda d: d["in_process"]["scores"]["tt_offline_mc"]["ci"].update(ci95=[0.9, 1.0]), "around the value"),
    (lambda d: d["in_process"]["scores"]["tt_offline_mc"].update(nightly={}), "unknown in-process modes"),
    (lambda d: d["served"]["scores"]["tt_offline_mc"].update(ci=69.17), "fractions"),
])
def test_a_malformed_reference_file_is_refused_with_its_place(breakage, message):
    data = copy.deepcopy(DATA)
    breakage(data["models"][MODEL_NAME])
    with pytest.raises(ReferenceFileError, match=message):
        validate(data)


def test_the_file_round_trips_through_json():
    assert json.loads(references.REFERENCE_FILE.read_text()) == DATA
