"""Build a tiny Stable Diffusion pipeline with RANDOM weights (a fake model for smoke tests).

It is a fake model (its images are noise) with the real architecture: UNet2DConditionModel,
AutoencoderKL, CLIPTextModel, a CLIP BPE tokenizer built here from a character vocabulary (no hub),
and a DDIM scheduler. `IMAGE_CPU_WEIGHTS_PATH=tiny-random` makes the image-cpu runner build it
in place of a checkpoint (and say so in its log); `benchmarks/tiny_pipeline.py OUT_DIR` saves it
as a diffusers folder, loaded like any real one. Either way the real diffusers
code path runs on CPU in seconds; the images are noise.
"""
from __future__ import annotations

import json
import os
import string
import tempfile


def _tokenizer(out_dir: str):
    from transformers import CLIPTokenizer

    os.makedirs(out_dir, exist_ok=True)
    symbols = list(string.ascii_lowercase + string.digits + string.punctuation)
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for symbol in symbols:
        vocab.setdefault(symbol, len(vocab))
        vocab.setdefault(symbol + "</w>", len(vocab))
    vocab_path = os.path.join(out_dir, "vocab.json")
    merges_path = os.path.join(out_dir, "merges.txt")
    with open(vocab_path, "w", encoding="utf-8") as handle:
        json.dump(vocab, handle)
    with open(merges_path, "w", encoding="utf-8") as handle:
        handle.write("#version: 0.2\n")
    return CLIPTokenizer(vocab_path, merges_path, model_max_length=32), len(vocab)


def build_pipeline(size: str = "small", seed: int = 0):
    """The random-weight pipeline object."""
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(seed)
    channels = (8, 16) if size == "small" else (32, 64)
    hidden = 16 if size == "small" else 32
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer, vocab_size = _tokenizer(scratch)
    unet = UNet2DConditionModel(
        block_out_channels=channels, layers_per_block=1, sample_size=8, in_channels=4,
        out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=hidden,
        attention_head_dim=2, norm_num_groups=4)
    vae = AutoencoderKL(block_out_channels=channels, in_channels=3, out_channels=3,
                        down_block_types=("DownEncoderBlock2D",) * 2,
                        up_block_types=("UpDecoderBlock2D",) * 2, latent_channels=4,
                        norm_num_groups=4, sample_size=32)
    text_encoder = CLIPTextModel(CLIPTextConfig(
        bos_token_id=0, eos_token_id=1, pad_token_id=1, hidden_size=hidden, intermediate_size=2 * hidden,
        layer_norm_eps=1e-05, num_attention_heads=2, num_hidden_layers=2, vocab_size=vocab_size,
        max_position_embeddings=32))
    scheduler = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                              clip_sample=False, set_alpha_to_one=False, steps_offset=1)
    pipeline = StableDiffusionPipeline(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer,
                                       unet=unet, scheduler=scheduler, safety_checker=None,
                                       feature_extractor=None, requires_safety_checker=False)
    return pipeline


def build(out_dir: str, size: str = "small", seed: int = 0) -> str:
    """Save the random-weight pipeline as a diffusers folder, marked as fake."""
    pipeline = build_pipeline(size, seed)
    pipeline.save_pretrained(out_dir)
    with open(os.path.join(out_dir, "FAKE_RANDOM_WEIGHTS.txt"), "w", encoding="utf-8") as handle:
        handle.write("Random weights built by media_server.runners.tiny_diffusion for tests and "
                     "benchmarks; images are noise.\n")
    return out_dir


