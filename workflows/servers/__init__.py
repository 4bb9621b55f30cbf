"""Server backends behind one registry: ``start_server(kind, launch) -> ServerHandle``.

``local`` and ``docker`` start a server for the run; an external server is attached with
``attach_external`` (nothing is started). Backends are imported lazily so that, e.g., the
docker SDK is only needed when a container is really used.
"""

from __future__ import annotations

from typing import Callable

from workflows.servers.base import (
    ServerDied,
    ServerHandle,
    ServerLaunch,
    ServerStartError,
    check_port_free,
    served_model_name,
)


def _local(launch: ServerLaunch) -> ServerHandle:
    from workflows.servers.local import start_local

    return start_local(launch)


def _docker(launch: ServerLaunch) -> ServerHandle:
    from workflows.servers.docker_server import start_docker

    return start_docker(launch)


BACKENDS: dict[str, Callable[[ServerLaunch], ServerHandle]] = {"local": _local, "docker": _docker}


def start_server(kind: str, launch: ServerLaunch) -> ServerHandle:
    if kind not in BACKENDS:
        raise ServerStartError(f"unknown server backend {kind!r}; valid: {', '.join(sorted(BACKENDS))}")
    return BACKENDS[kind](launch)


def attach_external(url: str, served_model_name: str, bearer: str | None, **kwargs) -> ServerHandle:
    from workflows.servers.external import attach_external as _attach

    return _attach(url, served_model_name, bearer, **kwargs)


__all__ = ["BACKENDS", "ServerDied", "ServerHandle", "ServerLaunch", "ServerStartError", "attach_external",
           "check_port_free", "served_model_name", "start_server"]
