"""run.py's ``--requirements`` and ``--custom-weights``: a customer's document and fine-tuned weights turned into
what the run needs, each mistake one line (``UsageError``, exit 2) before anything starts.

Why in the CLI: a requirements document chooses the model, the device, the sweep points and the eval tasks;
reading it after a server started would waste that start on a typo. ``apply_requirements`` reads and checks
the document (``records.requirements``), then fills what the command line left out: ``--model``, ``--device``,
``--workflow`` (release), the benchmarks' ``points=`` and the evals' ``tasks=``; the run directory keeps the
document as ``requirements.json`` for the report's "Requirements" table.

Off-catalog models (``--custom-weights DIR``, or a document whose model names ``weights`` / a hub id with a
``base``): the spec is the base's (engine, device limits, eval config, tokenizer), served under its own name
and id from its own weights (``synthesise_spec``); the synthesised spec is the run directory's
``model_spec.json``, so the report and a rebuild read what was served.
"""
from __future__ import annotations

import argparse
import copy
import re
import shlex
from pathlib import Path
from typing import Any

from contracts.model_spec import ModelSpec, ModelStatus, model_id_for
from records.requirements import Requirements, RequirementsError, read_requirements

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
#: Workflows that measure points / run evals; others take neither key.
_POINTS_WORKFLOWS = ("benchmarks", "release", None)
_EVALS_WORKFLOWS = ("evals", "release", None)


class RequirementsUsage(ValueError):
    """One line for the user (the CLI turns it into its UsageError, exit 2)."""


def apply_requirements(ns: argparse.Namespace, model_names: list[str]) -> Requirements | None:
    """Read ``--requirements`` and fill ``ns`` from it; None when the flag was not given."""
    path = getattr(ns, "requirements", None)
    if path is None:
        return None
    try:
        reqs = read_requirements(Path(path).expanduser())
    except RequirementsError as exc:
        raise RequirementsUsage(f"--requirements {path}: {exc}") from None
    model = reqs.model
    if ns.model is None and ns.model_spec_json is None:
        if model["name"] in model_names:
            ns.model = model["name"]
        elif model.get("base") in model_names:
            ns.model = model["base"]
            if ns.custom_weights is None:
                ns.custom_weights = model.get("weights") or f"hub:{model['name']}"
        elif model.get("base"):
            raise RequirementsUsage(f"--requirements {path}: model.base {model['base']!r} is not in the catalog "
                                    "(see --list)")
        else:
            raise RequirementsUsage(f"--requirements {path}: model {model['name']!r} is not in the catalog: give "
                                    "model.base (the catalog model whose spec it inherits) and model.weights")
    if ns.device is None and reqs.device:
        ns.device = reqs.device
    if ns.workflow is None:
        ns.workflow = "release"
    ns.workflow_args = _with_requirement_args(ns.workflow_args or "", reqs, ns.workflow)
    return reqs


def requirements_options(ns: argparse.Namespace, model_names: list[str], flags: dict) -> tuple[Any, Any]:
    """``--requirements`` read and applied to ``ns``, and ``--custom-weights`` checked: (the document or None,
    (served name, weights dir or None) or None). ``flags`` (cli_args.json) records what the document filled in."""
    reqs = apply_requirements(ns, model_names)
    custom = check_custom_weights(ns.custom_weights, reqs)
    if reqs is not None:
        flags.update(model=ns.model, device=ns.device, workflow=ns.workflow, workflow_args=ns.workflow_args,
                     custom_weights=ns.custom_weights, requirements=str(Path(ns.requirements).resolve()))
    if custom is not None and ns.model is None:
        raise RequirementsUsage("--custom-weights needs --model: the catalog model whose spec the weights inherit")
    return reqs, custom


def _with_requirement_args(text: str, reqs: Requirements, workflow: str | None) -> str:
    """``text`` (--workflow-args) plus points= and tasks= from the document, unless the user gave them."""
    try:
        given = {part.split("=", 1)[0] for part in shlex.split(text) if "=" in part}
    except ValueError:  # an unbalanced quote: the CLI's own check of --workflow-args refuses it in one line
        return text
    extra = []
    if reqs.benchmarks and "points" not in given and workflow in _POINTS_WORKFLOWS:
        extra.append(f"points={reqs.points_arg()}")
    if reqs.evals and "tasks" not in given and workflow in _EVALS_WORKFLOWS:
        extra.append("tasks=" + ",".join(dict.fromkeys(e.task for e in reqs.evals)))
    return " ".join([text.strip(), *extra]).strip()


def needed_clients(reqs: Requirements) -> set[str]:
    """The client workflows a release with this document runs: what it measures, and the report."""
    out = {"reports"}
    if reqs.benchmarks or reqs.agentic:
        out.add("benchmarks")
    if reqs.evals:
        out.add("evals")
    return out


def check_custom_weights(value: str | None, reqs: Requirements | None) -> tuple[str, str | None] | None:
    """(served name, local directory or None for a hub id) of the off-catalog model, or None."""
    if value is None:
        return None
    # the document names the model when it is the off-catalog one (its own weights or a hub id with a base);
    # --custom-weights beside a catalog name serves the directory under the directory's name
    off_catalog = reqs is not None and (reqs.model.get("weights") or reqs.model.get("base"))
    name = (reqs.model.get("served_model_name") or reqs.model["name"]) if off_catalog else None
    if value.startswith("hub:"):
        return _served_name(value[4:]), None
    path = Path(value).expanduser()
    if not path.is_dir():
        raise RequirementsUsage(f"--custom-weights {value!r} is not a directory")
    from workflows.host_setup import describe_bad_format, weights_format

    if not weights_format(path):
        raise RequirementsUsage(f"--custom-weights {value!r}: {describe_bad_format(path)}")
    return _served_name(name or path.resolve().name), str(path.resolve())


def _served_name(name: str) -> str:
    short = name.rsplit("/", 1)[-1]
    if not _NAME.fullmatch(short):
        raise RequirementsUsage(f"off-catalog model name {name!r}: use letters, digits, '.', '_' and '-'")
    return short


def off_catalog_spec(base: ModelSpec, custom: tuple[str, str | None], reqs: Requirements | None) -> ModelSpec:
    """The spec of ``custom`` ((served name, weights dir or None: the document's hub id)) over ``base``."""
    name, weights_dir = custom
    hub = reqs.model["name"] if reqs is not None and weights_dir is None else None
    return synthesise_spec(base, name, weights_dir, hub)


def synthesise_spec(base: ModelSpec, served_name: str, weights_dir: str | None, hub_id: str | None) -> ModelSpec:
    """The base spec, served as ``served_name`` from ``weights_dir`` (or the hub id ``hub_id``).

    What it inherits and why: the engine, device limits, vLLM args and readiness of the base serve the same
    architecture; the base's ``model_name`` is kept so its eval config and tokenizer apply. What it drops: the
    base's perf-reference targets and known issues (measured on other weights; the requirements judge this
    model), so its status is EXPERIMENTAL (no catalog tier is required of it)."""
    spec = copy.deepcopy(base)
    spec.served_model_name = served_name
    spec.model_id = model_id_for(base.impl.impl_name, served_name, base.device_type.value)
    spec.status = ModelStatus.EXPERIMENTAL
    spec.known_issues = []
    spec.device_model_spec.perf_reference = []
    source: dict[str, Any] = {"kind": "local", "path": weights_dir, "base": base.model_id}
    if weights_dir is None:
        spec.hf_model_repo = hub_id or spec.hf_model_repo
        source = {"kind": "huggingface", "base": base.model_id}
    spec.weights_source = source
    return spec
