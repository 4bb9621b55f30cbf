"""Fixtures for benchmark tests: the stub server (through ``fake_server_process``) and a tiny real tokenizer."""
from __future__ import annotations

import json
import os
import shutil

import pytest


@pytest.fixture
def stub_factory(fake_server_process):
    """``stub_factory(*stub_args)``: the shipped delay-programmed stub, stopped after the test."""
    return lambda *args: fake_server_process("benchmarking.stub_server", *args)


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory):
    """A real BPE tokenizer.json trained in-process with the `tokenizers` library (no download)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    words = ("the quick brown fox jumps over the lazy dog while seven wizards quietly hex "
             "jovial zebras and many ordinary numbers like 12 345 6789 follow").split()
    corpus = [" ".join(words[(i * 7 + j) % len(words)] for j in range(12)) for i in range(200)]
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]", "<|eot|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    d = tmp_path_factory.mktemp("tok")
    tok.save(str(d / "tokenizer.json"))
    return str(d)


@pytest.fixture(scope="session")
def hf_tokenizer_dir(tiny_tokenizer_dir, tmp_path_factory):
    """The tiny tokenizer as a directory transformers' AutoTokenizer loads offline (the load generators of
    benchmarking/tools/ need one)."""
    d = tmp_path_factory.mktemp("hf_tok")
    shutil.copy(os.path.join(tiny_tokenizer_dir, "tokenizer.json"), d / "tokenizer.json")
    (d / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "eos_token": "<|eot|>",
        "bos_token": "<|eot|>", "model_max_length": 4096}))
    return str(d)
