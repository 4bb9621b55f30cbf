"""One run, one directory: the run id, the manifest and the run log.

Everything a run produces lands under ``RUN_DIR`` and nothing is read from other runs.
``manifest.json`` is a contract other tools rely on (see docs/architecture.md): it is rewritten
after every step change so an interrupted run still leaves a truthful manifest behind.
Standard library only: client workflows read it from their own venvs.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any

from contracts import REPO_ROOT

MANIFEST_SCHEMA = "tt-run-manifest/1"


class StepStatus(str, Enum):
    """A manifest step's status (a ``str`` so manifest.json keeps the plain spelling)."""

    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"    # deliberately not run (the workflow is not available)
    NOT_RUN = "not_run"    # an earlier failure or an interrupt stopped the run before it

    def __str__(self) -> str:
        return self.value


class RunStatus(str, Enum):
    """The whole run's status in manifest.json."""

    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    INCONCLUSIVE = "inconclusive"  # nothing failed, but a required check's samples could not decide it
    INTERRUPTED = "interrupted"

    def __str__(self) -> str:
        return self.value
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def make_run_id(model_id: str, workflow: str, when: datetime | None = None) -> str:
    stamp = (when or datetime.now()).strftime("%Y-%m-%d_%H-%M-%S")
    return f"{stamp}_{model_id}_{workflow}"


def default_runs_root() -> Path:
    """``$CACHE_ROOT/workflow_logs/runs`` when CACHE_ROOT is set, else ``<repo>/workflow_logs/runs``."""
    base = Path(os.environ["CACHE_ROOT"]) if os.environ.get("CACHE_ROOT") else REPO_ROOT
    return base / "workflow_logs" / "runs"


@dataclass
class Step:
    name: str
    status: StepStatus = StepStatus.RUNNING
    started: str | None = None
    ended: str | None = None
    duration_s: float | None = None
    outputs: list[str] = field(default_factory=list)
    detail: str = ""
    #: Share of the step's wall time during which some runnable task on the host waited for a CPU
    #: (Linux PSI, /proc/pressure/cpu "some"); None where the host cannot say. Our own server and
    #: clients count too, so it compares runs of one spec: a higher value means other work competed.
    cpu_pressure: float | None = None


PSI_CPU = Path("/proc/pressure/cpu")


