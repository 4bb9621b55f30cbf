"""Kubernetes manifests from one ModelSpec: the same server the Docker backend starts, on a cluster.

Why one function per object over templates: each object is a plain dict built from the spec, so
the plain manifests and the Helm chart (``deploy/helm.py``) come from the same code — the chart is
these dicts rendered with ``{{ .Values.* }}`` placeholders where a user may change a value.

What a pod gets, and why:
- the spec's image and environment (the launcher reads the spec from a ConfigMap-mounted
  ``model_spec.json``, exactly as in Docker, where it is a read-only bind mount);
- secrets (``VLLM_API_KEY``, ``HF_TOKEN``) from a Secret by reference, never as env literals;
- Tenstorrent boards through the device plugin resource (``tenstorrent.com/<board>``), or, for
  clusters without the plugin, ``/dev/tenstorrent`` as a hostPath; 1 GiB hugepages per chip, as
  tt-metal pins one per chip; GPUs through ``nvidia.com/gpu``;
- a readiness probe on ``/health`` (traffic only once the model is loaded) and a liveness probe
  with a start-up allowance of the spec's readiness timeout (a big model loads for many minutes);
- weights from a PersistentVolumeClaim (one download shared by every replica) and a writable
  cache volume.

Stdlib only: imported by the deploy client workflow and by the tests.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from contracts.model_spec import DeviceType, InferenceEngine, ModelSpec

CONTAINER_HOME = "/home/container_app_user"
CACHE_ROOT = f"{CONTAINER_HOME}/cache_root"
WEIGHTS_ROOT = f"{CONTAINER_HOME}/readonly_weights_mount"
SPEC_DIR = f"{CONTAINER_HOME}/model_spec"
SERVICE_PORT = 8000

# Device plugin resource, how many of it one spec needs (a T3K is four n300 boards) and the chips
# they hold (tt-metal pins one 1 GiB hugepage per chip).
TT_BOARDS: dict[DeviceType, tuple[str, int, int]] = {
    DeviceType.N150: ("n150", 1, 1), DeviceType.N300: ("n300", 1, 2), DeviceType.T3K: ("n300", 4, 8),
    DeviceType.GALAXY: ("galaxy", 1, 32), DeviceType.P100: ("p100", 1, 1), DeviceType.P150: ("p150", 1, 1),
    DeviceType.P150X4: ("p150", 4, 4), DeviceType.N150X4: ("n150", 4, 4),
}


def api_key_name(spec: ModelSpec) -> str:
    """The variable the server reads its bearer from: vLLM's, or the media server's."""
    return "API_KEY" if spec.engine is InferenceEngine.MEDIA else "VLLM_API_KEY"


def secret_keys(spec: ModelSpec) -> tuple[str, str]:
    return (api_key_name(spec), "HF_TOKEN")


class DeployError(ValueError):
    """Bad deploy options; the message is one line for the user (exit code 2)."""


@dataclass(frozen=True)
class DeployOptions:
    """What a user may choose at render time (``--workflow-args`` keys of the deploy workflow)."""

    namespace: str = "default"
    replicas: int = 1
    tt_devices: str = "plugin"          # plugin | hostpath
    hpa: bool = False
    hpa_metric: str = "vllm:num_requests_waiting"
    hpa_target: float = 4.0
    hpa_max_replicas: int = 4
    job: str = "benchmarks"             # benchmarks | evals | none
    job_mode: str = "smoke"
    client_image: str = ""
    weights_pvc: str = ""
    storage_class: str = ""
    extra_labels: dict[str, str] = field(default_factory=dict)
    #: Appended to every object name (the release matrix: two impls of one model on one device).
    name_suffix: str = ""
    #: A PersistentVolumeClaim the client Job writes its run directory to (``/results/<job name>``),
    #: where a collector gathers it; empty: a scratch volume (the run directory dies with the pod).
    results_claim: str = ""

    @classmethod
    def from_workflow_args(cls, args: dict[str, str], *, client_image: str) -> "DeployOptions":
        def as_int(key: str, default: int, low: int = 0) -> int:
            try:
                value = int(args.get(key, default))
            except ValueError:
                raise DeployError(f"{key}={args[key]!r} is not an integer") from None
            if value < low:
                raise DeployError(f"{key}={value} must be >= {low}")
            return value

        def choice(key: str, default: str, allowed: tuple[str, ...]) -> str:
            value = args.get(key, default)
            if value not in allowed:
                raise DeployError(f"{key}={value!r} is not one of {', '.join(allowed)}")
            return value

        try:
            hpa_target = float(args.get("hpa_target", 4.0))
        except ValueError:
            raise DeployError(f"hpa_target={args['hpa_target']!r} is not a number") from None
        return cls(
            namespace=args.get("namespace", "default"), replicas=as_int("replicas", 1, 1),
            tt_devices=choice("tt_devices", "plugin", ("plugin", "hostpath")),
            hpa=choice("hpa", "false", ("true", "false")) == "true",
            hpa_metric=args.get("hpa_metric", "vllm:num_requests_waiting"), hpa_target=hpa_target,
            hpa_max_replicas=as_int("hpa_max_replicas", 4, 1),
            job=choice("job", "benchmarks", ("benchmarks", "evals", "none")),
            job_mode=choice("mode", "smoke", ("smoke", "ci", "full")),
            client_image=args.get("client_image", client_image), weights_pvc=args.get("weights_pvc", ""),
            storage_class=args.get("storage_class", ""),
        )


def resource_name(spec: ModelSpec) -> str:
    """A DNS-1123 name for the spec's objects (lower case, digits and '-', at most 52 characters)."""
    raw = f"tt-{spec.model_name}-{spec.device_type.value}".lower()
    cleaned = "".join(c if c.isalnum() else "-" for c in raw)
    while "--" in cleaned:
        cleaned = cleaned.replace("--", "-")
    return cleaned.strip("-")[:52].rstrip("-")


