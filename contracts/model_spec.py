"""ModelSpec: everything the tool needs to know about one model on one device with one impl.

Records are built from the YAML catalog (``workflows/catalog.py``) and written to every run
directory as ``model_spec.json``. ``to_dict``/``from_dict`` round-trip exactly, so
``--model-spec-json`` can replay a resolved spec. Client workflows read that JSON as a plain
dict; this module imports only the standard library so it can be used from any venv.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, fields
from datetime import date
from enum import Enum
from pathlib import Path
from typing import Any

from contracts import REPO_ROOT

SPEC_SCHEMA = "tt-model-spec/1"


def project_version() -> str:
    return (REPO_ROOT / "VERSION").read_text().strip()


class DeviceType(Enum):
    """Devices the catalog knows. Values are the CLI spellings."""

    CPU = "cpu"
    GPU = "gpu"
    N150 = "n150"
    N300 = "n300"
    T3K = "t3k"
    GALAXY = "galaxy"
    P100 = "p100"
    P150 = "p150"
    P150X4 = "p150x4"
    N150X4 = "n150x4"

    @property
    def is_tenstorrent(self) -> bool:
        return self not in (DeviceType.CPU, DeviceType.GPU)

    @property
    def mesh_device(self) -> str | None:
        """The MESH_DEVICE string tt-metal expects (None off Tenstorrent hardware)."""
        return _MESH_DEVICE.get(self)

    @property
    def arch_name(self) -> str | None:
        if self in (DeviceType.P100, DeviceType.P150, DeviceType.P150X4):
            return "blackhole"
        return "wormhole_b0" if self.is_tenstorrent else None


_MESH_DEVICE = {
    DeviceType.N150: "N150", DeviceType.N300: "N300", DeviceType.T3K: "T3K", DeviceType.GALAXY: "TG",
    DeviceType.P100: "P100", DeviceType.P150: "P150", DeviceType.P150X4: "P150x4", DeviceType.N150X4: "N150x4",
}


class ModelStatus(Enum):
    """Maturity tier; decides which performance tiers a release must meet (see reports)."""

    EXPERIMENTAL = "🛠️ Experimental"
    FUNCTIONAL = "🟡 Functional"
    COMPLETE = "🟢 Complete"
    TOP_PERF = "🚀 Top Performance"


class InferenceEngine(Enum):
    VLLM = "vllm"
    MEDIA = "media"


@dataclass
class ImplSpec:
    impl_id: str
    impl_name: str
    repo_url: str
    code_path: str


@dataclass
class PerfTarget:
    """One tier's targets. Any metric may be None (not targeted)."""

    ttft_ms: float | None = None
    tput_user: float | None = None
    tput: float | None = None
    # Media models' targets (images_per_s, s_per_step, rtf, items_per_s, latency_p50_ms ...):
    # metric -> this tier's value; direction by name (``metric_higher_is_better``).
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class PerfReference:
    """A benchmark point with targets per tier (functional / complete / target)."""

    isl: int
    osl: int
    max_concurrency: int
    num_prompts: int
    task_type: str = "text"
    targets: dict[str, PerfTarget] = field(default_factory=dict)
    # Workload parameters of a media point (num_inference_steps, audio_seconds, batch_items ...).
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PerfReference":
        data = dict(data)
        data["targets"] = {tier: PerfTarget(**t) for tier, t in data.get("targets", {}).items()}
        return cls(**data)


@dataclass
class DeviceModelSpec:
    device: DeviceType
    max_concurrency: int
    max_context: int
    default_impl: bool = False
    vllm_args: dict[str, Any] = field(default_factory=dict)
    override_tt_config: dict[str, Any] = field(default_factory=dict)
    env_vars: dict[str, str] = field(default_factory=dict)
    perf_reference: list[PerfReference] = field(default_factory=list)
    # Share of a benchmark point's requests that may fail before the point blocks the verdict.
    max_error_rate: float = 0.0
    # Relative change of a judged metric against the baseline run that counts as a regression
    # (``--compare-to``); None: the comparison's default.
    regression_tolerance: float | None = None
    # Share of greedy requests whose text may differ alone vs in a batch (the tests workflow's
    # invariance case): 0 unless the engine's kernels legitimately differ, with the measured rate.
    max_batch_divergence: float = 0.0


