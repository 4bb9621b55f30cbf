"""Fixtures for benchmark tests: the stub server as a subprocess and a tiny real tokenizer."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pytest_configure(config):
    config.addinivalue_line("markers", "integration: needs a real inference server")
    config.addinivalue_line("markers", "slow: takes more than ~10 s")


class StubProcess:
    """The shipped stub server (benchmarking/stub_server.py) in its own process."""

    def __init__(self, *args: str):
        env = dict(os.environ, PYTHONPATH=REPO)
        self.proc = subprocess.Popen([sys.executable, "-m", "benchmarking.stub_server", "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO)
        line = self.proc.stdout.readline()
        if not line.startswith("STUB_LISTENING"):
            self.proc.kill()
            raise RuntimeError(f"stub did not start: {line!r}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=10) as resp:
            return resp.read()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
def stub_factory():
    started: list[StubProcess] = []

    def make(*args: str) -> StubProcess:
        s = StubProcess(*args)
        started.append(s)
        return s
    yield make
    for s in started:
        s.stop()


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


def wait_http(url: str, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return True
        except Exception:  # noqa: BLE001
            time.sleep(0.5)
    return False