def base_name(spec: ModelSpec, options: DeployOptions) -> str:
    """The spec's resource name with the options' suffix, still at most 52 characters."""
    suffix = options.name_suffix
    return resource_name(spec)[:52 - len(suffix)].rstrip("-") + suffix


def labels(spec: ModelSpec, options: DeployOptions) -> dict[str, str]:
    return {"app.kubernetes.io/name": base_name(spec, options), "app.kubernetes.io/part-of": "tt-inference-server",
            "app.kubernetes.io/version": spec.version, "tt-inference-server/device": spec.device_type.value,
            **options.extra_labels}


def _meta(name: str, spec: ModelSpec, options: DeployOptions) -> dict[str, Any]:
    return {"name": name, "namespace": options.namespace, "labels": labels(spec, options)}


def container_env(spec: ModelSpec, secret_name: str) -> list[dict[str, Any]]:
    env = {"CACHE_ROOT": CACHE_ROOT, "TT_MODEL_SPEC_JSON_PATH": f"{SPEC_DIR}/model_spec.json",
           "SERVICE_PORT": str(SERVICE_PORT), "SERVICE_HOST": "0.0.0.0",
           "MODEL_WEIGHTS_PATH": f"{WEIGHTS_ROOT}/{spec.model_name}", "HF_HUB_OFFLINE": "1",
           "VLLM_NO_USAGE_STATS": "1", **{k: str(v) for k, v in spec.env_vars.items() if k not in secret_keys(spec)}}
    if spec.device_type.is_tenstorrent:
        env["TT_CACHE_PATH"] = f"{CACHE_ROOT}/tt_metal_cache/cache_{spec.model_name}/{spec.device_type.value.upper()}"
    out: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in env.items()]
    out += [{"name": key, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": key,
                                                         "optional": key != api_key_name(spec)}}}
            for key in secret_keys(spec)]
    return out


