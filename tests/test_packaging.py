"""The repository is one installable project: `uv sync` works on a clean copy and gives a working run.py.

pyproject.toml names its packages (setuptools refuses to guess among a flat layout's folders) and declares
run.py's orchestrator dependencies, the same pins as requirements/run.txt (the file its `run` venv is built
from); these tests keep both true.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def _pins(requirements: Path) -> list[str]:
    return [line.split("#")[0].strip() for line in requirements.read_text().splitlines()
            if line.split("#")[0].strip()]


def test_project_dependencies_are_the_orchestrator_venvs_pins():
    assert PYPROJECT["project"]["dependencies"] == _pins(REPO / "requirements" / "run.txt")


def test_every_top_level_package_is_named_for_setuptools():
    packages = sorted(p.parent.name for p in REPO.glob("*/__init__.py"))
    included = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(name.rstrip("*") for name in included) == [p for p in packages if p != "tests"]


@pytest.mark.integration
def test_uv_sync_on_a_clean_copy_then_run_py_help(tmp_path):
    """The quick start's `uv sync` then `uv run python run.py --help`, on a copy of the tracked files."""
    from workflows.venvs import find_uv

    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    copy = tmp_path / "checkout"
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    uv = str(find_uv())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "UV_PROJECT"))}
    env["TT_WORKFLOW_VENVS_DIR"] = str(tmp_path / "venvs")  # run.py's own `run` venv, built beside the copy
    synced = subprocess.run([uv, "sync", "-q"], cwd=copy, env=env, capture_output=True, text=True, timeout=600)
    assert synced.returncode == 0, synced.stderr[-2000:]
    helped = subprocess.run([uv, "run", "--no-sync", "python", "run.py", "--help"], cwd=copy, env=env,
                            capture_output=True, text=True, timeout=300)
    assert helped.returncode == 0 and "--workflow" in helped.stdout, helped.stderr[-2000:]
    imported = subprocess.run([str(copy / ".venv" / "bin" / "python"), "-c", "import workflows.main, records.judge"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert imported.returncode == 0, imported.stderr[-2000:]
