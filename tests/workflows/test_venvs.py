"""Venv fingerprints with a real uv: reuse when equal, rebuild with a reason when not, never crash."""

from __future__ import annotations

import json

import pytest

from workflows import venvs


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A throwaway venv spec ('six' only) in a private venvs root, built by the project's uv (``$UV``: a private
    root would otherwise bootstrap uv with pip again in every test, 4-5 s each)."""
    monkeypatch.setenv("UV", str(venvs.find_uv()))
    req_dir = tmp_path / "requirements"
    req_dir.mkdir()
    (req_dir / "tiny.txt").write_text("six==1.16.0\n")
    monkeypatch.setattr(venvs, "REQUIREMENTS_DIR", req_dir)
    monkeypatch.setenv("TT_WORKFLOW_VENVS_DIR", str(tmp_path / "venvs"))
    monkeypatch.setitem(venvs.VENV_SPECS, "tiny", venvs.VenvSpec("tiny", "tiny.txt", ("six",)))
    messages: list[str] = []
    return req_dir, messages.append, messages


def test_build_then_reuse_without_install(tiny) -> None:
    req_dir, log, messages = tiny
    first = venvs.ensure_venv("tiny", log=log)
    assert first.rebuilt and first.reason == "it does not exist yet"
    assert first.python.exists()
    fingerprint = json.loads((first.path / venvs.FINGERPRINT_FILE).read_text())
    assert set(fingerprint) >= {"python_version", "requirements_sha256", "uv_version"}
    messages.clear()
    second = venvs.ensure_venv("tiny", log=log)
    assert not second.rebuilt and second.reason == "fingerprint unchanged"
    assert messages == []  # no uv call, no install work


def test_changed_requirements_rebuild_with_reason(tiny) -> None:
    req_dir, log, messages = tiny
    venvs.ensure_venv("tiny", log=log)
    (req_dir / "tiny.txt").write_text("six==1.17.0\n")
    info = venvs.ensure_venv("tiny", log=log)
    assert info.rebuilt and info.reason.startswith("changed: requirements_sha256")
    assert any("building venv 'tiny' (changed: requirements_sha256" in m for m in messages)


def test_included_requirement_files_are_hashed(tiny) -> None:
    req_dir, log, _ = tiny
    (req_dir / "base.txt").write_text("six==1.16.0\n")
    (req_dir / "tiny.txt").write_text("-r base.txt\n")
    before = venvs.requirements_hash(venvs.VENV_SPECS["tiny"])
    (req_dir / "base.txt").write_text("six==1.17.0\n")
    assert venvs.requirements_hash(venvs.VENV_SPECS["tiny"]) != before


def test_broken_venvs_are_rebuilt(tiny) -> None:
    _, log, _ = tiny
    info = venvs.ensure_venv("tiny", log=log)
    site = next(venvs._site_packages(info.path))
    (site / "six.py").unlink()
    again = venvs.ensure_venv("tiny", log=log)
    assert again.rebuilt and again.reason == "package 'six' is missing"
    (again.path / "bin" / "python").unlink()
    third = venvs.ensure_venv("tiny", log=log)
    assert third.rebuilt and third.reason == "its interpreter is gone"
    (third.path / venvs.FINGERPRINT_FILE).write_text("{not json")
    fourth = venvs.ensure_venv("tiny", log=log)
    assert fourth.rebuilt and fourth.reason == "it has no readable fingerprint"


def test_reset_and_unknown(tiny) -> None:
    _, log, _ = tiny
    venvs.ensure_venv("tiny", log=log)
    venvs.reset_venvs(log=log)
    assert not venvs.venvs_root().exists()
    with pytest.raises(venvs.VenvError, match="unknown venv 'nope'; valid: "):
        venvs.ensure_venv("nope")


def test_torch_cpu_source(tmp_path, monkeypatch) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    monkeypatch.setattr(venvs, "_pip_config_find_links", lambda: [str(wheels)])
    assert venvs.torch_cpu_source_args()[:2] == ["--extra-index-url", venvs.PYTORCH_CPU_INDEX]
    (wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    assert venvs.torch_cpu_source_args() == ["--find-links", str(wheels)]


def test_uv_is_bootstrapped_once_into_the_venvs_root_when_none_is_found(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TT_WORKFLOW_VENVS_DIR", str(tmp_path / "venvs"))
    monkeypatch.delenv("UV", raising=False)
    monkeypatch.setattr(venvs.shutil, "which", lambda name: None)  # no uv on PATH
    messages: list[str] = []
    uv = venvs.find_uv(log=messages.append)
    assert uv == tmp_path / "venvs" / ".bootstrap-uv" / "bin" / "uv" and uv.exists()
    assert messages == [f"uv not found on PATH; installing uv=={venvs.UV_VERSION} into {uv.parent.parent}"]
    assert venvs.find_uv(log=messages.append) == uv and len(messages) == 1  # found, not installed again
