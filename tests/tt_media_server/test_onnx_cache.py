"""The shared ONNX export cache and backend setting (media_server/onnx_cache.py), without a model.

The builds here write small text files in place of graphs: what is tested is the cache's promise
(built once, also by processes starting together; never a half-written file) and the parsing of
EMBEDDING_BACKEND / CNN_BACKEND values.
"""
from __future__ import annotations

import multiprocessing
import sys
import time
from pathlib import Path

import pytest

MEDIA_ROOT = Path(__file__).resolve().parents[2] / "tt-media-server"
if str(MEDIA_ROOT) not in sys.path:
    sys.path.insert(0, str(MEDIA_ROOT))

from media_server.onnx_cache import backend_for, cached_file, check_backends  # noqa: E402


def _slow_build(log: Path):
    def build(partial: Path) -> None:
        with open(log, "a") as handle:
            handle.write("built\n")
        partial.write_text("half")
        time.sleep(0.5)  # a second process arrives while the file is half written
        partial.write_text("whole graph")
    return build


def _build_in_child(target: str, log: str, results) -> None:
    path = cached_file(Path(target), _slow_build(Path(log)))
    results.put(path.read_text())


def test_a_file_is_built_once_even_by_processes_starting_together(tmp_path):
    target, log = tmp_path / "cache" / "model.onnx", tmp_path / "builds.log"
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    children = [context.Process(target=_build_in_child, args=(str(target), str(log), results)) for _ in range(3)]
    for child in children:
        child.start()
    for child in children:
        child.join(30)
    assert [child.exitcode for child in children] == [0, 0, 0]
    assert sorted(results.get(timeout=5) for _ in children) == ["whole graph"] * 3
    assert log.read_text() == "built\n"
    assert cached_file(target, _slow_build(log)).read_text() == "whole graph" and log.read_text() == "built\n"
    assert sorted(p.name for p in target.parent.iterdir()) == [".lock", "model.onnx"]  # no partial left


def test_a_failed_build_leaves_nothing_and_the_next_call_builds(tmp_path):
    target = tmp_path / "model-int8.onnx"

    def failing(partial: Path) -> None:
        partial.write_text("half")
        raise RuntimeError("quantiser crashed")

    with pytest.raises(RuntimeError, match="quantiser crashed"):
        cached_file(target, failing)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock"]
    assert cached_file(target, lambda partial: partial.write_text("graph")).read_text() == "graph"


def test_backend_settings_name_a_default_and_per_model_entries():
    value = "onnx-int8, BAAI/bge-m3=torch ,resnet-18 = torch"
    assert check_backends(value, ("auto", "torch", "onnx", "onnx-int8"), "CNN_BACKEND") == value
    assert backend_for(value, "BAAI/bge-m3") == "torch"
    assert backend_for(value, "resnet-18") == "torch"
    assert backend_for(value, "all-MiniLM-L6-v2") == "onnx-int8"
    assert backend_for("", "any") == "auto"
    assert backend_for("x=onnx", "y", default="torch") == "torch"
    with pytest.raises(ValueError, match=r"CNN_BACKEND: 'tensorrt' is not one of auto, torch"):
        check_backends("onnx,resnet-18=tensorrt", ("auto", "torch", "onnx", "onnx-int8"), "CNN_BACKEND")
