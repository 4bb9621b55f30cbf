"""Generated weights (weights_source.kind == "generated"): built once by the spec's generator, then reused."""
from __future__ import annotations

import copy

import pytest

from workflows.catalog import load_catalog
from workflows.media_weights import MARKER, GeneratedWeightsError, ensure_generated, find_generated


def _spec(generator: str):
    spec = copy.deepcopy(next(s for s in load_catalog().specs.values() if s.model_name == "tiny-diffusion-cpu"))
    spec.weights_source = {"kind": "generated", "generator": generator}
    return spec


def test_generator_runs_once_and_is_reused(tmp_path):
    script = tmp_path / "gen.py"
    count = tmp_path / "count"
    script.write_text("import pathlib, sys\n"
                      "out = pathlib.Path(sys.argv[1]); out.mkdir(parents=True)\n"
                      "(out / 'model_index.json').write_text('{}')\n"
                      f"c = pathlib.Path({str(count)!r}); c.write_text(str(int(c.read_text() or 0) + 1) "
                      "if c.exists() else '1')\n")
    spec = _spec(str(script))  # an absolute generator path is used as is
    cache = tmp_path / "cache"
    assert find_generated(spec, cache) is None
    path = ensure_generated(spec, cache)
    assert (path / "model_index.json").is_file() and (path / MARKER).is_file()
    assert ensure_generated(spec, cache) == path and count.read_text() == "1"
    assert find_generated(spec, cache) == path


def test_generator_failure_is_one_line(tmp_path):
    script = tmp_path / "gen.py"
    script.write_text("import sys\nprint('no diffusers here', file=sys.stderr)\nsys.exit(3)\n")
    with pytest.raises(GeneratedWeightsError, match="exited 3: no diffusers here"):
        ensure_generated(_spec(str(script)), tmp_path / "cache")
    with pytest.raises(GeneratedWeightsError, match="not found"):
        ensure_generated(_spec(str(tmp_path / "missing.py")), tmp_path / "cache")
