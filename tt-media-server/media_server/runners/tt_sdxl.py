"""Stable Diffusion XL on Tenstorrent devices through tt-metal's SDXL pipeline (ttnn).

Needs tt-metal on PYTHONPATH (its `models` package) and ttnn; absent -> one line at start-up.
Weights: MODEL_WEIGHTS_PATH or the HF cache of stabilityai/stable-diffusion-xl-base-1.0.
"""
from __future__ import annotations

import io
from typing import Any

from media_server.runners.base import BatchRunner
from media_server.runners.tt_common import close_mesh, open_mesh, require_module


class TTSdxlRunner(BatchRunner):
    name, kind, model_id = "tt-sdxl", "image", "stable-diffusion-xl-base-1.0"
    HF_REPO = "stabilityai/stable-diffusion-xl-base-1.0"
    PIPELINE_MODULE = "models.experimental.stable_diffusion_xl_base.tt.tt_sdxl_pipeline"
    PIPELINE_CLASS = "TtSDXLPipeline"

    @classmethod
    def preflight(cls, settings) -> None:
        require_module(cls.name, "ttnn", "ttnn from tt-metal")
        require_module(cls.name, cls.PIPELINE_MODULE, "tt-metal's models package on PYTHONPATH")

    def max_batch_size(self) -> int:
        return 1  # the device pipeline is traced for one prompt at a time

    def load(self) -> None:
        self.mesh = open_mesh(self.name, self.settings, self.device)
        module = require_module(self.name, self.PIPELINE_MODULE, "tt-metal's models package")
        diffusers = require_module(self.name, "diffusers", "diffusers")
        torch_pipeline = diffusers.DiffusionPipeline.from_pretrained(
            self.settings.model_weights_path or self.HF_REPO)
        self.pipeline = getattr(module, self.PIPELINE_CLASS)(
            ttnn_device=self.mesh, torch_pipeline=torch_pipeline)

    def run_batch(self, payloads: list[dict]) -> list[Any]:
        results = []
        for payload in payloads:
            images = self.pipeline.generate(
                prompts=[payload["prompt"]] * payload["number_of_images"],
                negative_prompt=payload["negative_prompt"] or None,
                num_inference_steps=payload["num_inference_steps"],
                guidance_scale=payload["guidance_scale"] or 5.0, seed=payload["seed"])
            results.append([_png(image) for image in images])
        return results

    def close(self) -> None:
        close_mesh(getattr(self, "mesh", None))


def _png(image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()
