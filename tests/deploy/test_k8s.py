"""Kubernetes manifests and the Helm chart rendered from catalog specs, validated offline."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from deploy.helm import render_chart
from deploy.k8s import DeployError, DeployOptions, render_manifests
from deploy.run_deploy import main as deploy_main
from deploy.run_deploy import validate
from workflows.catalog import load_catalog

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def _spec(catalog, model: str, device: str):
    matches = [s for s in catalog.specs.values()
               if s.model_name == model and s.device_type.value == device and s.device_model_spec.default_impl]
    assert matches, f"no default spec for {model} on {device}"
    return matches[0]


def _by_kind(objects: list[dict]) -> dict[str, dict]:
    return {o["kind"]: o for o in objects}


def test_every_catalog_spec_renders_valid_manifests(catalog):
    options = DeployOptions(hpa=True, client_image="example.org/client:1")
    failures = {sid: validate(render_manifests(spec, options)) for sid, spec in catalog.specs.items()}
    assert {sid: p for sid, p in failures.items() if p} == {}
    assert len(failures) == len(catalog.specs) > 50


def test_tenstorrent_spec_gets_boards_hugepages_and_secrets_by_reference(catalog):
    spec = _spec(catalog, "Llama-3.1-8B-Instruct", "t3k")
    objects = _by_kind(render_manifests(spec, DeployOptions(client_image="c:1")))
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    limits = container["resources"]["limits"]
    assert limits["tenstorrent.com/n300"] == 4          # a T3K is four n300 boards
    assert limits["hugepages-1Gi"] == "8Gi"              # one 1 GiB page per chip
    assert container["resources"]["requests"]["hugepages-1Gi"] == "8Gi"
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert container["image"] == spec.docker_image
    env = {e["name"]: e for e in container["env"]}
    assert env["MESH_DEVICE"]["value"] == "T3K"
    assert env["VLLM_API_KEY"]["valueFrom"]["secretKeyRef"]["key"] == "VLLM_API_KEY"
    assert "value" not in env["VLLM_API_KEY"] and "value" not in env["HF_TOKEN"]
    served = json.loads(objects["ConfigMap"]["data"]["model_spec.json"])
    assert served["model_id"] == spec.model_id
    job = objects["Job"]["spec"]["template"]["spec"]["containers"][0]
    assert "--server-url" in job["command"]
    assert job["command"][job["command"].index("--server-url") + 1].startswith(
        f"http://{objects['Service']['metadata']['name']}.default.svc")


def test_hostpath_devices_and_autoscaler(catalog):
    spec = _spec(catalog, "Llama-3.1-8B-Instruct", "n150")
    objects = _by_kind(render_manifests(spec, DeployOptions(tt_devices="hostpath", hpa=True, job="none",
                                                             client_image="c:1")))
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    assert {"name": "tenstorrent", "hostPath": {"path": "/dev/tenstorrent", "type": "Directory"}} in pod["volumes"]
    assert not any(k.startswith("tenstorrent.com/") for k in pod["containers"][0]["resources"]["limits"])
    assert "Job" not in objects
    hpa = objects["HorizontalPodAutoscaler"]["spec"]
    assert hpa["metrics"][0]["pods"]["metric"]["name"] == "vllm_num_requests_waiting"
    assert validate(list(objects.values())) == []


def test_cpu_and_gpu_specs_ask_for_no_tenstorrent_resources(catalog):
    cpu = _by_kind(render_manifests(_spec(catalog, "SmolLM2-135M-Instruct", "cpu"), DeployOptions(client_image="c")))
    limits = cpu["Deployment"]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert set(limits) == {"memory"}
    gpu_specs = [s for s in catalog.specs.values() if s.device_type.value == "gpu"]
    gpu = _by_kind(render_manifests(gpu_specs[0], DeployOptions(client_image="c")))
    assert gpu["Deployment"]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1


def test_validation_catches_a_broken_object(catalog):
    objects = render_manifests(_spec(catalog, "SmolLM2-135M-Instruct", "cpu"), DeployOptions(client_image="c"))
    objects[2]["spec"]["replicas"] = "two"
    problems = validate(objects)
    assert len(problems) == 1 and "Deployment" in problems[0] and "replicas" in problems[0]


# ----------------------------------------------------------------------------- Helm chart

_VALUE = re.compile(r"\{\{ \.Values\.([A-Za-z.]+)( \| quote)? \}\}")
_IF_BLOCK = re.compile(r"\{\{- if \.Values\.([A-Za-z.]+) \}\}\n(.*?)\{\{- end \}\}\n", re.S)


def helm_template(chart: dict[str, str], values: dict, namespace: str) -> list[dict]:
    """The subset of `helm template` this chart uses: values, quote, Release.Namespace, if-blocks."""
    def lookup(path: str):
        node = values
        for part in path.split("."):
            node = node[part]
        return node

    objects = []
    for rel, text in sorted(chart.items()):
        if not rel.startswith("templates/") or not rel.endswith(".yaml"):
            continue
        text = _IF_BLOCK.sub(lambda m: m.group(2) if lookup(m.group(1)) else "", text)
        text = text.replace("{{ .Release.Namespace }}", namespace)
        text = _VALUE.sub(lambda m: json.dumps(str(lookup(m.group(1)))) if m.group(2) else str(lookup(m.group(1))),
                          text)
        assert "{{" not in text, f"{rel}: template syntax this test does not render"
        objects += [o for o in yaml.safe_load_all(text) if o]
    return objects


@pytest.mark.parametrize("options", [DeployOptions(client_image="c:1"),
                                     DeployOptions(replicas=2, hpa=True, job="evals", client_image="c:2"),
                                     DeployOptions(job="none", client_image="c:3", namespace="ml")])
def test_chart_with_default_values_gives_the_plain_manifests(catalog, options):
    spec = _spec(catalog, "Llama-3.1-8B-Instruct", "galaxy")
    chart = render_chart(spec, options)
    values = yaml.safe_load(chart["values.yaml"])
    rendered = helm_template(chart, values, options.namespace)
    plain = render_manifests(spec, options)
    key = lambda o: o["kind"]  # noqa: E731
    assert sorted(rendered, key=key) == sorted(plain, key=key)
    assert yaml.safe_load(chart["Chart.yaml"])["appVersion"] == spec.version


# ----------------------------------------------------------------------------- the workflow entry


def test_entry_writes_valid_manifests_chart_and_readme(catalog, tmp_path):
    spec = _spec(catalog, "Llama-3.1-8B-Instruct", "t3k")
    spec_path = spec.write(tmp_path / "model_spec.json")
    code = subprocess.call([sys.executable, "-m", "deploy.run_deploy", "--run-dir", str(tmp_path),
                            "--model-spec-json", str(spec_path), "--workflow-args-json",
                            json.dumps({"target": "k8s", "hpa": "true"})], cwd=REPO_ROOT)
    assert code == 0
    outputs = json.loads((tmp_path / "deploy" / "outputs.json").read_text())["outputs"]
    assert "deploy/k8s/all.yaml" in outputs and "deploy/README.txt" in outputs
    kinds = [d["kind"] for d in yaml.safe_load_all((tmp_path / "deploy" / "k8s" / "all.yaml").read_text())]
    assert kinds == ["ConfigMap", "PersistentVolumeClaim", "Deployment", "Service", "HorizontalPodAutoscaler", "Job"]
    assert any(p.startswith("deploy/helm/") and p.endswith("Chart.yaml") for p in outputs)
    assert "create secret generic" in (tmp_path / "deploy" / "README.txt").read_text()


@pytest.mark.parametrize("args, message", [({"target": "swarm"}, "target="), ({"replicas": "0"}, "replicas=0"),
                                           ({"tt_devices": "magic"}, "tt_devices="), ({"colour": "red"}, "colour")])
def test_bad_workflow_args_exit_2_with_one_line(catalog, tmp_path, capsys, args, message):
    spec_path = _spec(catalog, "SmolLM2-135M-Instruct", "cpu").write(tmp_path / "model_spec.json")
    code = deploy_main(["--run-dir", str(tmp_path), "--model-spec-json", str(spec_path),
                        "--workflow-args-json", json.dumps(args)])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "deploy").exists()


def test_options_reject_non_numbers():
    with pytest.raises(DeployError, match="hpa_target"):
        DeployOptions.from_workflow_args({"hpa_target": "lots"}, client_image="c")


def test_run_py_deploy_renders_into_the_run_directory_without_a_server(tmp_path):
    """The workflow through run.py: no host checks (a t3k spec on a CPU host), no server, exit 0."""
    out = tmp_path / "run"
    result = subprocess.run([sys.executable, str(REPO_ROOT / "run.py"), "--model", "Llama-3.1-8B-Instruct",
                             "--device", "t3k", "--workflow", "deploy", "--workflow-args", "target=k8s hpa=true",
                             "--output-dir", str(out)], capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert [s["name"] for s in manifest["steps"]] == ["resolve_spec", "prepare_venvs", "deploy", "teardown"]
    deploy_step = manifest["steps"][2]
    assert "deploy/k8s/all.yaml" in deploy_step["outputs"]
    assert validate(list(yaml.safe_load_all((out / "deploy" / "k8s" / "all.yaml").read_text()))) == []


def test_run_py_deploy_rejects_an_unknown_key_before_doing_anything(tmp_path):
    result = subprocess.run([sys.executable, str(REPO_ROOT / "run.py"), "--model", "Llama-3.1-8B-Instruct",
                             "--device", "t3k", "--workflow", "deploy", "--workflow-args", "replica=3",
                             "--output-dir", str(tmp_path / "run")], capture_output=True, text=True, timeout=300,
                            cwd=REPO_ROOT)
    assert result.returncode == 2
    assert "replica" in result.stderr + result.stdout
    assert not (tmp_path / "run" / "deploy").exists()


def test_media_specs_read_the_media_servers_api_key(catalog):
    media = [s for s in catalog.specs.values() if s.engine.value == "media"]
    assert media, "the catalog has media specs"
    objects = _by_kind(render_manifests(media[0], DeployOptions(client_image="c")))
    env = {e["name"]: e for e in objects["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["API_KEY"]["valueFrom"]["secretKeyRef"]["optional"] is False and "VLLM_API_KEY" not in env
    job_env = objects["Job"]["spec"]["template"]["spec"]["containers"][0]["env"][0]
    assert job_env["valueFrom"]["secretKeyRef"]["key"] == "API_KEY"
