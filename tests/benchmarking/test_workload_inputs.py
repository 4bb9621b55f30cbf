"""Workload inputs: trace files are checked line by line; corpus prompts have exact lengths and share prefixes."""
from __future__ import annotations

import json

import pytest

from benchmarking.prompts import LocalTokenizer
from benchmarking.workloads.corpus import Corpus
from benchmarking.workloads.trace import rate_over_time
from benchmarking.workloads.trace_file import TraceError, read_trace


def _jsonl(tmp_path, rows, name="t.jsonl"):
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


def test_mooncake_trace_times_are_relative_and_scaled(tmp_path):
    path = _jsonl(tmp_path, [{"timestamp": 1000, "input_length": 10, "output_length": 2, "hash_ids": [1]},
                             {"timestamp": 1500, "input_length": 12, "output_length": 3, "hash_ids": [1, 2]},
                             {"timestamp": 3000, "input_length": 8, "output_length": 1}])
    trace = read_trace(path, max_context=64, time_scale=2.0)
    assert trace.shape == "mooncake"
    assert [r.at_s for r in trace.requests] == [0.0, 0.25, 1.0]
    assert [r.hash_ids for r in trace.requests] == [[1], [1, 2], []]
    assert trace.span_s == 1.0


def test_csv_with_and_without_header(tmp_path):
    named = tmp_path / "a.csv"
    named.write_text("timestamp,input_tokens,output_tokens\n0,5,1\n250,6,2\n")
    bare = tmp_path / "b.csv"
    bare.write_text("0,5,1\n\n250,6,2\n")
    for path in (named, bare):
        trace = read_trace(str(path))
        assert trace.shape == "csv" and [(r.at_s, r.input_tokens, r.output_tokens) for r in trace.requests] == \
            [(0.0, 5, 1), (0.25, 6, 2)]


@pytest.mark.parametrize("rows, line, words", [
    ([{"timestamp": 0, "input_length": 5, "output_length": 1},
      {"timestamp": 10, "input_length": 5, "output_length": 1},
      {"timestamp": 5, "input_length": 5, "output_length": 1}], 3, "backwards"),
    ([{"timestamp": 0, "input_length": 5, "output_length": 1}, {"timestamp": 1, "output_length": 1}], 2,
     "missing field 'input_length'"),
    ([{"timestamp": 0, "input_length": 5, "output_length": 1}, {"input_length": 5, "output_length": 1}], 2,
     "missing field 'timestamp'"),
    ([{"timestamp": 0, "input_length": 60, "output_length": 10}], 1, "exceed the model's context of 64"),
    ([{"timestamp": 0, "input_length": 5, "output_length": 1}, "{not json"], 2, "not JSON"),
    ([{"timestamp": 0, "input_length": 2.5, "output_length": 1}], 1, "whole number"),
    ([{"timestamp": -1, "input_length": 5, "output_length": 1}], 1, ">= 0"),
    ([{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": ["a"]}], 1, "hash_ids"),
])
def test_bad_trace_names_its_line(tmp_path, rows, line, words):
    path = _jsonl(tmp_path, rows)
    with pytest.raises(TraceError) as err:
        read_trace(path, max_context=64)
    assert f"{path}:{line}:" in str(err.value) and words in str(err.value)


def test_empty_or_missing_trace_refused(tmp_path):
    with pytest.raises(TraceError, match="no requests"):
        read_trace(_jsonl(tmp_path, []))
    with pytest.raises(TraceError, match="cannot read"):
        read_trace(str(tmp_path / "nope.jsonl"))


def test_rate_over_time_counts_per_second():
    rates = rate_over_time([0.0, 0.5, 1.2, 2.9], [0.01, 0.52, None, 2.95], [0.4, 1.1, None, 3.5], 2.9)
    assert rates["bin_s"] == 1.0 and rates["t_s"] == [0.0, 1.0, 2.0, 3.0]
    assert rates["offered_rps"] == [2, 1, 1, 0] and rates["sent_rps"] == [2, 0, 1, 0]
    assert rates["completed_rps"] == [1, 1, 0, 1]


def test_corpus_prompts_exact_and_shared(tiny_tokenizer_dir):
    tok = LocalTokenizer(tiny_tokenizer_dir)
    # a fixed text in the tiny tokenizer's own words (the repository's documents change from commit to commit)
    words = ("the quick brown fox jumps over the lazy dog while seven wizards quietly hex "
             "jovial zebras and many ordinary numbers like 12 345 6789 follow").split()
    corpus = Corpus(tok, text=" ".join(words * 40))
    a = corpus.shared_prompt("p0", 24, "a", 40)
    b = corpus.shared_prompt("p0", 24, "b", 40)
    c = corpus.shared_prompt("p1", 24, "c", 40)
    for p in (a, b, c):
        assert p.token_len == p.intended_len == 40 == len(tok.encode(p.text))
    ids_a, ids_b, ids_c = (tok.encode(p.text) for p in (a, b, c))
    shared = next(i for i, (x, y) in enumerate(zip(ids_a, ids_b)) if x != y)
    assert shared >= 20                        # the prefix survives up to its last token or two
    assert ids_a[:8] != ids_c[:8]              # another prefix starts differently
    blocks = corpus.block_prefix([7, 8], 16, "mooncake")
    assert blocks[:16] == corpus.block_prefix([7], 16, "mooncake") and len(blocks) == 32


def test_corpus_without_tokenizer_uses_words():
    corpus = Corpus(None, text="one two three four five six seven")
    p = corpus.shared_prompt("k", 2, "x", 5)
    assert p.token_len is None and len(p.text.split()) == 5


def test_local_source_is_the_repositorys_documents():
    from benchmarking.workloads.corpus import source_text
    text = source_text()
    assert len(text.split()) > 1000 and "run.py" in text


def test_ttft_ratio_interval_brackets_the_ratio_of_means():
    from benchmarking.workloads.shared_prefix import ratio_interval
    shared, unshared = [0.10, 0.12, 0.09, 0.11, 0.10], [0.20, 0.22, 0.19, 0.21, 0.20]
    low, high = ratio_interval(shared, unshared)
    assert low <= (sum(shared) / 5) / (sum(unshared) / 5) <= high and 0.4 < low < high < 0.6
    assert ratio_interval([0.1], unshared) is None


def test_every_declared_workload_has_a_module_in_the_registry():
    from benchmarking.bench_args import WORKLOADS
    from benchmarking.workloads import REGISTRY, module

    assert set(REGISTRY) == set(WORKLOADS)
    assert all(hasattr(module(name), "points") and hasattr(module(name), "measure") for name in WORKLOADS)


def test_the_reader_itself_refuses_a_device_or_a_directory_before_opening_it(tmp_path):
    """Every client that replays a trace (benchmarks, stress tests, run.py's check) reads through read_trace:
    /dev/zero would be read forever, so the refusal is in the reader, not only in run.py."""
    for path in ("/dev/zero", str(tmp_path)):
        with pytest.raises(TraceError, match="not a regular file"):
            read_trace(path)
