"""The ModelSpec catalog: YAML templates expanded (weights x device) into ModelSpec records.

Templates live in ``workflows/model_specs/*.yaml``; performance references in
``benchmarking/benchmark_targets/model_performance_reference.json``. Expansion derives the
fields the reference system derives (model id, served name, param count, disk/RAM minimums,
docker image tag, default vLLM args, device env vars, target tiers) so YAML stays short.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from contracts.model_spec import (
    REPO_ROOT,
    DeviceModelSpec,
    DeviceType,
    ImplSpec,
    InferenceEngine,
    KnownIssue,
    ModelSpec,
    ModelStatus,
    PerfReference,
    PerfTarget,
    docker_image_tag,
    inferred_device_env,
    infer_param_count,
    metric_higher_is_better,
    model_id_for,
    project_version,
)

SPECS_DIR = REPO_ROOT / "workflows" / "model_specs"
CATALOG_ROOT_ENV = "TT_CATALOG_ROOT"
PERF_REFERENCE_PATH = REPO_ROOT / "benchmarking" / "benchmark_targets" / "model_performance_reference.json"
# Tier -> fraction of the theoretical peak (TTFT is divided by it, throughputs multiplied).
PERF_TIERS: dict[str, float] = {"functional": 0.10, "complete": 0.50, "target": 1.0}
TT_IMAGE_REPO = "ghcr.io/tenstorrent/tt-inference-server/vllm-tt-metal-src-release-ubuntu-22.04-amd64"
TT_ENV_DEFAULTS = {"VLLM_CONFIGURE_LOGGING": "1", "VLLM_RPC_TIMEOUT": "900000", "VLLM_TARGET_DEVICE": "tt"}
CPU_ENV_DEFAULTS = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1"}
LLM_TARGET_KEYS = ("ttft_ms", "tput_user", "tput")
PERF_REFERENCE_KEYS = ("isl", "osl", "max_concurrency", "num_prompts", "task_type")


def _yaml_load(text: str) -> Any:
    """libyaml's C loader when present: the catalog loads on every CLI start (--list < 1 s)."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


class CatalogError(ValueError):
    """The catalog files are inconsistent (a bug in the YAML, not in user input)."""


# ---------------------------------------------------------------------- performance targets


def perf_reference_path() -> Path:
    override = os.environ.get("OVERRIDE_BENCHMARK_TARGETS")
    return Path(override) if override else PERF_REFERENCE_PATH


def expand_targets(theoretical: dict[str, float | None]) -> dict[str, PerfTarget]:
    """Theoretical peak -> one PerfTarget per tier (TTFT allowed 1/pct slower, tput pct of peak)."""
    tiers = {}
    for tier, pct in PERF_TIERS.items():
        ttft = theoretical.get("ttft_ms")
        tput_user = theoretical.get("tput_user")
        tput = theoretical.get("tput")
        tiers[tier] = PerfTarget(
            ttft_ms=round(ttft / pct, 3) if ttft is not None else None,
            tput_user=round(tput_user * pct, 3) if tput_user is not None else None,
            tput=round(tput * pct, 3) if tput is not None else None,
            metrics={name: round(value * pct if metric_higher_is_better(name) else value / pct, 6)
                     for name, value in theoretical.items()
                     if name not in LLM_TARGET_KEYS and isinstance(value, (int, float))},
        )
    return tiers


@lru_cache(maxsize=4)
def load_perf_references(path: str) -> dict[str, dict[str, list[PerfReference]]]:
    raw = json.loads(Path(path).read_text())
    table: dict[str, dict[str, list[PerfReference]]] = {}
    for family, devices in raw.items():
        if family.startswith("_"):
            continue  # "_comment" and friends
        for device, entries in devices.items():
            refs = []
            for entry in entries:
                entry = dict(entry)
                theoretical = entry.pop("targets", {}).get("theoretical", {})
                entry.pop("measured", None)
                known = {k: entry.pop(k) for k in PERF_REFERENCE_KEYS if k in entry}
                # Anything else describes a media point's workload (num_inference_steps, ...).
                refs.append(PerfReference(targets=expand_targets(theoretical), params=entry, **known))
            table.setdefault(family, {})[device] = refs
    return table


# ---------------------------------------------------------------------- expansion


def _default_vllm_args(device: DeviceType, repo: str, max_context: int, max_concurrency: int) -> dict[str, Any]:
    if device.is_tenstorrent:
        return {
            "model": repo,
            "block_size": "64",
            "max_model_len": str(max_context),
            "max_num_seqs": str(max_concurrency),
            "max_num_batched_tokens": str(max_context),
            "num_scheduler_steps": "10",
            "max-log-len": "32",
        }
    args: dict[str, Any] = {"model": repo, "max_model_len": str(max_context), "max_num_seqs": str(max_concurrency)}
    if device is DeviceType.CPU:
        # fp32 is ~3x faster than emulated bf16 on AVX2; eager avoids 2-5 min of torch.compile.
        args.update({"dtype": "float32", "enforce_eager": True, "enable_tokenizer_info_endpoint": True})
    return args


