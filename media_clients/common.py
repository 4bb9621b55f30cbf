"""What every media client entry point shares beyond the client contract: the media kind and its HTTP client."""
from __future__ import annotations

import dataclasses
import datetime as dt
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from contracts.client_main import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, BadInput, ClientInvocation, run_client
from contracts.model_spec import ModelSpec
from media_clients.transport import MediaHttp
from records.media import kind_of

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_OK", "BadInput", "ClientRun", "log", "main_wrapper", "media_run",
           "now_iso"]


def log(message: str) -> None:
    print(message, flush=True)


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class ClientRun:
    """One media client run: the invocation (run dir, typed spec, arguments, signals), its kind and HTTP."""

    invocation: ClientInvocation
    kind: str
    http: MediaHttp

    @property
    def run_dir(self) -> Path:
        return self.invocation.run_dir

    @property
    def spec(self) -> ModelSpec:
        return self.invocation.spec

    @property
    def workflow_args(self) -> dict[str, str]:
        return self.invocation.workflow_args

    @property
    def stop(self) -> threading.Event:
        return self.invocation.stop.event

    @property
    def served_model_name(self) -> str:
        return self.invocation.served_model_name

    @property
    def mode(self) -> str:
        return self.invocation.mode

    @property
    def model_id(self) -> str:
        return self.spec.model_id

    def out_dir(self, workflow: str) -> Path:
        return dataclasses.replace(self.invocation, workflow=workflow).out_dir

    def write_outputs(self, workflow: str, paths: list[Path]) -> None:
        dataclasses.replace(self.invocation, workflow=workflow).write_outputs(paths)


def media_run(invocation: ClientInvocation) -> ClientRun:
    """The media run of an invocation; BadInput when the spec has no media kind or no server is given."""
    spec = invocation.spec
    kind = kind_of(spec.model_type)
    if kind is None:
        raise BadInput(f"model_type {spec.model_type!r} of {spec.model_id} has no media client variant")
    if not invocation.server_url:
        raise BadInput("--server-url is empty")
    http = MediaHttp(invocation.server_url, invocation.api_key, timeout_s=min(600.0, spec.readiness_timeout_s or 600))
    return ClientRun(invocation, kind, http)


def main_wrapper(body: Callable[[ClientRun], int], argv: list[str] | None, description: str, workflow: str) -> int:
    """The client contract (``contracts.client_main.run_client``) around a media ``body(run) -> exit code``."""
    return run_client(workflow, description, lambda invocation: body(media_run(invocation)), argv,
                      server_required=True)
