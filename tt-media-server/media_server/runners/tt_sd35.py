"""Stable Diffusion 3.5 Large on a Tenstorrent mesh (DEVICE_MESH_SHAPE SD_3_5_BASE / SD_3_5_FAST).

Same shape as the SDXL runner; only the tt-metal pipeline module differs.
"""
from __future__ import annotations

from media_server.runners.tt_sdxl import TTSdxlRunner


class TTSd35Runner(TTSdxlRunner):
    name, kind, model_id = "tt-sd3.5", "image", "stable-diffusion-3.5-large"
    HF_REPO = "stabilityai/stable-diffusion-3.5-large"
    PIPELINE_MODULE = "models.experimental.stable_diffusion_35_large.tt.tt_sd35_pipeline"
    PIPELINE_CLASS = "TtSD35Pipeline"