def cpu_pressure_us(path: Path = PSI_CPU) -> int | None:
    """Microseconds some task has waited for a CPU since boot (PSI "some total"); None without PSI."""
    try:
        for line in path.read_text(encoding="ascii").splitlines():
            if line.startswith("some "):
                return int(line.rsplit("total=", 1)[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass
class Manifest:
    run_id: str
    model_id: str
    workflow: str
    status: RunStatus = RunStatus.RUNNING
    started: str = field(default_factory=utc_now)
    ended: str | None = None
    steps: list[Step] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    schema: str = MANIFEST_SCHEMA

    @classmethod
    def read(cls, path: Path) -> Manifest:
        data = json.loads(Path(path).read_text())
        data["steps"] = [Step(**{**s, "status": StepStatus(s.get("status", "running"))})
                         for s in data.get("steps", [])]
        data["status"] = RunStatus(data.get("status", "running"))
        return cls(**data)

    def step(self, name: str) -> Step | None:
        return next((s for s in self.steps if s.name == name), None)


class RunDirectory:
    """The run's directory, its manifest and its log (secrets redacted on the way in)."""

    def __init__(self, path: Path, manifest: Manifest, redact: Callable[[str], str] | None = None) -> None:
        self.path = Path(path).resolve()
        self.manifest = manifest
        self._redact = redact or (lambda text: text)
        self._lock = threading.Lock()
        # Steps may be open side by side (a release runs evals and tests at once, each ending in a thread
        # of its own): every change to the manifest and every write of it happens under this lock.
        self._manifest_lock = threading.RLock()
        self.path.mkdir(parents=True, exist_ok=True)
        self._log = open(self.path / "run.log", "a", encoding="utf-8")  # noqa: SIM115 - open until close()
        self.save()

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    @property
    def spec_path(self) -> Path:
        return self.path / "model_spec.json"

    @property
    def server_log_path(self) -> Path:
        return self.path / "server.log"

    def redact(self, text: str) -> str:
        """Secrets removed: for anything shown or written that came from a child or a server."""
        return self._redact(text)

    def also_redact(self, secret: str | None) -> None:
        """A secret learnt after the directory was made (a standby server's key) is removed from now on."""
        if not secret or len(secret) < 8:
            return
        earlier = self._redact
        self._redact = lambda text: earlier(text).replace(secret, "***REDACTED***")

    def relative(self, path: Path) -> str:
        return str(Path(path).resolve().relative_to(self.path))

    # ------------------------------------------------------------------ log

    def log(self, line: str, source: str = "run") -> None:
        """One line into run.log with a timestamp and its source (``run``, a workflow name...)."""
        text = self._redact(_ANSI.sub("", line.rstrip("\n")))
        stamp = datetime.now().strftime("%H:%M:%S.%f")[:-3]
        with self._lock:
            self._log.write(f"{stamp} [{source}] {text}\n")
            self._log.flush()

    def close(self) -> None:
        with self._lock:
            if not self._log.closed:
                self._log.close()

    # ------------------------------------------------------------------ manifest

    def save(self) -> None:
        with self._manifest_lock:
            data = asdict(self.manifest)
            text = self._redact(json.dumps(data, indent=2))
            tmp = self.manifest_path.with_suffix(".json.tmp")
            tmp.write_text(text + "\n")
            os.replace(tmp, self.manifest_path)

    def write_json(self, name: str, data: Any) -> Path:
        """Write a JSON file into the run directory with secrets redacted."""
        path = self.path / name
        path.write_text(self._redact(json.dumps(data, indent=2, default=str)) + "\n")
        return path

    def start_step(self, name: str) -> Step:
        with self._manifest_lock:
            step = self.manifest.step(name)
            if step is None:
                step = Step(name=name)
                self.manifest.steps.append(step)
            step.status, step.started, step.ended, step.duration_s, step.detail = (StepStatus.RUNNING, utc_now(),
                                                                                    None, None, "")
            step._t0 = time.monotonic()  # type: ignore[attr-defined]
            step._psi0 = cpu_pressure_us()  # type: ignore[attr-defined]
            step.cpu_pressure = None
            self.save()
            return step

    def end_step(self, step: Step, status: StepStatus, detail: str = "", outputs: list[str] | None = None) -> Step:
        with self._manifest_lock:
            step.status, step.detail = StepStatus(status), detail
            step.ended = utc_now()
            t0 = getattr(step, "_t0", None)
            step.duration_s = round(time.monotonic() - t0, 3) if t0 is not None else 0.0
            psi0, psi1 = getattr(step, "_psi0", None), cpu_pressure_us()
            if psi0 is not None and psi1 is not None and step.duration_s > 0:
                step.cpu_pressure = round(min(1.0, max(0.0, (psi1 - psi0) / 1e6 / step.duration_s)), 3)
            if outputs:
                step.outputs = sorted(set(step.outputs) | set(outputs))
            self.save()
            return step

    def record_step(self, name: str, status: StepStatus, detail: str = "") -> Step:
        """A step that did not run (skipped / not_run) still appears in the manifest."""
        with self._manifest_lock:
            step = self.manifest.step(name) or Step(name=name)
            if step not in self.manifest.steps:
                self.manifest.steps.append(step)
            step.status, step.detail = StepStatus(status), detail
            self.save()
            return step

    def finish(self, status: RunStatus) -> None:
        with self._manifest_lock:
            self.manifest.status = RunStatus(status)
            self.manifest.ended = utc_now()
            for step in self.manifest.steps:
                if step.status is StepStatus.RUNNING:  # interrupted mid-step
                    step.status, step.ended = StepStatus.FAILED, utc_now()
                    step.detail = step.detail or "interrupted"
            self.save()


def host_facts() -> dict[str, Any]:
    """CPU model, cores, total RAM, OS (with the kernel) and a digest of the CPU flags of this host
    (files only: cheap enough for every run); the run history's host fingerprint is made of them."""
    import hashlib
    import platform

    cpu = flags = None
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.lower().startswith("model name") and cpu is None:
                cpu = line.split(":", 1)[1].strip()
            elif line.lower().startswith("flags") and flags is None:
                flags = " ".join(sorted(line.split(":", 1)[1].split()))
            if cpu is not None and flags is not None:
                break
    except OSError:
        pass
    ram_gb = None
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                ram_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    except (OSError, ValueError, IndexError):
        pass
    return {"cpu": cpu or platform.processor() or None, "cores": os.cpu_count(), "ram_gb": ram_gb,
            "os": platform.platform(),
            "cpu_flags": hashlib.sha256(flags.encode()).hexdigest()[:16] if flags else None}


def collect_outputs(run_dir: Path, workflow: str) -> list[str]:
    """Result files a client workflow listed in ``<workflow>/outputs.json`` (relative paths)."""
    listing = Path(run_dir) / workflow / "outputs.json"
    try:
        outputs = json.loads(listing.read_text()).get("outputs", [])
    except (OSError, ValueError):
        return []
    return [str(o) for o in outputs if (Path(run_dir) / o).exists()]
