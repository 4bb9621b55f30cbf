"""A tiny real BPE tokenizer made in-process, as a directory the load generators load offline.

Why: every load generator of ``benchmarking/tools/`` needs the served model's local tokenizer
directory (``ToolJob.tokenizer_dir``) and never the hub; against the stub there is no model to take
one from. This trains the same tokenizer as the tests' ``tiny_tokenizer_dir`` fixture (same corpus,
same trainer, no download) and adds what transformers' ``AutoTokenizer`` needs beside it
(``tokenizer_config.json``). ``added`` makes whole strings single tokens: the stub's token text, so a
tool that counts output tokens with the tokenizer (aiperf's own TPOT does) counts what the stub sent
rather than the tiny vocabulary's byte pieces of it.
"""
from __future__ import annotations

import json
import os

WORDS = ("the quick brown fox jumps over the lazy dog while seven wizards quietly hex "
         "jovial zebras and many ordinary numbers like 12 345 6789 follow").split()
HF_CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "eos_token": "<|eot|>",
             "bos_token": "<|eot|>", "model_max_length": 4096}


def make_tokenizer_dir(directory: str, added: tuple[str, ...] = ()) -> str:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` into ``directory``; returns it."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    corpus = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(12)) for i in range(200)]
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]", "<|eot|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    if added:
        tok.add_tokens([AddedToken(text, normalized=False) for text in added])
    os.makedirs(directory, exist_ok=True)
    tok.save(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as fh:
        json.dump(HF_CONFIG, fh)
    return directory


def count_tokens(directory: str, text: str) -> int:
    """Tokens of ``text`` under the tokenizer in ``directory`` (to check what a tool will count)."""
    from tokenizers import Tokenizer

    return len(Tokenizer.from_file(os.path.join(directory, "tokenizer.json")).encode(text).ids)