@dataclass
class KnownIssue:
    """A waiver: a known failure that must not block a release, with its reason, who accepted it and when it
    stops waiving (``expires``: an ISO date, the last day it waives, or a release: it no longer waives from
    that project version on). A waiver without an end waives until someone remembers it, so each one has one."""

    workflow: str
    task: str
    reason: str
    accepted_by: str = ""
    expires: str = ""


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_RELEASE = re.compile(r"^v?(\d+(?:\.\d+)*)$")


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.lstrip("v").split("."))


def waiver_expiry_problem(expires: str, on: date, version: str) -> str | None:
    """Why a waiver with this ``expires`` no longer waives on day ``on`` under project ``version``, or None."""
    if _DATE.match(expires):
        try:
            last_day = date.fromisoformat(expires)
        except ValueError:
            return f"its expiry {expires!r} is not a date"
        return f"expired after {expires}" if on > last_day else None
    release = _RELEASE.match(expires)
    if release:
        return f"expired with release {expires}" if _version_tuple(version) >= _version_tuple(expires) else None
    return f"its expiry {expires!r} is neither a date (YYYY-MM-DD) nor a release (e.g. 0.2.0)"


def read_known_issues(entries: Any, on: date | None = None,
                      version: str | None = None) -> tuple[list[KnownIssue], list[str]]:
    """``known_issues`` entries as waivers, and one note per entry that waives nothing or lacks an owner or end.

    An entry without a reason is rejected: an unexplained waiver is exactly what a review must catch. An
    expired one (``expires`` passed on day ``on``, default today, or reached by project ``version``) or one
    whose expiry cannot be read waives nothing, and its note says so. The release verdict and the evals step
    both read waivers through here, so they never disagree.
    """
    on = on or date.today()
    version = version or project_version()
    issues: list[KnownIssue] = []
    notes: list[str] = []
    for entry in entries or []:
        if not isinstance(entry, dict):
            notes.append(f"ignored malformed known_issues entry: {entry!r}")
            continue
        issue, note = _read_known_issue(entry, on, version)
        if issue is not None:
            issues.append(issue)
        if note:
            notes.append(note)
    return issues, notes


def _read_known_issue(entry: dict[str, Any], on: date, version: str) -> tuple[KnownIssue | None, str | None]:
    workflow = str(entry.get("workflow") or entry.get("workflow_type") or "").strip().lower()
    task = str(entry.get("task") or entry.get("task_name") or "").strip()
    reason = str(entry.get("reason") or "").strip()
    accepted_by = str(entry.get("accepted_by") or "").strip()
    expires = str(entry.get("expires") or "").strip()
    if not workflow or not task:
        return None, f"ignored known_issues entry without workflow/task: {entry!r}"
    if not reason:
        return None, f"ignored known_issues waiver {workflow}/{task}: it gives no reason"
    if expires:
        expired = waiver_expiry_problem(expires, on, version)
        if expired:
            who = f", accepted by {accepted_by}" if accepted_by else ""
            return None, f"known_issues waiver {workflow}/{task} no longer waives: {expired}{who} ({reason})"
    missing = [name for name, value in (("accepted_by", accepted_by), ("expires", expires)) if not value]
    note = (f"known_issues waiver {workflow}/{task} names no {' and no '.join(missing)}: it waives, but a waiver "
            "should say who accepted it and when it ends") if missing else None
    return KnownIssue(workflow, task, reason, accepted_by, expires), note


