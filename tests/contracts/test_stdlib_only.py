"""The contracts package imports only the standard library (client venvs import it as is)."""

from __future__ import annotations

import subprocess
import sys
from contracts import REPO_ROOT


def test_contracts_import_with_no_third_party_packages():
    modules = sorted(p.stem for p in (REPO_ROOT / "contracts").glob("*.py") if p.stem != "__init__")
    code = (
        "import sys; sys.path[:] = [p for p in sys.path if 'site-packages' not in p]\n"
        + "".join(f"import contracts.{m}\n" for m in modules)
    )
    # -S: no site-packages at all, so a third-party import fails here.
    result = subprocess.run([sys.executable, "-S", "-c", code], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert {"model_spec", "run_dir", "workflow_args", "typed_record", "openai_http"} <= set(modules)