def render_tt_config(spec: ModelSpec) -> None:
    """Keep vllm_args' override_tt_config string in step with the dict (vLLM on TT devices only)."""
    if spec.device_type.is_tenstorrent and spec.engine is InferenceEngine.VLLM:
        spec.device_model_spec.vllm_args["override_tt_config"] = json.dumps(spec.device_model_spec.override_tt_config)


@dataclass
class Catalog:
    specs: dict[str, ModelSpec]

    def model_names(self) -> list[str]:
        return sorted({s.model_name for s in self.specs.values()})

    def impl_names(self) -> list[str]:
        return sorted({s.impl.impl_name for s in self.specs.values()})

    def for_model(self, model_name: str) -> list[ModelSpec]:
        return [s for s in self.specs.values() if s.model_name == model_name]


def _load_impls() -> dict[str, ImplSpec]:
    data = _yaml_load((SPECS_DIR / "impls.yaml").read_text())
    return {i["impl_name"]: ImplSpec(**i) for i in data["impls"]}


@dataclass
class _Template:
    """A catalog template's model-level keys, checked; each (weights repo, device entry) pair becomes one spec."""

    impl: ImplSpec
    weights: list[str]
    device_entries: list[dict[str, Any]]
    engine: InferenceEngine
    tt_metal_commit: str | None
    vllm_commit: str | None
    status: str
    perf_key: str | None
    image: str | None
    env_vars: dict[str, Any]
    repacked: bool
    served_override: str | None
    known_issues: list[KnownIssue]
    version: str | None  # the release that last changed this template (``version:``), else the project's
    extras: dict[str, Any]  # the optional keys given: min_disk_gb, min_ram_gb, readiness_timeout_s, ...


def _expand_template(template: dict[str, Any], impls: dict[str, ImplSpec], version: str,
                     perf_refs: dict[str, dict[str, list[PerfReference]]]) -> list[ModelSpec]:
    t = _parse_template(template, impls)
    specs = []
    for repo in t.weights:
        model_name = repo.split("/")[-1]
        params = infer_param_count(repo)
        for entry in t.device_entries:
            entry = dict(entry)
            device = DeviceType(entry.pop("device"))
            entry_status = entry.pop("status", t.status)
            dms = _device_model_spec(t, entry, device, repo, perf_refs)
            if entry:
                raise CatalogError(f"unknown device spec key(s) for {model_name}/{device.value}: {sorted(entry)}")
            spec = _model_spec(t, repo, model_name, params, dms, entry_status, version)
            render_tt_config(spec)
            specs.append(spec)
    return specs


def _parse_template(template: dict[str, Any], impls: dict[str, ImplSpec]) -> _Template:
    """The template's keys, popped from a copy so that any left over is named as unknown (CatalogError)."""
    template = dict(template)
    try:
        impl = impls[template.pop("impl")]
    except KeyError as exc:
        raise CatalogError(f"unknown impl {exc} in catalog template") from None
    t = _Template(
        impl=impl,
        weights=template.pop("weights"),
        device_entries=template.pop("device_model_specs"),
        engine=InferenceEngine(template.pop("engine", "vllm")),
        tt_metal_commit=template.pop("tt_metal_commit", None),
        vllm_commit=template.pop("vllm_commit", None),
        status=template.pop("status", "EXPERIMENTAL"),
        perf_key=template.pop("perf_reference_key", None),
        image=template.pop("docker_image", None),
        env_vars=dict(template.pop("env_vars", {})),
        repacked=bool(template.pop("repacked", False)),
        served_override=template.pop("served_model_name", None),
        known_issues=[KnownIssue(**k) for k in template.pop("known_issues", [])],
        version=str(template.pop("version")) if template.get("version") is not None else None,
        extras={k: template.pop(k) for k in ("min_disk_gb", "min_ram_gb", "readiness_timeout_s",
                                             "weights_source", "supported_modalities", "model_type",
                                             "docker_options")
                if k in template},
    )
    if template:
        raise CatalogError(f"unknown template key(s): {', '.join(sorted(template))}")
    if t.engine is InferenceEngine.MEDIA and not t.image:
        # The derived default is the vLLM image; a media spec on it would start the wrong server.
        raise CatalogError(f"media template {t.weights} names no docker_image "
                           "(the media server's image for its device)")
    return t