@dataclass
class ModelSpec:
    model_id: str
    model_name: str
    hf_model_repo: str
    served_model_name: str
    impl: ImplSpec
    engine: InferenceEngine
    device_type: DeviceType
    tt_metal_commit: str | None
    vllm_commit: str | None
    docker_image: str
    status: ModelStatus
    version: str
    param_count: float | None
    min_disk_gb: float
    min_ram_gb: float
    supported_modalities: list[str]
    env_vars: dict[str, str]
    device_model_spec: DeviceModelSpec
    weights_source: dict[str, Any]
    model_type: str = "LLM"
    known_issues: list[KnownIssue] = field(default_factory=list)
    readiness_timeout_s: float = 1800.0
    # Docker flags a host may refuse (ulimits, privileged, cap_add), shm_size and command: added
    # to the container only when the spec asks for them.
    docker_options: dict[str, Any] = field(default_factory=dict)
    code_link: str | None = None
    cli_args: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ serialization

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: enums by value, dataclasses as dicts."""
        raw = asdict(self)
        raw["engine"] = self.engine.value
        raw["device_type"] = self.device_type.value
        raw["status"] = self.status.name
        raw["device_model_spec"]["device"] = self.device_model_spec.device.value
        return {"schema": SPEC_SCHEMA, **raw}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelSpec":
        data = {k: v for k, v in data.items() if k != "schema"}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown model spec field(s): {', '.join(unknown)}")
        dms = dict(data["device_model_spec"])
        dms["device"] = DeviceType(dms["device"])
        dms["perf_reference"] = [PerfReference.from_dict(p) for p in dms.get("perf_reference", [])]
        data["device_model_spec"] = DeviceModelSpec(**dms)
        data["impl"] = ImplSpec(**data["impl"])
        data["engine"] = InferenceEngine(data["engine"])
        data["device_type"] = DeviceType(data["device_type"])
        data["status"] = ModelStatus[data["status"]]
        data["known_issues"] = [KnownIssue(**k) for k in data.get("known_issues", [])]
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    @classmethod
    def from_json(cls, text: str) -> "ModelSpec":
        return cls.from_dict(json.loads(text))

    def write(self, path: Path) -> Path:
        path.write_text(self.to_json() + "\n")
        return path

    @classmethod
    def read(cls, path: Path) -> "ModelSpec":
        return cls.from_json(Path(path).read_text())


# ---------------------------------------------------------------------- derivations


#: Metric-name endings whose smaller values are better (latencies, seconds per step, real-time factor);
#: every other target metric (images_per_s, items_per_s, tput ...) is higher-is-better.
LOWER_IS_BETTER_SUFFIXES = ("_ms", "_seconds", "s_per_step", "rtf")


def metric_higher_is_better(metric: str) -> bool:
    """Direction of a target metric, from its name (``LOWER_IS_BETTER_SUFFIXES``)."""
    return not metric.endswith(LOWER_IS_BETTER_SUFFIXES)


def model_id_for(impl_name: str, model_name: str, device: str) -> str:
    return f"id_{impl_name}_{model_name}_{device}"


_PARAM_RE = re.compile(r"(\d+(?:\.\d+)?)([BM])(?![a-z])")


def infer_param_count(repo: str) -> float | None:
    """Billions of parameters from the repo name (last ``NB`` or ``NM`` match), or None."""
    matches = _PARAM_RE.findall(repo.split("/")[-1])
    if not matches:
        return None
    number, unit = matches[-1]
    return float(number) / (1000.0 if unit == "M" else 1.0)


def docker_image_tag(version: str, tt_metal_commit: str | None, vllm_commit: str | None) -> str:
    """``{VERSION}-{metal[:12]}-{vllm[:12]}``, dropping parts that do not apply."""
    parts = [version] + [c[:12] for c in (tt_metal_commit, vllm_commit) if c]
    return "-".join(parts)


def inferred_device_env(device: DeviceType) -> dict[str, str]:
    """Env vars tt-metal needs per device (explicit spec env vars win over these)."""
    env: dict[str, str] = {}
    if device.mesh_device:
        env["MESH_DEVICE"] = device.mesh_device
    if device.arch_name:
        env["ARCH_NAME"] = device.arch_name
    if device in (DeviceType.N300, DeviceType.T3K):
        env["WH_ARCH_YAML"] = "wormhole_b0_80_arch_eth_dispatch.yaml"
    return env
