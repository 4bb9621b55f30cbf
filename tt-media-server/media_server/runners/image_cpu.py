"""Image generation on CPU with diffusers.

Loads a diffusers pipeline folder from IMAGE_CPU_WEIGHTS_PATH (or MODEL_WEIGHTS_PATH), or from
the Hugging Face cache (offline) for IMAGE_CPU_HF_REPO when that repo is cached. No download ever happens at run time.
Requests in a batch that share steps, size and guidance run as one pipeline call; each image gets
its own seeded generator, so a seed reproduces its image whatever the batch around it.
"""
from __future__ import annotations

import io
import logging
import os
from typing import Any

from media_server.runners.base import BatchRunner, ItemError, RunnerUnavailable

def _cached_repo_dir(repo: str) -> str | None:
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(repo, local_files_only=True)
    except Exception:  # noqa: BLE001 - not cached (or no hub library): no pipeline from there
        return None


TINY_RANDOM = "tiny-random"


def _pipeline_dir(settings) -> str:
    path = settings.image_cpu_weights_path or settings.model_weights_path
    if path == TINY_RANDOM:
        return path
    if path:
        if not os.path.isfile(os.path.join(path, "model_index.json")):
            raise RunnerUnavailable(f"image-cpu: {path} (IMAGE_CPU_WEIGHTS_PATH / MODEL_WEIGHTS_PATH) "
                                    "is not a diffusers pipeline folder (no model_index.json)")
        return path
    repo = settings.image_cpu_hf_repo
    cached = _cached_repo_dir(repo)
    if cached is None:
        raise RunnerUnavailable(f"image-cpu: no pipeline: set IMAGE_CPU_WEIGHTS_PATH to a diffusers "
                                f"folder ({repo} is not in the Hugging Face cache)")
    return cached


log = logging.getLogger(__name__)


class DiffusersImageRunner(BatchRunner):
    name, kind, model_id = "image-cpu", "image", "diffusers-cpu"

    @classmethod
    def preflight(cls, settings) -> None:
        _pipeline_dir(settings)

    def load(self) -> None:
        import torch
        from diffusers import DiffusionPipeline

        path = _pipeline_dir(self.settings)
        if path == TINY_RANDOM:
            from media_server.runners.tiny_diffusion import build_pipeline

            log.warning("image-cpu: serving a tiny RANDOM-WEIGHT pipeline (IMAGE_CPU_WEIGHTS_PATH=%s): "
                        "a fake for smoke tests, its images are noise", TINY_RANDOM)
            self.pipeline = build_pipeline()
        else:
            self.pipeline = DiffusionPipeline.from_pretrained(path, local_files_only=True,
                                                              torch_dtype=torch.float32)
        self.pipeline.set_progress_bar_config(disable=True)
        self.pipeline.to("cpu")
        side = 8 * self.pipeline.vae_scale_factor if hasattr(self.pipeline, "vae_scale_factor") else 64
        self.pipeline(prompt="warm up", num_inference_steps=1, height=side, width=side,
                      output_type="pil")

    def run_batch(self, payloads: list[dict]) -> list[Any]:
        results: list[Any] = [None] * len(payloads)
        groups: dict[tuple, list[int]] = {}
        for position, payload in enumerate(payloads):
            key = (payload["num_inference_steps"], payload["width"], payload["height"],
                   payload.get("guidance_scale"))
            groups.setdefault(key, []).append(position)
        for (steps, width, height, guidance), positions in groups.items():
            try:
                images = self._generate([payloads[p] for p in positions], steps, width, height, guidance)
            except (ValueError, TypeError) as exc:  # the pipeline refused these inputs
                for position in positions:
                    results[position] = ItemError(400, f"{type(exc).__name__}: {exc}")
                continue
            for position in positions:
                count = int(payloads[position]["number_of_images"])
                results[position] = [_png(image) for image in images[:count]]
                images = images[count:]
        return results

    def _generate(self, payloads: list[dict], steps: int, width: int, height: int,
                  guidance: float | None) -> list:
        import torch

        prompts, negatives, generators = [], [], []
        for payload in payloads:
            for index in range(int(payload["number_of_images"])):
                prompts.append(payload["prompt"])
                negatives.append(payload.get("negative_prompt") or "")
                seed = payload.get("seed")
                generator = torch.Generator("cpu")
                generator.manual_seed(seed + index if seed is not None else torch.seed())
                generators.append(generator)
        kwargs = {"prompt": prompts, "num_inference_steps": steps, "height": height, "width": width,
                  "generator": generators, "output_type": "pil"}
        if any(negatives):
            kwargs["negative_prompt"] = negatives
        if guidance is not None:
            kwargs["guidance_scale"] = guidance
        return list(self.pipeline(**kwargs).images)


def _png(image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()