def _device_resources(spec: ModelSpec, options: DeployOptions) -> tuple[dict[str, Any], list, list]:
    """(limits, volumes, volume mounts) for the spec's accelerator."""
    limits: dict[str, Any] = {}
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    device = spec.device_type
    if device is DeviceType.GPU:
        limits["nvidia.com/gpu"] = 1
    elif device.is_tenstorrent:
        board, count, chips = TT_BOARDS[device]
        if options.tt_devices == "plugin":
            limits[f"tenstorrent.com/{board}"] = count
        else:
            volumes.append({"name": "tenstorrent", "hostPath": {"path": "/dev/tenstorrent", "type": "Directory"}})
            mounts.append({"name": "tenstorrent", "mountPath": "/dev/tenstorrent"})
        limits["hugepages-1Gi"] = f"{chips}Gi"
        volumes.append({"name": "hugepages", "emptyDir": {"medium": "HugePages-1Gi"}})
        mounts.append({"name": "hugepages", "mountPath": "/dev/hugepages-1G"})
    return limits, volumes, mounts


def _health_get() -> dict[str, Any]:
    """A fresh dict per probe: shared dicts would be written as YAML anchors."""
    return {"path": "/health", "port": "http"}


def deployment(spec: ModelSpec, options: DeployOptions, names: dict[str, str]) -> dict[str, Any]:
    ram_gi = max(1, math.ceil(spec.min_ram_gb))
    device_limits, device_volumes, device_mounts = _device_resources(spec, options)
    # Hugepages need requests == limits; CPU and memory get a request below the limit.
    resources = {"requests": {"cpu": "1" if spec.device_type is DeviceType.CPU else "4", "memory": f"{ram_gi}Gi",
                              **device_limits},
                 "limits": {"memory": f"{ram_gi * 2}Gi", **device_limits}}
    startup_failures = max(1, math.ceil(spec.readiness_timeout_s / 10))
    container = {
        "name": "server", "image": spec.docker_image, "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "http", "containerPort": SERVICE_PORT, "protocol": "TCP"}],
        "env": container_env(spec, names["secret"]), "resources": resources,
        "startupProbe": {"httpGet": _health_get(), "periodSeconds": 10, "failureThreshold": startup_failures},
        "readinessProbe": {"httpGet": _health_get(), "periodSeconds": 5, "failureThreshold": 3},
        "livenessProbe": {"httpGet": _health_get(), "periodSeconds": 20, "failureThreshold": 3, "timeoutSeconds": 5},
        "volumeMounts": [
            {"name": "model-spec", "mountPath": SPEC_DIR, "readOnly": True},
            {"name": "weights", "mountPath": f"{WEIGHTS_ROOT}/{spec.model_name}", "readOnly": True},
            {"name": "cache", "mountPath": CACHE_ROOT},
            {"name": "dshm", "mountPath": "/dev/shm"},
            *device_mounts,
        ],
    }
    volumes = [
        {"name": "model-spec", "configMap": {"name": names["config"]}},
        {"name": "weights", "persistentVolumeClaim": {"claimName": names["weights"], "readOnly": True}},
        {"name": "cache", "emptyDir": {}},
        {"name": "dshm", "emptyDir": {"medium": "Memory",
                                      "sizeLimit": "4Gi" if spec.device_type is DeviceType.CPU else "16Gi"}},
        *device_volumes,
    ]
    selector = {"app.kubernetes.io/name": base_name(spec, options)}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(names["server"], spec, options),
        "spec": {"replicas": options.replicas, "selector": {"matchLabels": selector},
                 "template": {"metadata": {"labels": labels(spec, options)},
                              "spec": {"securityContext": {"runAsUser": 15863, "runAsNonRoot": True, "fsGroup": 15863},
                                       "containers": [container], "volumes": volumes}}},
    }


def service(spec: ModelSpec, options: DeployOptions, names: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(names["server"], spec, options),
            "spec": {"type": "ClusterIP", "selector": {"app.kubernetes.io/name": base_name(spec, options)},
                     "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": "http", "protocol": "TCP"}]}}


