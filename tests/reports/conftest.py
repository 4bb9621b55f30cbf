"""Shared helpers for the report tests: copy a fixture run directory and edit its JSON."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "browser: opens report.html in headless Chromium (REQUIRE_BROWSER=1 in CI)")


class RunDir:
    """A throw-away copy of a fixture run directory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self, rel: str) -> Any:
        return json.loads((self.path / rel).read_text())

    def write(self, rel: str, data: Any) -> None:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(data, indent=2))

    def edit(self, rel: str, fn: Callable[[Any], Any]) -> None:
        data = self.read(rel)
        result = fn(data)
        self.write(rel, data if result is None else result)

    def set_status(self, status: str) -> None:
        self.edit("model_spec.json", lambda s: s.update(status=status))

    def add_waiver(self, workflow: str, task: str, reason: str = "known issue #1") -> None:
        self.edit("model_spec.json", lambda s: s["known_issues"].append(
            {"workflow": workflow, "task": task, "reason": reason}))

    def set_step(self, name: str, status: str, detail: str | None = None) -> None:
        def fn(manifest: dict) -> None:
            for step in manifest["steps"]:
                if step["name"] == name:
                    step["status"], step["detail"] = status, detail
        self.edit("manifest.json", fn)

    def remove(self, pattern: str) -> None:
        for p in self.path.glob(pattern):
            shutil.rmtree(p) if p.is_dir() else p.unlink()


@pytest.fixture
def make_run(tmp_path: Path) -> Callable[[str], RunDir]:
    def make(name: str = "release_run") -> RunDir:
        dest = tmp_path / name
        shutil.copytree(FIXTURES / name, dest)
        return RunDir(dest)
    return make
