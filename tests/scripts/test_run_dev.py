"""scripts/run_dev.py: the documented dev-server command maps --device onto MODEL_DEVICE."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import free_port
from workflows.venvs import venv_path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "run_dev.py"


def test_a_device_name_it_does_not_know_is_exit_2():
    done = subprocess.run([sys.executable, str(SCRIPT), "--device", "gpu"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "--device 'gpu'" in done.stderr


def test_a_device_torch_does_not_see_stops_the_server_with_one_line():
    if not (venv_path("media-server") / "bin" / "python").exists():
        pytest.skip("media-server venv missing")
    done = subprocess.run([sys.executable, str(SCRIPT), "--device", "cuda:3", "--models", "mock", "--no-auth",
                           "--port", str(free_port())], capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stderr.splitlines() if "cannot start" in line]
    assert done.returncode == 1 and len(lines) == 1 and "MODEL_DEVICE=cuda:3" in lines[0], done.stderr[-1000:]