def config_map(spec: ModelSpec, options: DeployOptions, names: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(names["config"], spec, options),
            "data": {"model_spec.json": json.dumps(spec.to_dict(), indent=2)}}


def weights_claim(spec: ModelSpec, options: DeployOptions, names: dict[str, str]) -> dict[str, Any]:
    claim: dict[str, Any] = {"accessModes": ["ReadOnlyMany"],
                             "resources": {"requests": {"storage": f"{max(1, math.ceil(spec.min_disk_gb))}Gi"}}}
    if options.storage_class:
        claim["storageClassName"] = options.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _meta(names["weights"], spec, options),
            "spec": claim}


def autoscaler(spec: ModelSpec, options: DeployOptions, names: dict[str, str]) -> dict[str, Any]:
    """Scale on a per-pod Prometheus metric (served through a metrics adapter), not on CPU."""
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": _meta(names["server"], spec, options),
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": names["server"]},
                     "minReplicas": options.replicas, "maxReplicas": max(options.replicas, options.hpa_max_replicas),
                     "metrics": [{"type": "Pods", "pods": {
                         "metric": {"name": options.hpa_metric.replace(":", "_")},
                         "target": {"type": "AverageValue", "averageValue": str(options.hpa_target)}}}]}}


def client_job(spec: ModelSpec, options: DeployOptions, names: dict[str, str]) -> dict[str, Any]:
    """Our benchmarks or evals, from the client image, against the Service (run.py --server-url)."""
    url = f"http://{names['server']}.{options.namespace}.svc.cluster.local:{SERVICE_PORT}"
    command = ["python3", "run.py", "--model", spec.model_name, "--device", spec.device_type.value,
               "--impl", spec.impl.impl_name, "--workflow", options.job, "--server-url", url,
               "--workflow-args", f"mode={options.job_mode}",
               "--output-dir", f"/results/{names['job']}" if options.results_claim else "/results/run"]
    results = ({"name": "results", "persistentVolumeClaim": {"claimName": options.results_claim}}
               if options.results_claim else {"name": "results", "emptyDir": {}})
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(names["job"], spec, options),
            "spec": {"backoffLimit": 0, "ttlSecondsAfterFinished": 86400,
                     "template": {"metadata": {"labels": labels(spec, options)},
                                  "spec": {"restartPolicy": "Never", "containers": [{
                                      "name": options.job, "image": options.client_image, "command": command,
                                      "env": [{"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {
                                          "name": names["secret"], "key": api_key_name(spec)}}}],
                                      "volumeMounts": [{"name": "results", "mountPath": "/results"}]}],
                                      "volumes": [results]}}}}


def object_names(spec: ModelSpec, options: DeployOptions) -> dict[str, str]:
    base = base_name(spec, options)
    return {"server": base, "config": f"{base}-spec", "secret": f"{base}-secrets", "weights": options.weights_pvc
            or f"{base}-weights", "job": f"{base}-{options.job}"}


def render_manifests(spec: ModelSpec, options: DeployOptions) -> list[dict[str, Any]]:
    """Every object, in apply order. The Secret is not rendered: its values never touch a file."""
    names = object_names(spec, options)
    objects = [config_map(spec, options, names)]
    if not options.weights_pvc:
        objects.append(weights_claim(spec, options, names))
    objects += [deployment(spec, options, names), service(spec, options, names)]
    if options.hpa:
        objects.append(autoscaler(spec, options, names))
    if options.job != "none":
        objects.append(client_job(spec, options, names))
    return objects


def secret_command(spec: ModelSpec, options: DeployOptions) -> str:
    """The one command that creates the Secret the pods read (values come from the user's shell)."""
    name = object_names(spec, options)["secret"]
    key = api_key_name(spec)
    return (f"kubectl -n {options.namespace} create secret generic {name} "
            f"--from-literal={key}=\"${key}\" --from-literal=HF_TOKEN=\"$HF_TOKEN\"")
