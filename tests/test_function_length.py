"""No function or method in the repository's own Python is longer than 80 lines.

A function a reader cannot hold in mind at once is where bugs hide: a branch added near its end is read without
the state set up near its start. The project's style aims for functions of about 60 lines at most (a pipeline of
small named steps, passing typed values between them); 80 is the hard ceiling this test enforces, so a function
that grows past it is split when it grows, not years later.

The length is ``end_lineno - lineno + 1`` of the ``def`` (decorators excluded, its docstring and body included).
Every ``*.py`` under the repository is read, tests included, except virtual environments, caches, run logs and
any directory whose name starts with a dot.
"""
from __future__ import annotations

import ast
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 80
SKIP_DIRS = {".git", ".venv", ".workflow_venvs", "node_modules", "__pycache__", "workflow_logs"}


def _python_files(root: Path) -> list[Path]:
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        files.extend(Path(dirpath) / name for name in sorted(filenames) if name.endswith(".py"))
    return files


def long_functions(source: str, path: str, limit: int = MAX_LINES) -> list[str]:
    """``path:line name (N lines)`` for each function or method in ``source`` longer than ``limit`` lines."""
    found = []
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > limit:
                found.append(f"{path}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_is_longer_than_80_lines():
    files = _python_files(REPO)
    assert len(files) > 100  # the walk reads the repository, not nothing
    found = []
    for path in files:
        found += long_functions(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    assert not found, (f"functions over {MAX_LINES} lines (split them into named steps):\n  "
                       + "\n  ".join(sorted(found)))


def test_the_checker_flags_an_81_line_function_and_passes_an_80_line_one():
    def source(lines: int) -> str:  # a def line and lines - 1 body lines
        return "def f():\n" + "    x = 1\n" * (lines - 1) + "\n\nclass C:\n    def ok(self):\n        pass\n"

    assert long_functions(source(81), "synthetic.py") == ["synthetic.py:1 f (81 lines)"]
    assert long_functions(source(80), "synthetic.py") == []
    decorated = "@staticmethod\n@property\n" + source(80)
    assert long_functions(decorated, "synthetic.py") == []  # decorators are not counted
