"""Only three files put directories on the import path; everything else is imported as a package.

Why: a module that patches ``sys.path`` imports differently depending on who runs it (by path, as a module, from
a test), and a directory added in front lets a package's module names shadow installed ones (reports/markdown.py
vs the ``markdown`` package). The client workflows run as modules (``python -m benchmarking.run_benchmarks``)
with the repository on PYTHONPATH; what is run by path needs one bootstrap per place: run.py's own (stdlib,
before its venv exists), scripts/_repo.py for scripts/ and tt-media-server/benchmarks/_paths.py for the media
server's benchmarks. Tests may patch it; the product may not.
"""
from __future__ import annotations

import re
from pathlib import Path

from contracts import REPO_ROOT

BOOTSTRAPS = {"run.py", "scripts/_repo.py", "tt-media-server/benchmarks/_paths.py"}
SKIP = {".git", ".venv", ".workflow_venvs", "node_modules", "tests", "workflow_logs", "__pycache__"}
PATCH = re.compile(r"\bsys\.path\b")


def files_touching_sys_path(root: Path) -> set[str]:
    found = set()
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if any(part in SKIP or part.startswith(".") for part in rel.parts[:-1]):
            continue
        if PATCH.search(path.read_text(errors="replace")):
            found.add(rel.as_posix())
    return found


def test_the_checker_finds_a_patch(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "tool.py").write_text("import sys\nsys.path.insert(0, '..')\n")
    (tmp_path / "pkg" / "clean.py").write_text("import sys\nprint(sys.argv)\n")
    assert files_touching_sys_path(tmp_path) == {"pkg/tool.py"}


def test_only_the_bootstraps_touch_sys_path():
    assert files_touching_sys_path(REPO_ROOT) == BOOTSTRAPS