def _device_model_spec(t: _Template, entry: dict[str, Any], device: DeviceType, repo: str,
                       perf_refs: dict[str, dict[str, list[PerfReference]]]) -> DeviceModelSpec:
    """One device entry's settings, popped from ``entry`` (what is left in it is unknown to the caller)."""
    max_context = int(entry.pop("max_context", 128 * 1024))
    max_concurrency = int(entry.pop("max_concurrency", 32))
    # The media server takes its settings from env vars, not vLLM arguments.
    vllm_args = {} if t.engine is InferenceEngine.MEDIA else _default_vllm_args(
        device, repo, max_context, max_concurrency)
    vllm_args.update(entry.pop("vllm_args", {}))
    dms = DeviceModelSpec(
        device=device,
        max_concurrency=max_concurrency,
        max_context=max_context,
        default_impl=bool(entry.pop("default_impl", False)),
        vllm_args=vllm_args,
        override_tt_config=dict(entry.pop("override_tt_config", {})),
        env_vars=dict(entry.pop("env_vars", {})),
        perf_reference=list(perf_refs.get(t.perf_key or "", {}).get(device.value, [])),
        max_error_rate=float(entry.pop("max_error_rate", 0.0)),
        regression_tolerance=(None if entry.get("regression_tolerance") is None
                              else float(entry.pop("regression_tolerance"))),
        max_batch_divergence=float(entry.pop("max_batch_divergence", 0.0)),
    )
    entry.pop("regression_tolerance", None)
    return dms


def _spec_env(t: _Template, dms: DeviceModelSpec) -> dict[str, Any]:
    """The device's defaults (none for the media server), then the inferred device variables, the template's and
    the device entry's, later ones winning."""
    device = dms.device
    env = dict(TT_ENV_DEFAULTS if device.is_tenstorrent
               else CPU_ENV_DEFAULTS if device is DeviceType.CPU else {})
    if t.engine is InferenceEngine.MEDIA:
        env = {}  # no vLLM variables; the media server's own come from the template
    env.update(inferred_device_env(device))
    env.update(t.env_vars)
    env.update(dms.env_vars)
    return env


def _model_spec(t: _Template, repo: str, model_name: str, params: float | None, dms: DeviceModelSpec,
                entry_status: str, version: str) -> ModelSpec:
    device = dms.device
    env = _spec_env(t, dms)
    if t.image:
        docker_image = t.image.format(version=version)
    else:
        docker_image = f"{TT_IMAGE_REPO}:{docker_image_tag(version, t.tt_metal_commit, t.vllm_commit)}"
    min_disk = t.extras.get("min_disk_gb", round((params or 1) * (5 if t.repacked else 4), 3))
    min_ram = t.extras.get("min_ram_gb", round((params or 1) * 5, 3))
    return ModelSpec(
        model_id=model_id_for(t.impl.impl_name, model_name, device.value),
        model_name=model_name,
        hf_model_repo=repo,
        served_model_name=t.served_override or repo,
        impl=t.impl,
        engine=t.engine,
        device_type=device,
        tt_metal_commit=t.tt_metal_commit,
        vllm_commit=t.vllm_commit,
        docker_image=docker_image,
        status=ModelStatus[entry_status],
        version=t.version or version,  # the image is built per project release, the spec moves on its own
        param_count=params,
        min_disk_gb=min_disk,
        min_ram_gb=min_ram,
        supported_modalities=list(t.extras.get("supported_modalities", ["text"])),
        env_vars=env,
        device_model_spec=dms,
        weights_source=dict(t.extras.get("weights_source", {"kind": "huggingface"})),
        model_type=t.extras.get("model_type", "LLM"),
        known_issues=list(t.known_issues),
        readiness_timeout_s=float(t.extras.get("readiness_timeout_s", 1800.0)),
        docker_options=dict(t.extras.get("docker_options", {})),
        code_link=(f"{t.impl.repo_url}/tree/{t.tt_metal_commit}/{t.impl.code_path}" if t.tt_metal_commit else None),
    )


@lru_cache(maxsize=2)
def _load_catalog_cached(perf_path: str, root: str) -> Catalog:
    if not root:
        return load_catalog_from(SPECS_DIR, project_version(), perf_path)
    version = (Path(root) / "VERSION").read_text().strip()
    return load_catalog_from(Path(root) / "workflows" / "model_specs", version, perf_path)


def load_catalog_from(specs_dir: Path, version: str, perf_path: str | None = None) -> Catalog:
    """The catalog of another copy of the templates (uncached): the release automation renders the docs
    from the catalog it has just edited, which may be a copy (a dry run) rather than this checkout's."""
    impls = _load_impls()
    perf_refs = load_perf_references(perf_path or str(perf_reference_path()))
    specs: dict[str, ModelSpec] = {}
    for path in sorted(Path(specs_dir).glob("*.yaml")):
        if path.name == "impls.yaml":
            continue
        for template in _yaml_load(path.read_text()).get("templates", []):
            for spec in _expand_template(template, impls, version, perf_refs):
                specs[spec.model_id] = spec  # later duplicates win, as in the reference
    return Catalog(specs)


def load_catalog() -> Catalog:
    """The expanded catalog (cached per targets file; specs are copied before mutation). ``TT_CATALOG_ROOT``
    names another copy of the repository whose templates and VERSION to read: a release's dry run edits a
    copy, and the runs it makes must be judged at the statuses of that copy."""
    return _load_catalog_cached(str(perf_reference_path()), os.environ.get(CATALOG_ROOT_ENV, ""))
