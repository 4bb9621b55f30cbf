"""One host, one host class: the fingerprint names the engine that served the run, not the venvs that
happened to exist when run.py started.

Runs are recorded the way run.py records them (``workflows.main.host_environment`` when the run starts,
``workflows.engine_env.record_engine_packages`` when its server starts) under a private venvs root with
fake dist-info directories, then read back through the report builder (manifest -> report record) as the
history store does."""
from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from contracts.model_spec import ModelSpec
from history.fingerprint import (NOT_RECORDED, differences_before_start, fingerprint, host_facts_of,
                                 host_facts_of_environment)
from reports import build_report
from workflows.engine_env import engine_block, installed_packages, record_engine_packages
from workflows.main import host_environment

FIXTURE = Path(__file__).resolve().parent.parent / "reports" / "fixtures" / "benchmarks_only_run"


@pytest.fixture
def spec() -> ModelSpec:
    return ModelSpec.read(FIXTURE / "model_spec.json")


@pytest.fixture
def venvs(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "venvs"
    monkeypatch.setenv("TT_WORKFLOW_VENVS_DIR", str(root))
    monkeypatch.delenv("TT_ENGINE_PYTHON", raising=False)
    return root


def build_engine_venv(root: Path, vllm: str = "0.32.0") -> None:
    """The engine-vllm-cpu venv as uv leaves it: dist-info directories in its site-packages."""
    site = root / "engine-vllm-cpu" / "lib" / "python3.11" / "site-packages"
    for dist in (f"vllm_cpu-{vllm}", "torch-2.13.0+cpu", "transformers-5.23.0", "gguf-0.17.1"):
        (site / f"{dist}.dist-info").mkdir(parents=True)


def recorded(spec: ModelSpec, mode: str, tmp_path: Path, name: str) -> dict:
    """A run's manifest environment block, as run.py leaves it once its server started."""
    environment = host_environment(spec, mode)
    record_engine_packages(environment, spec)
    run = tmp_path / name
    shutil.copytree(FIXTURE, run)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["environment"] = environment
    (run / "manifest.json").write_text(json.dumps(manifest))
    return host_facts_of(build_report(run))


def test_runs_before_and_after_the_engine_venv_exists_share_one_fingerprint(spec, venvs, tmp_path) -> None:
    before = host_environment(spec, "local")  # a fresh clone: no engine venv when run.py starts
    assert before["engine"] == {"server": "local", "name": "engine-vllm-cpu", "packages": None}
    build_engine_venv(venvs)                  # prepare_venvs builds it before the server starts
    assert record_engine_packages(before, spec) == \
        "engine engine-vllm-cpu: torch 2.13.0+cpu, transformers 5.23.0, vllm-cpu 0.32.0"
    after = host_environment(spec, "local")   # the next release: the venv was there from the start
    record_engine_packages(after, spec)
    assert fingerprint(host_facts_of_environment(before)) == fingerprint(host_facts_of_environment(after))
    facts = host_facts_of_environment(after)
    assert facts["engine"] == "local engine-vllm-cpu" and facts["package vllm-cpu"] == "0.32.0"
    assert record_engine_packages(after, spec) is None  # read once: a resumed run keeps what it read


def test_another_engine_version_is_another_class_and_an_external_server_is_always_one(spec, venvs,
                                                                                        tmp_path) -> None:
    external_fresh = recorded(spec, "external", tmp_path, "ext-fresh")  # no venv at all
    build_engine_venv(venvs)
    local = recorded(spec, "local", tmp_path, "local")
    external_later = recorded(spec, "external", tmp_path, "ext-later")  # the engine venv exists now
    assert external_fresh == external_later and external_fresh["engine"] == "external"
    assert not any(k.startswith("package ") for k in external_later)  # a stub never "ran" vllm-cpu
    assert fingerprint(external_later) != fingerprint(local)
    shutil.rmtree(venvs / "engine-vllm-cpu")
    build_engine_venv(venvs, vllm="0.33.0")
    upgraded = recorded(spec, "local", tmp_path, "upgraded")
    assert fingerprint(upgraded) != fingerprint(local)
    assert {k: (local[k], upgraded[k]) for k in local if local[k] != upgraded[k]} == {
        "package vllm-cpu": ("0.32.0", "0.33.0")}


def test_docker_names_the_image_without_its_version_tag(spec) -> None:
    a = copy.deepcopy(spec)
    a.docker_image = "ghcr.io/tt/vllm-cpu:0.1.0-abc"
    b = copy.deepcopy(spec)
    b.docker_image = "ghcr.io/tt/vllm-cpu:0.1.1-abc"
    assert engine_block(a, "docker") == engine_block(b, "docker") == {
        "server": "docker", "name": "ghcr.io/tt/vllm-cpu", "packages": {}}


def test_a_run_that_never_started_its_server_says_so_and_the_pre_run_check_ignores_packages(spec, venvs) -> None:
    pending = host_facts_of_environment(host_environment(spec, "local"))
    assert pending["engine packages"] == NOT_RECORDED
    build_engine_venv(venvs)
    done = host_environment(spec, "local")
    record_engine_packages(done, spec)
    theirs = host_facts_of_environment(done)
    assert differences_before_start(pending, theirs) == []      # the report's comparison decides later
    assert differences_before_start(dict(pending, cores=-1), theirs) == [f"cores: -1 (baseline {theirs['cores']})"]
    assert differences_before_start(theirs, dict(theirs, **{"package torch": "2.0"})) == [
        "package torch: 2.13.0+cpu (baseline 2.0)"]


def test_old_records_keep_their_fingerprint() -> None:
    """A run recorded before runs named their engine: the ENGINE_PACKAGES among its packages, as before."""
    record = build_report(FIXTURE)
    assert record.metadata.environment.engine is None
    facts = host_facts_of(record)
    assert "engine" not in facts and facts["package vllm"] == "0.9.2"


def test_the_engine_python_override_reads_its_own_prefix(spec, tmp_path, monkeypatch) -> None:
    prefix = tmp_path / "my-vllm"
    (prefix / "lib" / "python3.12" / "site-packages" / "vllm-0.40.0.dist-info").mkdir(parents=True)
    monkeypatch.setenv("TT_ENGINE_PYTHON", str(prefix / "bin" / "python"))
    environment = host_environment(spec, "local")
    record_engine_packages(environment, spec)
    assert environment["engine"] == {"server": "local", "name": "TT_ENGINE_PYTHON", "packages": {"vllm": "0.40.0"}}
    assert installed_packages(tmp_path / "nowhere") == {}
