"""Host setup: weights discovery, format checks, RAM/disk errors, packaged conversion, no network."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import replace
from pathlib import Path

import pytest

from workflows import host_setup as hs
from workflows.catalog import load_catalog
from workflows.host_setup import (
    HostSetupError,
    find_hf_snapshot,
    find_weights,
    host_requirements,
    prepare_host,
    weights_format,
)

PACKAGED_SPEC = replace(load_catalog().specs["id_vllm-cpu_SmolLM2-135M-Instruct_cpu"], min_disk_gb=1, min_ram_gb=1)
assert PACKAGED_SPEC.weights_source["kind"] == "packaged"
HF_SPEC = replace(PACKAGED_SPEC, model_name="Tiny-1B", hf_model_repo="org/Tiny-1B",
                  weights_source={"kind": "huggingface"})


def make_hf_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (path / name).write_text("{}")
    return path


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """With weights present there must be no network call at all: any connect() fails the test."""
    def refuse(self, address, *a, **kw):
        if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "localhost", "::1"):
            raise AssertionError(f"unexpected network call to {address}")
        return real_connect(self, address, *a, **kw)

    real_connect = socket.socket.connect
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(hs, "available_ram_gb", lambda *a: 64.0)


def test_weights_format():
    assert weights_format(Path("/nonexistent")) is None


def test_format_detection(tmp_path):
    assert weights_format(make_hf_dir(tmp_path / "hf")) == "hf"
    meta = tmp_path / "meta"
    meta.mkdir()
    for name in ("consolidated.00.pth", "params.json", "tokenizer.model"):
        (meta / name).write_text("x")
    assert weights_format(meta) == "meta"
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{}")
    assert weights_format(tmp_path / "bad") is None


def test_hf_cache_discovery_order_and_newest_snapshot(tmp_path):
    host_home, hf_home = tmp_path / "host_hf", tmp_path / "hf"
    snaps = host_home / "hub" / "models--org--Tiny-1B" / "snapshots"
    old = make_hf_dir(snaps / "aaa")
    new = make_hf_dir(snaps / "bbb")
    os.utime(old, (time.time() - 100, time.time() - 100))
    (snaps / "ccc-incomplete").mkdir()  # newest but not a valid weights dir
    make_hf_dir(hf_home / "models--org--Tiny-1B" / "snapshots" / "zzz")
    assert find_hf_snapshot("org/Tiny-1B", {"HOST_HF_HOME": str(host_home), "HF_HOME": str(hf_home)}) == new
    assert find_hf_snapshot("org/Tiny-1B", {"HF_HOME": str(hf_home)}).name == "zzz"  # <home> without hub/
    got = prepare_host(HF_SPEC, env={"HOST_HF_HOME": str(host_home)}, allow_download=False)
    assert (got.source, got.weights_dir, got.tokenizer_dir) == ("hf_cache", new, new)


def test_model_weights_dir(tmp_path):
    good = make_hf_dir(tmp_path / "w")
    got = prepare_host(HF_SPEC, env={"MODEL_WEIGHTS_DIR": str(good)})
    assert got.source == "model_weights_dir" and got.weights_dir == good
    (tmp_path / "bad").mkdir()
    with pytest.raises(HostSetupError, match=r"MODEL_WEIGHTS_DIR: .*missing: config.json, \*.safetensors"):
        prepare_host(HF_SPEC, env={"MODEL_WEIGHTS_DIR": str(tmp_path / "bad")})


def test_missing_weights_without_download_is_one_line(tmp_path):
    with pytest.raises(HostSetupError) as exc:
        prepare_host(HF_SPEC, env={"HF_HOME": str(tmp_path)}, allow_download=False)
    assert "org/Tiny-1B not found" in str(exc.value) and "\n" not in str(exc.value)


def test_ram_error_shows_both_numbers(monkeypatch, tmp_path):
    monkeypatch.setattr(hs, "available_ram_gb", lambda *a: 2.5)
    with pytest.raises(HostSetupError, match=r"2.5 GB available, the model spec needs 40 GB"):
        prepare_host(replace(HF_SPEC, min_ram_gb=40), env={"HF_HOME": str(tmp_path)})


def test_disk_error_shows_both_numbers_on_the_target_filesystem(tmp_path):
    with pytest.raises(HostSetupError, match=r"3.0 GB free on the filesystem of .*needs 100 GB"):
        hs.check_disk(tmp_path / "not" / "yet" / "there", 100, free_gb=3.0)
    hs.check_disk(tmp_path / "x", 0.001)  # real free space of the tmp filesystem


def test_download_checks_disk_before_any_network(monkeypatch, tmp_path):
    monkeypatch.setattr(hs, "check_disk", lambda target, need, free_gb=None: (_ for _ in ()).throw(
        HostSetupError(f"not enough free disk for {target}: 1.0 GB free, the model spec needs {need} GB")))
    with pytest.raises(HostSetupError, match="not enough free disk"):
        prepare_host(replace(HF_SPEC, min_disk_gb=500), env={"HF_HOME": str(tmp_path), "HF_TOKEN": "hf_x"})


def test_bad_hf_token_shape_rejected_before_download(monkeypatch, tmp_path):
    monkeypatch.setattr(hs, "download_weights", lambda *a: pytest.fail("downloaded"))
    with pytest.raises(HostSetupError, match="should start with 'hf_'"):
        prepare_host(HF_SPEC, env={"HF_HOME": str(tmp_path), "HF_TOKEN": "nope"})


def test_download_path(monkeypatch, tmp_path):
    snap = make_hf_dir(tmp_path / "hub" / "models--org--Tiny-1B" / "snapshots" / "r1")
    monkeypatch.setattr(hs, "download_weights", lambda repo, env: snap)
    got = prepare_host(HF_SPEC, env={"HF_HOME": str(tmp_path / "empty")})
    assert got.source == "download" and got.weights_dir == snap


def test_packaged_conversion_once_and_marker(monkeypatch, tmp_path):
    calls = []

    def fake_converter(out_dir, package, gguf):  # named fake: writes what the real one writes
        calls.append((package, gguf))
        make_hf_dir(out_dir)

    monkeypatch.setattr(hs, "_run_converter", fake_converter)
    env = {"TT_INFERENCE_CACHE": str(tmp_path / "cache")}
    first = prepare_host(PACKAGED_SPEC, env=env)
    second = prepare_host(PACKAGED_SPEC, env=env)
    assert first.source == "packaged" and first.weights_dir == second.weights_dir == first.tokenizer_dir
    assert first.weights_dir == tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct"
    assert (first.weights_dir / hs.COMPLETE_MARKER).is_file() and len(calls) == 1


def test_half_written_dir_is_never_reused(monkeypatch, tmp_path):
    target = tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct"
    make_hf_dir(target)  # looks complete, but no completion marker: a crashed earlier run
    env = {"TT_INFERENCE_CACHE": str(tmp_path / "cache")}

    def crashing_converter(out_dir, package, gguf):
        (out_dir).mkdir(parents=True)
        (out_dir / "config.json").write_text("{}")
        raise HostSetupError("converting failed (exit 1)")

    monkeypatch.setattr(hs, "_run_converter", crashing_converter)
    with pytest.raises(HostSetupError, match="converting failed"):
        prepare_host(PACKAGED_SPEC, env=env)
    assert not list(target.parent.glob(".*partial*"))  # the partial dir was cleaned up
    monkeypatch.setattr(hs, "_run_converter", lambda out, p, g: make_hf_dir(out))
    got = prepare_host(PACKAGED_SPEC, env=env)
    assert (got.weights_dir / hs.COMPLETE_MARKER).is_file()


def test_find_weights_never_judges_this_host(monkeypatch, tmp_path):
    """What --print-docker-cmd uses: no RAM/disk check, no conversion, no download; None when absent."""
    monkeypatch.setattr(hs, "available_ram_gb", lambda *a: pytest.fail("judged this host's RAM"))
    monkeypatch.setattr(hs, "_run_converter", lambda *a: pytest.fail("converted"))
    monkeypatch.setattr(hs, "download_weights", lambda *a: pytest.fail("downloaded"))
    big = replace(HF_SPEC, min_ram_gb=4000, min_disk_gb=9000)
    assert find_weights(big, env={"HF_HOME": str(tmp_path)}) is None
    assert find_weights(PACKAGED_SPEC, env={"TT_INFERENCE_CACHE": str(tmp_path)}) is None
    snap = make_hf_dir(tmp_path / "hub" / "models--org--Tiny-1B" / "snapshots" / "r1")
    assert find_weights(big, env={"HF_HOME": str(tmp_path)}).weights_dir == snap
    assert "4000 GB of RAM" in host_requirements(big) and "9000 GB" in host_requirements(big)


@pytest.mark.integration
@pytest.mark.slow
def test_real_conversion_of_the_packaged_gguf(tmp_path, monkeypatch):
    """The shipped converter, in the engine venv, really produces a loadable HF directory.

    Slow: a whole conversion into a private cache (30 s alone; it is the conversion under test, so the
    session's converted copy cannot stand in for it)."""
    monkeypatch.setenv("TT_INFERENCE_CACHE", str(tmp_path / "cache"))
    path = hs.ensure_packaged_smollm2()
    assert weights_format(path) == "hf"
    names = {p.name for p in path.iterdir()}
    assert {"model.safetensors", "tokenizer.json", "chat_template.jinja", "config.json"} <= names
    assert (path / "model.safetensors").stat().st_size > 200e6
