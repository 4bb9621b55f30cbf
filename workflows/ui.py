"""Console output for run.py: a spinner for every step that takes time, one line per result.

Child workflows' output is echoed as it arrives (they print their own tables); the last line of
every run is ``Run directory: <absolute path>`` (a contract scripts rely on).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rich.console import Console
from rich.markup import escape
from rich.status import Status


class Ui:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)
        self._status: Status | None = None

    @contextlib.contextmanager
    def status(self, message: str) -> Iterator[None]:
        """A live spinner while a step runs (rich draws nothing animated when not a TTY).

        One at a time: rich draws one live display per console (a second one raises), so a status asked
        for while another is live draws nothing; the client workflows of a stage that run side by side
        share one status line naming them all (``workflows.pipeline.run_client_steps_together``).
        """
        if not self.console.is_terminal:
            self.console.print(f"[bold]…[/] {escape(message)}", soft_wrap=True)
            yield
            return
        if self._status is not None:
            yield
            return
        with self.console.status(escape(message)) as status:
            self._status = status
            try:
                yield
            finally:
                self._status = None

    def status_update(self, message: str) -> None:
        if self._status is not None:
            self._status.update(escape(message))

    def step_done(self, name: str, detail: str, seconds: float | None) -> None:
        took = f" [dim]({seconds:.1f}s)[/]" if seconds is not None else ""
        self.console.print(f"[green]✔[/] {escape(name)}{took} {escape(detail)}", soft_wrap=True)

    def step_failed(self, name: str, detail: str, seconds: float | None) -> None:
        took = f" [dim]({seconds:.1f}s)[/]" if seconds is not None else ""
        self.console.print(f"[red]✘[/] {escape(name)}{took} {escape(detail)}", soft_wrap=True)

    def step_skipped(self, name: str, reason: str) -> None:
        self.console.print(f"[yellow]–[/] {escape(name)}: not run ({escape(reason)})", soft_wrap=True)

    def child_line(self, source: str, line: str) -> None:
        self.console.print(f"[dim]{escape(source)}│[/] {escape(line)}", soft_wrap=True)

    def error(self, message: str) -> None:
        self.console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)

    def plain(self, text: str) -> None:
        self.console.print(escape(text), soft_wrap=True)

    def server_instructions(self, text: str) -> None:
        self.console.print(escape(text), soft_wrap=True)

    def run_directory(self, path: str) -> None:
        # Plain print, never wrapped or styled: scripts parse this last line.
        print(f"Run directory: {path}", flush=True)
