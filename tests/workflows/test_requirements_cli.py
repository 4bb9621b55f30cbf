"""run.py's --requirements (alias --requirements-json) and --custom-weights: what a document fills in, what it
refuses (one line, exit 2, before anything starts), and the off-catalog spec synthesised from a base."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from contracts import REPO_ROOT
from contracts.model_spec import ModelStatus
from workflows.catalog import load_catalog
from workflows.cli import UsageError, parse_args, resolve_spec
from workflows.host_setup import find_weights

CATALOG = load_catalog()
EXAMPLE = REPO_ROOT / "examples" / "requirements" / "smollm2_cpu.yaml"


def test_a_document_fills_model_device_workflow_points_and_tasks() -> None:
    options = parse_args(["--requirements-json", str(EXAMPLE), "--server-url", "http://127.0.0.1:1"], CATALOG)
    assert options.model == "SmolLM2-135M-Instruct" and options.device.value == "cpu"
    assert options.workflow.value == "release"
    assert options.workflow_args["points"] == "128x32x1,128x32x4,512x32x2"
    assert options.workflow_args["tasks"] == "tt_offline_mc,tt_offline_qa"
    assert options.flags["requirements"] == str(EXAMPLE.resolve())


def test_points_the_user_gave_win_and_a_benchmarks_run_gets_no_tasks() -> None:
    options = parse_args(["--requirements", str(EXAMPLE), "--workflow", "benchmarks", "--workflow-args",
                          "points=128x32x1 mode=smoke", "--server-url", "http://127.0.0.1:1"], CATALOG)
    assert options.workflow_args["points"] == "128x32x1" and "tasks" not in options.workflow_args


def _write(tmp_path, doc: dict):
    path = tmp_path / "req.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_model_outside_the_catalog_needs_a_base(tmp_path) -> None:
    doc = {"schema_version": "2.0", "model": {"name": "acme/SmolLM2-ft"},
           "benchmarks": [{"isl": 8, "osl": 8, "targets": [{"metric": "ttft_ms", "max": 9}]}]}
    with pytest.raises(UsageError, match="not in the catalog: give model.base"):
        parse_args(["--requirements", str(_write(tmp_path, doc))], CATALOG)


def _weights(tmp_path):
    weights = tmp_path / "my-finetune"
    weights.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (weights / name).write_text("{}")
    return weights


def test_custom_weights_are_served_under_their_own_name_inheriting_the_base_spec(tmp_path) -> None:
    weights = _weights(tmp_path)
    options = parse_args(["--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "benchmarks",
                          "--custom-weights", str(weights), "--server-url", "http://127.0.0.1:1"], CATALOG)
    spec = resolve_spec(options, CATALOG)
    assert spec.served_model_name == "my-finetune" and "my-finetune" in spec.model_id
    assert spec.model_name == "SmolLM2-135M-Instruct"  # the base's eval config and tokenizer apply
    assert spec.status is ModelStatus.EXPERIMENTAL and not spec.device_model_spec.perf_reference
    assert spec.weights_source["kind"] == "local" and find_weights(spec, {}).weights_dir == weights.resolve()


def test_a_document_naming_local_weights_and_a_base_is_off_catalog(tmp_path) -> None:
    weights = _weights(tmp_path)
    doc = {"schema_version": "2.0", "model": {"name": "acme-ft", "weights": str(weights),
                                              "base": "SmolLM2-135M-Instruct"}, "device": "cpu",
           "benchmarks": [{"isl": 8, "osl": 8, "targets": [{"metric": "ttft_ms", "max": 9}]}]}
    options = parse_args(["--requirements", str(_write(tmp_path, doc)), "--server-url", "http://127.0.0.1:1"],
                         CATALOG)
    spec = resolve_spec(options, CATALOG)
    assert spec.served_model_name == "acme-ft" and spec.weights_source["path"] == str(weights.resolve())


def test_custom_weights_that_are_not_weights_are_refused(tmp_path) -> None:
    with pytest.raises(UsageError, match="is not a model weights directory"):
        parse_args(["--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "benchmarks",
                    "--custom-weights", str(tmp_path)], CATALOG)


def test_run_py_refuses_a_bad_document_in_one_line_with_exit_2(tmp_path) -> None:
    """The whole command (orchestrator venv, no server): the line names the key, exit 2, no traceback."""
    path = tmp_path / "bad.yaml"
    path.write_text('schema_version: "2.0"\nmodel: {name: SmolLM2-135M-Instruct}\nbenchmarks:\n'
                    '  - {isl: 128, osl: 32, targets: [{metric: ttft_ms, max: "500ms"}]}\n')
    done = subprocess.run([sys.executable, str(REPO_ROOT / "run.py"), "--requirements", str(path), "--server-url",
                           "http://127.0.0.1:1"], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 2, done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "wrong units" in lines[0] and "Traceback" not in done.stderr


def test_a_run_given_a_document_is_never_the_automatic_baseline_nor_compares_by_default(tmp_path) -> None:
    """It measured the document's points, not the spec's: ``last`` skips it (naming it still works), and a
    release given a document compares with a baseline only when asked (--compare-to)."""
    import shutil

    from history.baseline import unusable_reason
    from reports.comparison import settings_from
    from tests.helpers import model_spec

    run = tmp_path / "run"
    shutil.copytree(REPO_ROOT / "tests" / "reports" / "fixtures" / "benchmarks_only_run", run)
    assert unusable_reason(run, explicit=False) is None
    (run / "requirements.json").write_text("{}")
    assert "requirements document" in unusable_reason(run, explicit=False)
    assert unusable_reason(run, explicit=True) is None
    spec = model_spec()
    assert settings_from({"requirements": "/r.yaml"}, {}, spec, "release") is None
    assert settings_from({"requirements": "/r.yaml", "compare_to": "last"}, {}, spec, "release") is not None
