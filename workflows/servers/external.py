"""An external server (``--server-url`` / ``--service-port`` without --local/--docker-server).

Nothing is started or stopped: the handle only lets readiness and the client workflows treat it
like the servers we launch. Attaching checks once that the URL answers and serves the model.
"""

from __future__ import annotations

from workflows.server_url import ServerUrlError, parse_server_url
from workflows.servers.base import ServerHandle, ServerStartError, reach_lines
from workflows.servers.probe import check_served_model


class ExternalServerHandle(ServerHandle):
    kind = "external"

    def __init__(self, base_url: str, served_model_name: str):
        super().__init__(base_url, served_model_name, None)

    def is_alive(self) -> bool:
        return True  # not ours to watch; an unreachable server shows up as a readiness timeout

    def exit_code(self) -> int | None:
        return None

    def log_tail(self, n: int = 40) -> str:
        return "(external server: its log is not available to this tool)"

    def stop(self, timeout: float = 15) -> None:
        """Never stops someone else's server."""

    def describe_how_to_reach(self, bearer: str | None = None) -> str:
        return "\n".join(reach_lines(self.base_url, self.served_model_name, bearer)
                         + ["(external server: this tool did not start it and will not stop it)"])


def normalize_url(url: str, port: int | None = None) -> str:
    """``127.0.0.1`` / ``http://host`` / ``http://host:p/llm/v1`` -> ``http://host:p/llm``
    (``workflows.server_url``)."""
    return parse_server_url(url, port).base


def attach_external(url: str, served_model_name: str, bearer: str | None, *, port: int | None = None,
                    timeout: float = 10.0) -> ExternalServerHandle:
    """Check the server is reachable and serves ``served_model_name`` (ServerStartError otherwise)."""
    try:
        base = normalize_url(url, port)
    except ServerUrlError as exc:  # run.py checks it first (exit 2); other callers get one line too
        raise ServerStartError(str(exc)) from None
    check_served_model(base, served_model_name, bearer, timeout=timeout)
    return ExternalServerHandle(base, served_model_name)
