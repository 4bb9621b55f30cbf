"""The contracts and records packages import only the standard library (every venv imports them as is)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from contracts import REPO_ROOT


@pytest.mark.parametrize("package", ["contracts", "records"])
def test_package_imports_with_no_third_party_packages(package):
    modules = sorted(p.stem for p in (REPO_ROOT / package).glob("*.py") if p.stem != "__init__")
    code = (
        "import sys; sys.path[:] = [p for p in sys.path if 'site-packages' not in p]\n"
        + "".join(f"import {package}.{m}\n" for m in modules)
    )
    # -S: no site-packages at all, so a third-party import fails here.
    result = subprocess.run([sys.executable, "-S", "-c", code], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    expected = {"contracts": {"model_spec", "run_dir", "workflow_args", "workflow_keys", "typed_record", "openai_http"},
                "records": {"bench", "evals", "judge", "media", "report", "server_tests", "stress"}}[package]
    assert expected <= set(modules)
