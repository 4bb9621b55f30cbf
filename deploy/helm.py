"""A Helm chart from the same objects as the plain manifests (``deploy/k8s.py``).

Why not hand-written templates: two copies of a Deployment drift. The chart's templates are the
plain manifests rendered with placeholders at the values a user may change (image, replicas,
autoscaling, the client job), so ``helm template`` with the default values gives back exactly the
plain manifests — the tests check that with a small renderer of this chart's template subset.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import yaml

from contracts.model_spec import ModelSpec
from deploy.k8s import DeployOptions, api_key_name, object_names, render_manifests, resource_name

# A placeholder is "@@<values path>@@"; strings are quoted in the template, numbers are not.
_PLACEHOLDER = re.compile(r"'@@([A-Za-z.]+)(\|num)?@@'")
_NAMESPACE = "@@Release.Namespace@@"


def _placeholder(path: str, numeric: bool = False) -> str:
    return f"@@{path}{'|num' if numeric else ''}@@"


def _template_text(obj: dict[str, Any]) -> str:
    text = yaml.safe_dump(obj, sort_keys=False, width=1000)

    def swap(match: re.Match) -> str:
        path, numeric = match.group(1), match.group(2)
        if path == "Release.Namespace":
            return "{{ .Release.Namespace }}"
        return f"{{{{ .Values.{path} }}}}" if numeric else f"{{{{ .Values.{path} | quote }}}}"

    # The namespace also sits inside longer strings (the Service's cluster DNS name).
    return _PLACEHOLDER.sub(swap, text).replace(_NAMESPACE, "{{ .Release.Namespace }}")


def chart_values(spec: ModelSpec, options: DeployOptions) -> dict[str, Any]:
    return {"image": spec.docker_image, "replicas": options.replicas,
            "hpa": {"enabled": options.hpa, "maxReplicas": max(options.replicas, options.hpa_max_replicas),
                    "targetAverageValue": str(options.hpa_target)},
            "job": {"enabled": options.job != "none", "image": options.client_image}}


def render_chart(spec: ModelSpec, options: DeployOptions) -> dict[str, str]:
    """Relative path -> file text of the chart (Chart.yaml, values.yaml, templates/*.yaml)."""
    # Render every optional object once, with placeholders where values apply.
    full = dataclasses.replace(options, namespace=_NAMESPACE, hpa=True,
                               job=options.job if options.job != "none" else "benchmarks",
                               client_image=_placeholder("job.image"))
    names = object_names(spec, full)
    templates: dict[str, str] = {}
    for obj in render_manifests(spec, full):
        kind = obj["kind"]
        if kind == "Deployment":
            obj["spec"]["replicas"] = _placeholder("replicas", numeric=True)
            obj["spec"]["template"]["spec"]["containers"][0]["image"] = _placeholder("image")
        if kind == "HorizontalPodAutoscaler":
            obj["spec"]["minReplicas"] = _placeholder("replicas", numeric=True)
            obj["spec"]["maxReplicas"] = _placeholder("hpa.maxReplicas", numeric=True)
            obj["spec"]["metrics"][0]["pods"]["target"]["averageValue"] = _placeholder("hpa.targetAverageValue")
        text = _template_text(obj)
        if kind == "HorizontalPodAutoscaler":
            text = "{{- if .Values.hpa.enabled }}\n" + text + "{{- end }}\n"
        if kind == "Job":
            text = "{{- if .Values.job.enabled }}\n" + text + "{{- end }}\n"
        templates[f"templates/{kind.lower()}.yaml"] = text
    chart = {"apiVersion": "v2", "name": resource_name(spec), "type": "application",
             "description": f"{spec.model_name} on {spec.device_type.value}, served by tt-inference-server",
             "version": "0.1.0", "appVersion": spec.version}
    notes = (f"Create the Secret first:\n  kubectl -n {{{{ .Release.Namespace }}}} create secret generic "
             f"{names['secret']} --from-literal={api_key_name(spec)}=... --from-literal=HF_TOKEN=...\n")
    return {"Chart.yaml": yaml.safe_dump(chart, sort_keys=False),
            "values.yaml": yaml.safe_dump(chart_values(spec, options), sort_keys=False),
            "templates/NOTES.txt": notes, **templates}
