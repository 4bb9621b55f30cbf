"""``release_matrix.py --executor k8s``: the tier as Kubernetes objects, for a cluster to run.

Per matrix entry, the deploy workflow's own manifests (``deploy.k8s.render_manifests``: the spec's
ConfigMap, weights claim, server Deployment and Service, and the client Job running ``run.py
--server-url`` against that Service), with the Job running the tier's workflow and writing its run
directory to one shared claim. Then a collector: a Job that waits until no entry Job is active,
re-indexes every run directory into the run history (``run.py --workflow reports --output-dir``;
``TT_HISTORY_URL`` from the ``tt-release-history`` Secret, optional) and writes the support table
(``release_matrix.py --collect``) next to them. Every object is validated offline against the
Kubernetes schemas, like the deploy workflow's.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from contracts.model_spec import ModelSpec, project_version
from deploy.k8s import DeployOptions, object_names, render_manifests
from deploy.run_deploy import KUBERNETES_VERSION, default_client_image, validate
from workflows.release_matrix import Tier

RESULTS_CLAIM = "tt-release-runs"
COLLECTOR = "tt-release-collector"
KUBECTL_IMAGE = "docker.io/bitnami/kubectl:1.33"
TIER_LABEL = "tt-inference-server/tier"
#: How long the collector waits for the entry Jobs (a weekly tier runs for hours).
COLLECT_DEADLINE_S = 48 * 3600


def entry_options(spec: ModelSpec, tier: Tier, namespace: str, client_image: str, mode: str,
                  catalog_specs: list[ModelSpec]) -> DeployOptions:
    """The deploy options of one entry; non-default impls get their impl in their names, so two impls
    of one model on one device do not share objects."""
    twins = [s for s in catalog_specs if (s.model_name, s.device_type) == (spec.model_name, spec.device_type)]
    suffix = "" if len(twins) < 2 or spec.device_model_spec.default_impl else "-" + "".join(
        c if c.isalnum() else "-" for c in spec.impl.impl_name.lower())
    return DeployOptions(namespace=namespace, job=tier.workflow, job_mode=mode, client_image=client_image,
                         extra_labels={TIER_LABEL: tier.name}, name_suffix=suffix, results_claim=RESULTS_CLAIM)


def entry_job_name(spec: ModelSpec, options: DeployOptions) -> str:
    """The entry's Job name, which is also its run directory's name on the results claim."""
    return object_names(spec, options)["job"]


def shared_objects(tier: Tier, namespace: str, client_image: str, storage_class: str) -> list[dict[str, Any]]:
    """The results claim, the collector's service account and its permission to watch Jobs, the collector."""
    meta = lambda name: {"name": name, "namespace": namespace,  # noqa: E731
                         "labels": {"app.kubernetes.io/part-of": "tt-inference-server", TIER_LABEL: tier.name}}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta(RESULTS_CLAIM),
             "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "50Gi"}}}}
    if storage_class:
        claim["spec"]["storageClassName"] = storage_class
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(COLLECTOR)}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(COLLECTOR),
            "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(COLLECTOR),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": COLLECTOR},
               "subjects": [{"kind": "ServiceAccount", "name": COLLECTOR, "namespace": namespace}]}
    wait = (f"while [ -n \"$(kubectl -n {namespace} get jobs -l {TIER_LABEL}={tier.name},"
            f"app.kubernetes.io/name -o jsonpath='{{.items[?(@.status.active)].metadata.name}}')\" ]; "
            f"do echo waiting for the entry jobs; sleep 60; done")
    collect = (f"for d in /results/*/; do [ -f \"$d/manifest.json\" ] && python3 run.py --workflow reports "
               f"--output-dir \"$d\" --ignore-verdict; done; python3 scripts/release_matrix.py --tier {tier.name} "
               f"--collect /results --namespace {namespace} --out /results/matrix")
    volume = {"name": "results", "persistentVolumeClaim": {"claimName": RESULTS_CLAIM}}
    collector = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(COLLECTOR),
                 "spec": {"backoffLimit": 0, "activeDeadlineSeconds": COLLECT_DEADLINE_S,
                          "template": {"metadata": {"labels": {TIER_LABEL + "-collector": tier.name}}, "spec": {
                              "serviceAccountName": COLLECTOR, "restartPolicy": "Never",
                              "initContainers": [{"name": "wait-for-entries", "image": KUBECTL_IMAGE,
                                                  "command": ["sh", "-c", wait]}],
                              "containers": [{"name": "collect", "image": client_image,
                                              "command": ["sh", "-c", collect],
                                              "env": [{"name": "TT_HISTORY_URL", "valueFrom": {"secretKeyRef": {
                                                  "name": "tt-release-history", "key": "TT_HISTORY_URL",
                                                  "optional": True}}}],
                                              "volumeMounts": [{"name": "results", "mountPath": "/results"}]}],
                              "volumes": [volume]}}}}
    return [claim, account, role, binding, collector]


def render_tier(tier: Tier, specs: list[ModelSpec], catalog_specs: list[ModelSpec], *, namespace: str,
                mode: str, client_image: str = "", storage_class: str = "") -> tuple[dict[str, list[dict]], list[str]]:
    """Entry name -> its objects (plus ``collector`` -> the shared objects), and every schema problem."""
    image = client_image or default_client_image()
    out: dict[str, list[dict]] = {}
    for spec in specs:
        options = entry_options(spec, tier, namespace, image, mode, catalog_specs)
        out[entry_job_name(spec, options)] = render_manifests(spec, options)
    out["collector"] = shared_objects(tier, namespace, image, storage_class)
    problems = [p for objects in out.values() for p in validate(objects)]
    return out, problems


def write_tier(out_dir: Path, rendered: dict[str, list[dict]], tier: Tier, namespace: str) -> list[Path]:
    import yaml

    written = []
    every = []
    for entry, objects in rendered.items():
        folder = out_dir / "k8s" / entry
        folder.mkdir(parents=True, exist_ok=True)
        for i, obj in enumerate(objects):
            path = folder / f"{i:02d}-{obj['kind'].lower()}.yaml"
            path.write_text(yaml.safe_dump(obj, sort_keys=False), encoding="utf-8")
            written.append(path)
        every += objects
    shared = rendered.get("collector", [])
    ordered = shared[:-1] + [o for e, objs in rendered.items() if e != "collector" for o in objs] + shared[-1:]
    all_path = out_dir / "k8s" / "all.yaml"
    all_path.write_text(yaml.safe_dump_all(ordered, sort_keys=False), encoding="utf-8")
    readme = out_dir / "k8s" / "README.txt"
    readme.write_text(
        f"Tier {tier.name} ({len(rendered) - 1} entries), tt-inference-server {project_version()}: objects validated "
        f"against Kubernetes {KUBERNETES_VERSION}.\n\n"
        f"1. Create each entry's Secret (see deploy/README of the deploy workflow: kubectl -n {namespace} create "
        f"secret generic <entry>-secrets ...), and optionally the run history's:\n"
        f"   kubectl -n {namespace} create secret generic tt-release-history "
        f"--from-literal=TT_HISTORY_URL=\"$TT_HISTORY_URL\"\n"
        f"2. kubectl apply -f {all_path}\n"
        f"3. The collector writes /results/matrix/model_support.md and release_specs.json on the claim "
        f"{RESULTS_CLAIM} when no entry Job is active.\n", encoding="utf-8")
    return written + [all_path, readme]
