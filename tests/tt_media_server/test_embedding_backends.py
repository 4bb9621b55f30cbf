"""The embedding runner's ONNX Runtime backends against sentence-transformers, with the real weights.

One script in the media venv: the runner exports all-MiniLM-L6-v2 (cached under the default
EMBEDDING_ONNX_CACHE_DIR, so a machine pays the export once), then its int8 vectors are compared
with the fp32 PyTorch ones. Speed is not checked here (benchmarks/embeddings_served_vs_direct.py).
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.tt_media_server.conftest import SERVER_DIR, media_python

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCRIPT = r"""
import json, os, shutil, tempfile
import numpy as np
from pathlib import Path
from media_server.config import DeviceGroup, load_settings
from media_server.embeddings.settings import EmbeddingSettings, embedding_settings
from media_server.runners.base import RunnerUnavailable
from media_server.runners.embedding_cpu import EmbeddingCpuRunner
from sentence_transformers import SentenceTransformer

texts = ["The cat sat on the mat.", "Short.", "Embeddings map text to vectors.",
         "The weather is nice today, so we went for a long walk through the park and then had lunch outside.",
         "Tenstorrent builds AI accelerators.", "semantic search ranks documents by cosine similarity"] * 2
texts = [f"{i} {t}" for i, t in enumerate(texts)]
runner = EmbeddingCpuRunner(load_settings(model_runner="embedding-cpu", enable_warmup=False), DeviceGroup(0, (0,)))
runner.load()
backend = runner.backend()
vectors, tokens = runner.encode(texts)
alone = np.concatenate([runner.encode([t])[0] for t in texts])
st = SentenceTransformer(str(EmbeddingCpuRunner.model_path()), device="cpu")
reference = st.encode(texts)
st_tokens = [len(ids) for ids in st.tokenizer(texts, truncation=True, max_length=st.max_seq_length)["input_ids"]]
cosine = (vectors * reference).sum(1) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(reference, axis=1)

# Both graph layouts, in a cache of their own: fp32 unpadded is the model itself; the padded layout
# (every non-BERT transformer's) keeps the same guarantees in int8.
from media_server.embeddings import onnx_backend
layouts = {}
cache = Path(tempfile.mkdtemp())
for layout, int8 in (("unpadded", False), ("padded", True)):
    encoder = onnx_backend.OnnxEncoder.exported(EmbeddingCpuRunner.model_path(), cache, int8, 1, 0, layout)
    together = encoder.encode(texts)[0]
    apart = np.concatenate([encoder.encode([t])[0] for t in texts])
    layouts[layout] = {"unpadded": encoder.unpadded,
                       "cosine_min": float(((together * reference).sum(1) / np.linalg.norm(reference, axis=1)).min()),
                       "batch_invariant": float(np.abs(apart - together).max())}

# A directory the graph export cannot express (an extra Dense module): auto serves it with torch,
# an explicit onnx backend is refused in one line naming the setting.
odd = Path(tempfile.mkdtemp()) / "odd"
shutil.copytree(EmbeddingCpuRunner.model_path(), odd)
modules = json.loads((odd / "modules.json").read_text())
modules.insert(2, {"idx": 9, "name": "9", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
(odd / "modules.json").write_text(json.dumps(modules))
os.environ["EMBEDDING_MODEL_PATH"] = str(odd)
embedding_settings.cache_clear()
auto_choice = EmbeddingCpuRunner(runner.settings, DeviceGroup(0, (0,))).backend()
os.environ["EMBEDDING_BACKEND"] = "onnx"
embedding_settings.cache_clear()
try:
    EmbeddingCpuRunner(runner.settings, DeviceGroup(0, (0,))).load()
    refusal = ""
except RunnerUnavailable as error:
    refusal = str(error)
per_model = EmbeddingSettings(embedding_backend="onnx,BAAI/bge-m3=torch")
try:
    EmbeddingSettings(embedding_backend="tensorrt")
    bad = ""
except ValueError as error:
    bad = str(error)
print(json.dumps({"backend": backend, "cosine_min": float(cosine.min()), "layouts": layouts,
                  "served_layout": runner.onnx.unpadded,
                  "batch_invariant": float(np.abs(alone - vectors).max()), "tokens": tokens, "st_tokens": st_tokens,
                  "norms": np.linalg.norm(vectors, axis=1).tolist(), "auto_odd": auto_choice, "refusal": refusal,
                  "per_model": [per_model.backend_for("BAAI/bge-m3"), per_model.backend_for("all-MiniLM-L6-v2")],
                  "bad": bad}))
"""


def test_int8_backend_keeps_the_fp32_vectors_and_is_the_same_alone_or_batched():
    result = subprocess.run([str(media_python()), "-c", SCRIPT], cwd=SERVER_DIR, capture_output=True, text=True,
                            timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["backend"] == "onnx-int8"  # auto, for a Transformer + mean Pooling + Normalize directory
    assert report["served_layout"] is True  # a BERT encoder: the unpadded graph
    unpadded, padded = report["layouts"]["unpadded"], report["layouts"]["padded"]
    assert unpadded["unpadded"] is True and padded["unpadded"] is False
    assert unpadded["cosine_min"] > 0.99999 and unpadded["batch_invariant"] < 1e-5, unpadded  # fp32: the model itself
    assert padded["cosine_min"] >= 0.99 and padded["batch_invariant"] < 1e-5, padded
    assert report["cosine_min"] >= 0.99, report
    # per-token int8 scales: a batch-mate or padding moves a vector by float rounding at most
    assert report["batch_invariant"] < 1e-5, report
    assert report["tokens"] == report["st_tokens"]
    assert all(abs(norm - 1.0) < 1e-4 for norm in report["norms"])
    assert report["auto_odd"] == "torch"
    assert "EMBEDDING_BACKEND=onnx cannot serve" in report["refusal"] and "Dense" in report["refusal"]
    assert report["per_model"] == ["torch", "onnx"]
    assert "'tensorrt' is not one of" in report["bad"]
