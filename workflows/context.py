"""``RunContext``: what the steps of one run share (the typed run options, spec, run dir, server...).

Its own module so that the pipeline and the client-workflow runner can both use it without
importing each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contracts.model_spec import ModelSpec
from contracts.run_dir import RunDirectory
from contracts.workflow_args import WorkflowType
from workflows.cli import RunOptions, ServerMode
from workflows.processes import RunningChildren

if TYPE_CHECKING:
    from workflows.auth import AuthConfig
    from workflows.host_setup import HostSetup
    from workflows.servers.base import ServerHandle
    from workflows.ui import Ui


@dataclass
class RunContext:
    """Built by ``workflows.main``; the steps fill in the optional parts as they succeed."""

    spec: ModelSpec
    options: RunOptions
    run_dir: RunDirectory
    ui: Ui
    auth: AuthConfig | None = None
    host: HostSetup | None = None
    server: ServerHandle | None = None
    baseline: ServerHandle | None = None  # the A/B's baseline server (workflows.ab_servers), when asked
    venv_pythons: dict[str, Path] = field(default_factory=dict)
    trace_captured: bool = False
    # Every client process running now (two while a release runs evals and tests side by side).
    children: RunningChildren = field(default_factory=RunningChildren)
    # Runs one client workflow: (ctx, workflow) -> workflows.clients.ClientResult. None: the real
    # child process (workflows.clients.run_client); tests pass a fake.
    client_runner: Callable[[RunContext, WorkflowType], Any] | None = None

    @property
    def workflow(self) -> WorkflowType:
        assert self.options.workflow is not None
        return self.options.workflow

    @property
    def server_mode(self) -> ServerMode:
        return self.options.server_mode

    @property
    def bearer(self) -> str | None:
        return self.auth.bearer if self.auth else None
