"""Deploy client workflow: render one spec into Kubernetes manifests and a Helm chart, validated offline.

Contract (docs/architecture.md, "Client workflow contract"):

    python -m deploy.run_deploy --run-dir RUN_DIR --model-spec-json PATH --workflow-args-json '{"target": "k8s"}'

Writes under ``RUN_DIR/deploy/``: ``k8s/NN-<kind>.yaml`` (apply in order) and ``k8s/all.yaml``,
``helm/<chart>/`` (Chart.yaml, values.yaml, templates/), and ``README.txt`` (the Secret command and
the apply commands). Every object is validated against the Kubernetes JSON schemas that
kubernetes-validate ships (strict: unknown fields are errors), so nothing here needs a cluster.
Exit 0: rendered and valid; 1: a rendered object is invalid (a bug: the message names it);
2: bad input.
"""

from __future__ import annotations

import sys
from pathlib import Path

from contracts.model_spec import project_version
from contracts.client_main import BadInput, ClientInvocation, run_client
from contracts.workflow_keys import DEPLOY_ARGS
from deploy.k8s import DeployError, DeployOptions, render_manifests, secret_command

KUBERNETES_VERSION = "1.33.0"
TARGETS = ("k8s",)
# key -> one-line help, declared with every workflow's keys in contracts.workflow_keys
WORKFLOW_ARG_HELP = DEPLOY_ARGS
WORKFLOW_ARG_KEYS = frozenset(WORKFLOW_ARG_HELP)


def log(msg: str) -> None:
    print(f"[deploy] {msg}", flush=True)


def default_client_image() -> str:
    return f"ghcr.io/tenstorrent/tt-inference-server/tt-inference-server-client:{project_version()}"


def validate(objects: list[dict]) -> list[str]:
    """One line per invalid object (empty when all are valid)."""
    import kubernetes_validate

    problems = []
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = "/".join(str(p) for p in exc.path) or "(top)"
            problems.append(f"{obj['kind']} {obj['metadata']['name']}: {where}: {exc.message}")
    return problems


def write_manifests(out: Path, objects: list[dict]) -> list[Path]:
    import yaml

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, obj in enumerate(objects, 1):
        path = out / f"{index:02d}-{obj['kind'].lower()}.yaml"
        path.write_text(yaml.safe_dump(obj, sort_keys=False, width=1000))
        paths.append(path)
    all_path = out / "all.yaml"
    all_path.write_text(yaml.safe_dump_all(objects, sort_keys=False, width=1000))
    return [*paths, all_path]


def write_chart(out: Path, files: dict[str, str]) -> list[Path]:
    paths = []
    for rel, text in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    # a server URL is accepted and ignored: deploy renders files, it talks to no server
    return run_client("deploy", __doc__.split("\n\n")[0], run, argv)


def run(inv: ClientInvocation) -> int:
    spec, workflow_args = inv.spec, inv.workflow_args
    try:
        target = workflow_args.get("target", "k8s")
        if target not in TARGETS:
            raise DeployError(f"target={target!r} is not one of {', '.join(TARGETS)}")
        unknown = sorted(set(workflow_args) - WORKFLOW_ARG_KEYS - {"mode"})
        if unknown:
            raise DeployError(f"unknown deploy workflow arg(s): {', '.join(unknown)}")
        options = DeployOptions.from_workflow_args(workflow_args, client_image=default_client_image())
    except (DeployError, ValueError, KeyError) as exc:
        raise BadInput(str(exc)) from None
    from deploy.helm import render_chart

    objects = render_manifests(spec, options)
    problems = validate(objects)
    if problems:
        for line in problems:
            log(f"INVALID {line}")
        log(f"{len(problems)} rendered object(s) fail the Kubernetes {KUBERNETES_VERSION} schemas")
        return 1
    out = inv.out_dir
    written = write_manifests(out / "k8s", objects)
    chart_dir = out / "helm" / objects[0]["metadata"]["labels"]["app.kubernetes.io/name"]
    written += write_chart(chart_dir, render_chart(spec, options))
    readme = out / "README.txt"
    readme.write_text(
        f"{spec.model_name} on {spec.device_type.value}: Kubernetes objects validated against {KUBERNETES_VERSION}.\n\n"
        f"1. Create the Secret the pods read (values from your shell, never from a file):\n"
        f"   {secret_command(spec, options)}\n"
        f"2. Put the weights on the claim the Deployment mounts, then apply:\n"
        f"   kubectl apply -f {out / 'k8s' / 'all.yaml'}\n"
        f"   or: helm install {chart_dir.name} {chart_dir} -n {options.namespace}\n")
    written.append(readme)
    inv.write_outputs(written)
    kinds = ", ".join(o["kind"] for o in objects)
    log(f"rendered {len(objects)} valid object(s) ({kinds}) and a Helm chart into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
