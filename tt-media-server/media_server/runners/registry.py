"""`MODEL_RUNNER` / `MODELS` name -> runner class, imported only when chosen.

Entries are "module:Class" strings so that choosing the mock runner never imports torch, and a
TT runner's absent stack only matters when that runner is picked. Adding a model = one runner
file + one line here.
"""
from __future__ import annotations

import importlib

from media_server.runners.base import BaseRunner

RUNNERS: dict[str, str] = {
    "mock": "media_server.runners.mock:MockImageRunner",
    "mock-cnn": "media_server.runners.mock:MockCnnRunner",
    "mock-stream": "media_server.runners.mock:MockStreamRunner",
    "image-cpu": "media_server.runners.image_cpu:DiffusersImageRunner",
    "cnn-cpu": "media_server.runners.cnn_cpu:EfficientNetRunner",
    "cnn-resnet-cpu": "media_server.runners.cnn_cpu:TorchvisionResNetRunner",
    "tt-sdxl": "media_server.runners.tt_sdxl:TTSdxlRunner",
    "tt-sd3.5": "media_server.runners.tt_sd35:TTSd35Runner",
    "tt-resnet": "media_server.runners.tt_resnet:TTResNetRunner",
    "forge": "media_server.runners.forge_resnet:ForgeResNetRunner",
    # speech, embeddings and text runners register here too:
    "whisper-cpu": "media_server.runners.whisper_cpu:WhisperCpuRunner",
    "whisper-base-cpu": "media_server.runners.whisper_cpu:WhisperBaseRunner",
    "whisper-small-cpu": "media_server.runners.whisper_cpu:WhisperSmallRunner",
    "whisper-large-v3-cpu": "media_server.runners.whisper_cpu:WhisperLargeV3Runner",
    "tt-whisper": "media_server.runners.whisper_tt:TTWhisperRunner",
    "embedding-cpu": "media_server.runners.embedding_cpu:EmbeddingCpuRunner",
    "rerank-cpu": "media_server.runners.rerank_cpu:CrossEncoderRunner",
    "text-slots": "media_server.runners.text_slots:TextSlotsRunner",
    "vision-hf": "media_server.runners.vision_hf:VisionHfRunner",
    "tiny-random-qwen3-vl": "media_server.runners.vision_hf:TinyRandomQwen3VlRunner",
    # The small-model server's documented catalog, under its names (runners/catalog.py):
    "BAAI/bge-m3": "media_server.runners.catalog:BgeM3Runner",
    "google/embeddinggemma-300m": "media_server.runners.catalog:EmbeddingGemmaRunner",
    "Qwen/Qwen3-4B-Instruct-2507": "media_server.runners.catalog:Qwen3_4BRunner",
    "meta-llama/Llama-3.2-1B-Instruct": "media_server.runners.catalog:Llama32_1BRunner",
    "meta-llama/Llama-3.2-3B-Instruct": "media_server.runners.catalog:Llama32_3BRunner",
    "Qwen/Qwen3-VL-2B-Instruct": "media_server.runners.catalog:Qwen3VL2BRunner",
    "Qwen/Qwen3-VL-4B-Instruct": "media_server.runners.catalog:Qwen3VL4BRunner",
    "Qwen/Qwen3-4B-Instruct-2507-FP8": "media_server.runners.catalog:Qwen3_4BFp8Runner",
    "Qwen/Qwen3-VL-2B-Instruct-FP8": "media_server.runners.catalog:Qwen3VL2BFp8Runner",
    "Qwen/Qwen3-VL-4B-Instruct-FP8": "media_server.runners.catalog:Qwen3VL4BFp8Runner",
    **{f"openai/whisper-{size}": f"media_server.runners.catalog:Whisper_{size.replace('.', '_').replace('-', '_')}"
       for size in ("tiny", "tiny.en", "small", "small.en", "medium", "medium.en", "large-v2")},
    # Community fine-tunes (transformers checkpoints, converted to CTranslate2 on first load):
    **{repo: "media_server.runners.catalog:Whisper_" + "".join(c if c.isalnum() else "_" for c in repo)
       for repo in ("jethrowang/whisper-tiny-chinese", "Ivydata/whisper-small-japanese",
                    "BELLE-2/Belle-whisper-large-v3-zh", "whisper-large-v3-japanese-4k-steps")},
}


# Names the original server documents for a runner registered above under another name.
ALIASES: dict[str, str] = {
    "tt-sdxl-trace": "tt-sdxl",  # the documented default MODEL_RUNNER: SDXL with traced execution
}


class UnknownRunner(ValueError):
    pass


def runner_class(name: str) -> type[BaseRunner]:
    """The runner class for a registry name; UnknownRunner names the valid ones."""
    target = RUNNERS.get(ALIASES.get(name, name))
    if target is None:
        raise UnknownRunner(f"MODEL_RUNNER={name!r}: not a known runner; valid: "
                            + ", ".join(sorted([*RUNNERS, *ALIASES])))
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("media_server.runners"):
            raise UnknownRunner(f"MODEL_RUNNER={name!r}: runner module {module_name} is not "
                                "present in this build") from None
        raise
    return getattr(module, class_name)
