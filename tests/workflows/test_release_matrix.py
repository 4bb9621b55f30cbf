"""The release matrix: tiers from the catalog, NOT RUN with reasons, the support table, the k8s executor,
and one tier end to end through scripts/release_matrix.py against the shipped stub server (a named fake
engine behind --local-server)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contracts import REPO_ROOT
from workflows.catalog import load_catalog
from workflows.release_matrix import EntryResult, load_matrix, tier_specs, why_not_here
from workflows.support_table import row_of, spec_decisions, write_outputs

RELEASE_RUN = REPO_ROOT / "tests" / "reports" / "fixtures" / "release_run"
MODEL = "SmolLM2-135M-Instruct"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture(scope="module")
def matrix():
    return load_matrix()


def test_the_cpu_tier_holds_every_cpu_spec_of_the_catalog(catalog, matrix) -> None:
    cpu = {s.model_id for s in tier_specs(matrix.tiers["cpu"], catalog)}
    assert cpu == {sid for sid, s in catalog.specs.items() if s.device_type.value == "cpu"}
    nightly = tier_specs(matrix.tiers["nightly"], catalog)
    assert nightly and all(s.status.name != "EXPERIMENTAL" and s.device_model_spec.default_impl for s in nightly)
    assert matrix.required_for("cpu") == ("cpu",) and matrix.required_for("n150") == ("nightly", "release")


def test_what_this_host_cannot_run_says_why(catalog, tmp_path) -> None:
    env = {"HF_HOME": str(tmp_path / "empty-hf"), "CACHE_ROOT": str(tmp_path)}
    tt = next(s for s in catalog.specs.values() if s.device_type.value == "n150")
    if not Path("/dev/tenstorrent").exists():
        assert "Tenstorrent n150" in why_not_here(tt, env)
    hub = catalog.specs["id_vllm-cpu_Llama-3.2-1B-Instruct_cpu"]
    assert "hub-only" in why_not_here(hub, env)
    packaged = next(s for s in catalog.specs.values() if s.model_name == MODEL and s.impl.impl_name == "vllm-cpu")
    assert why_not_here(packaged, env) is None  # run.py converts the packaged weights itself


def test_a_server_hub_model_runs_here_only_from_the_hf_cache(catalog, tmp_path) -> None:
    """The media server downloads a missing model by default, but run.py starts it offline: under run.py
    only the HF cache counts, whatever AUTO_DOWNLOAD_MODELS says, and the line says so."""
    from workflows.servers.base import ServerLaunch
    from workflows.servers.local import build_env

    spec = next(s for s in catalog.specs.values() if s.hf_model_repo == "BAAI/bge-m3" and s.device_type.value == "cpu")
    assert spec.weights_source["kind"] == "server_hub"
    launch = ServerLaunch(spec=spec, spec_json_path=tmp_path / "model_spec.json", run_dir=tmp_path, service_port=8123)
    asked = {"AUTO_DOWNLOAD_MODELS": "1", "HF_HUB_OFFLINE": "0", "PATH": "/usr/bin"}
    assert build_env(launch, asked)["HF_HUB_OFFLINE"] == "1"  # what the rule below rests on
    for download in ("1", "0", None):
        env = {"HF_HOME": str(tmp_path / "empty-hf"), **({"AUTO_DOWNLOAD_MODELS": download} if download else {})}
        line = why_not_here(spec, env)
        assert line is not None and "not in this host's Hugging Face cache" in line, line
        assert "run.py starts the media server offline" in line and "download_models.py BAAI/bge-m3" in line, line
    snapshot = tmp_path / "hf" / "hub" / "models--BAAI--bge-m3" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (snapshot / name).write_text("{}")
    assert why_not_here(spec, {"HF_HOME": str(tmp_path / "hf"), "AUTO_DOWNLOAD_MODELS": "0"}) is None


def test_support_rows_and_status_decisions(catalog, matrix, tmp_path) -> None:
    tier = matrix.tiers["cpu"]
    specs = tier_specs(tier, catalog)
    smol = next(s for s in specs if s.model_name == MODEL and s.impl.impl_name == "vllm-cpu")
    hub = next(s for s in specs if s.model_name == "Llama-3.2-1B-Instruct" and s.impl.impl_name == "vllm-cpu")
    import shutil

    from reports import build_report, write_reports

    release = tmp_path / "release"
    shutil.copytree(RELEASE_RUN, release)
    write_reports(build_report(release), release)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text(json.dumps({"steps": [
        {"name": "start_server", "status": "failed", "detail": "port 8000 is in use"}]}))
    results = [EntryResult(smol, run_dir=release, exit_code=0), EntryResult(hub, not_run="weights not here"),
               EntryResult(smol, run_dir=broken, exit_code=1)]
    rows = write_outputs(tmp_path / "out", matrix, tier, results, "test host", interrupted=False)
    assert [r.verdict for r in rows][1:] == ["NOT RUN", "FAIL"]
    assert rows[1].reason == "weights not here"
    assert "step start_server failed: port 8000 is in use" in rows[2].reason
    assert rows[0].run_id and rows[0].figures != "no figures"
    table = (tmp_path / "out" / "model_support.md").read_text()
    assert table.count(f"| {MODEL} | cpu | vllm-cpu |") == 2 and "NOT RUN: weights not here" in table
    doc = json.loads((tmp_path / "out" / "release_specs.json").read_text())
    decisions = [s["decision"] for s in doc["specs"]]
    assert decisions[1] == "unverified" and decisions[2] == "demote"
    assert doc["specs"][2]["status"] == "FUNCTIONAL"  # COMPLETE failed: one status down
    pass_row = rows[0]
    pass_row.verdict, pass_row.status, pass_row.measured_status = "PASS", "FUNCTIONAL", "COMPLETE"
    assert spec_decisions(matrix, tier, [pass_row])[0]["decision"] == "promote"
    assert row_of(EntryResult(smol, not_run="x")).verdict == "NOT RUN"


def test_k8s_executor_renders_one_valid_job_per_entry_and_a_collector(catalog, matrix, tmp_path) -> None:
    from workflows.matrix_k8s import RESULTS_CLAIM, render_tier, write_tier

    tier = matrix.tiers["cpu"]
    specs = tier_specs(tier, catalog)
    rendered, problems = render_tier(tier, specs, list(catalog.specs.values()), namespace="ci", mode="smoke")
    assert problems == []
    entries = {k: v for k, v in rendered.items() if k != "collector"}
    assert len(entries) == len(specs)
    names = [(o["kind"], o["metadata"]["name"]) for objs in rendered.values() for o in objs]
    assert len(names) == len(set(names)), "two entries share an object"
    for entry, objects in entries.items():
        job = next(o for o in objects if o["kind"] == "Job")
        pod = job["spec"]["template"]["spec"]
        assert pod["volumes"] == [{"name": "results", "persistentVolumeClaim": {"claimName": RESULTS_CLAIM}}]
        command = pod["containers"][0]["command"]
        assert command[command.index("--workflow") + 1] == "release" and f"/results/{entry}" in command
        assert {o["kind"] for o in objects} >= {"Deployment", "Service", "Job"}
    collector = rendered["collector"]
    assert [o["kind"] for o in collector] == ["PersistentVolumeClaim", "ServiceAccount", "Role", "RoleBinding", "Job"]
    written = write_tier(tmp_path, rendered, tier, "ci")
    assert (tmp_path / "k8s" / "all.yaml") in written


def test_the_real_kubectl_reads_every_object_of_the_tier(catalog, matrix, k8s_tools, tmp_path) -> None:
    """kubectl's own decoder over the file a user applies (offline: ``--local``, no cluster): every object
    the executor wrote, in order, with its kind, name and namespace; a document without a kind fails it."""
    import yaml

    from workflows.matrix_k8s import render_tier, write_tier

    tier = matrix.tiers["cpu"]
    rendered, problems = render_tier(tier, tier_specs(tier, catalog), list(catalog.specs.values()), namespace="ci",
                                     mode="smoke")
    assert problems == []
    all_yaml = tmp_path / "k8s" / "all.yaml"
    assert all_yaml in write_tier(tmp_path, rendered, tier, "ci")
    ours = [o for o in yaml.safe_load_all(all_yaml.read_text()) if o]

    def kubectl_reads(path: Path) -> subprocess.CompletedProcess:
        return subprocess.run([k8s_tools.kubectl, "label", "--local", "-f", str(path), "tt-checked=1", "-o", "json"],
                              capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin",
                                                                                "HOME": str(tmp_path)})

    done = kubectl_reads(all_yaml)
    assert done.returncode == 0, done.stderr
    decoder, text, read = json.JSONDecoder(), done.stdout.strip(), []
    while text:  # one JSON document per object, back to back
        obj, end = decoder.raw_decode(text)
        read.append(obj)
        text = text[end:].strip()
    key = lambda o: (o["apiVersion"], o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))  # noqa: E731
    assert [key(o) for o in read] == [key(o) for o in ours]
    assert all(o["metadata"]["labels"]["tt-checked"] == "1" for o in read)
    broken = tmp_path / "broken.yaml"
    broken.write_text(all_yaml.read_text() + "\n---\napiVersion: batch/v1\nmetadata: {name: no-kind}\n")
    refused = kubectl_reads(broken)
    assert refused.returncode != 0 and "Kind" in refused.stderr, refused.stderr


@pytest.mark.slow
def test_a_tier_end_to_end_against_the_stub_engine(tmp_path) -> None:
    """One spec, the benchmarks workflow in smoke mode, twice: the table has its PASS row, and the
    second run's row compares with the first (the run history is a private SQLite file)."""
    engine = tmp_path / "fake_engine.sh"
    engine.write_text(f"#!/bin/sh\ncd {REPO_ROOT}\nexec {sys.executable} -m benchmarking.stub_server --port "
                      f"$SERVICE_PORT --ttft-ms 20 --itl-ms 5 --model {MODEL}\n")
    engine.chmod(0o755)
    matrix_file = tmp_path / "matrix.yaml"
    matrix_file.write_text(
        "schema: tt-release-matrix/1\ntiers:\n  stub:\n    description: the stub engine\n    devices: [cpu]\n"
        f"    statuses: [COMPLETE]\n    models: [{MODEL}]\n    impls: [vllm-cpu]\n    workflow: benchmarks\n"
        "    mode: smoke\npromotion:\n  required_tiers:\n    cpu: [stub]\n")
    env = dict(os.environ, TT_ENGINE_PYTHON=str(engine), TT_HISTORY_URL=f"sqlite:///{tmp_path / 'h.sqlite3'}",
               CACHE_ROOT=str(tmp_path / "cache_root"))  # the run directories go there, not into the repository
    env.pop("TT_INFERENCE_ORCHESTRATOR", None)
    for attempt in ("first", "second"):
        done = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "release_matrix.py"), "--matrix",
                               str(matrix_file), "--tier", "stub", "--workflow-args",
                               # the same stub twice: any change is the shared machine's load, shown, not judged
                               "mode=smoke on_regression=warn",
                               "--out", str(tmp_path / attempt)] + (["--compare-to", "last"] if attempt == "second"
                                                                    else []),
                              capture_output=True, text=True, timeout=600, cwd=REPO_ROOT, env=env)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    table = (tmp_path / "second" / "model_support.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith(f"| {MODEL} |"))
    assert "| PASS |" in row and "vs " in row, row
    specs = json.loads((tmp_path / "second" / "release_specs.json").read_text())["specs"]
    # the stub meets even the target tier: PASS on the one required tier promotes the COMPLETE spec
    assert [(s["verdict"], s["decision"], s["status"]) for s in specs] == [("PASS", "promote", "TOP_PERF")]


@pytest.mark.parametrize("args, message", [
    ("on_regression=maybe", "on_regression='maybe' is not one of: fail, warn"),
    ("compare_hosts=all", "compare_hosts='all' is not one of: same, any"),
    ("regression_tolerance=5", "regression_tolerance='5' is not a share"),
])
def test_comparison_settings_are_checked_up_front(args, message) -> None:
    from contracts.workflow_args import WorkflowArgsError, WorkflowType, parse_workflow_args, validate_workflow_args

    with pytest.raises(WorkflowArgsError, match=message):
        validate_workflow_args(WorkflowType.BENCHMARKS, parse_workflow_args(args))
    validate_workflow_args(WorkflowType.RELEASE, parse_workflow_args("on_regression=warn regression_tolerance=0.1"))


def test_the_collector_builds_the_table_from_the_run_directories_a_cluster_wrote(catalog, matrix, tmp_path) -> None:
    """``--collect RUNS``: a run directory named after its entry's Job is that entry's row; an entry
    without one is NOT RUN with the reason."""
    import shutil

    from reports import build_report, write_reports
    from workflows.matrix_k8s import entry_job_name, entry_options

    tier = matrix.tiers["cpu"]
    smol = next(s for s in tier_specs(tier, catalog) if s.model_name == MODEL and s.impl.impl_name == "vllm-cpu")
    runs = tmp_path / "results"
    run_dir = runs / entry_job_name(smol, entry_options(smol, tier, "default", "", "smoke",
                                                        list(catalog.specs.values())))
    shutil.copytree(RELEASE_RUN, run_dir)
    write_reports(build_report(run_dir), run_dir)
    env = {k: v for k, v in os.environ.items() if k != "TT_INFERENCE_ORCHESTRATOR"}
    done = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "release_matrix.py"), "--tier", "cpu",
                           "--collect", str(runs), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600, cwd=REPO_ROOT, env=env)
    table = (tmp_path / "out" / "model_support.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| Model")]
    assert len(rows) == len(tier_specs(tier, catalog)), done.stdout[-2000:]
    smol_row = next(r for r in rows if r.startswith(f"| {MODEL} | cpu | vllm-cpu |"))
    assert "NOT RUN" not in smol_row and "2026-01-10" in smol_row
    assert sum("NOT RUN: no run directory" in r for r in rows) == len(rows) - 1
    assert done.returncode in (0, 3, 4), done.stderr[-2000:]
