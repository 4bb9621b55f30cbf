"""SSE/chunked parsing: stamps survive arbitrary read boundaries; errors are classified."""
from __future__ import annotations

import json
import random

from benchmarking.client import _Conn
from benchmarking.metrics import RequestRecord
from contracts.prometheus import delta, headline, parse_prometheus
from benchmarking.sse import finish_record, split_events


def ev(obj) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def content(text, finish=None):
    return ev({"id": "x", "choices": [{"index": 0, "text": text, "finish_reason": finish}]})


USAGE = ev({"id": "x", "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}})
DONE = b"data: [DONE]\n\n"


def record():
    r = RequestRecord(index=0, request_id="r", prompt_len=7, requested_output_len=3)
    r.send_time = 10.0
    return r


def test_dechunk_any_read_boundaries():
    rng = random.Random(5)
    for _ in range(200):
        payloads = [bytes(rng.choice(b"ab\n\r") for _ in range(rng.randint(1, 50))) for _ in range(rng.randint(1, 15))]
        raw = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in payloads) + b"0\r\n\r\n"
        conn = _Conn()
        conn._mode = "chunked"
        got, pos = [], 0
        while pos < len(raw) and conn._mode != "done":
            step = rng.randint(1, 40)
            got.append(conn._dechunk(raw[pos:pos + step]))
            pos += step
        assert b"".join(got) == b"".join(payloads) and conn._mode == "done"


def test_events_take_the_time_of_the_read_that_completed_them():
    stream = content("") + content(" a") + content(" b", "length") + USAGE + DONE
    cut1, cut2 = stream.index(b" a") , stream.index(b" b") + 3       # second and third event split across reads
    parts = [stream[:cut1], stream[cut1:cut2], stream[cut2:]]
    events, times = split_events(parts, [10.1, 10.2, 10.3])
    assert times[:3] == [10.1, 10.2, 10.3]
    r = record()
    finish_record(r, parts, [10.1, 10.2, 10.3], chat=False)
    assert r.success and r.error_class is None
    assert r.ttft == r.chunk_times[0] and abs(r.ttft - 0.1) < 1e-9        # empty first chunk still counts (vLLM)
    assert abs(r.ttft_nonempty - 0.2) < 1e-9                               # first non-empty text
    assert abs(r.latency - 0.3) < 1e-9
    assert (r.output_tokens, r.output_token_source, r.input_tokens, r.input_token_source) == (3, "usage", 7, "usage")


def test_newline_split_between_reads_and_comments():
    stream = b": ping\n\n" + content(" a") + content(" b") + USAGE + DONE
    i = stream.index(b"\n\n", 20) + 1                                      # cut between the two newlines
    r = record()
    finish_record(r, [stream[:i], stream[i:]], [10.5, 10.6], chat=False)
    assert r.success and len(r.chunk_times) == 2 and abs(r.chunk_times[0] - 0.6) < 1e-9  # completed by read 2


class _CountingTok:
    def encode(self, text):
        return text.split()


def test_without_usage_falls_back_to_tokenizer_then_chunks():
    stream = content(" one two") + content(" three") + DONE
    r = record()
    finish_record(r, [stream], [10.2], chat=False, tokenizer=_CountingTok())
    assert (r.output_tokens, r.output_token_source, r.input_token_source) == (3, "tokenizer", "dataset")
    r = record()
    finish_record(r, [stream], [10.2], chat=False)
    assert (r.output_tokens, r.output_token_source) == (2, "chunks")


def test_chat_deltas():
    chat = ev({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}) + \
        ev({"choices": [{"index": 0, "delta": {"content": "hi"}}]}) + USAGE + DONE
    r = record()
    finish_record(r, [chat], [10.01], chat=True, keep_text=True)
    assert r.success and r.generated_text == "hi" and len(r.chunk_times) == 2


def test_error_classes_from_stream_content():
    r = record()
    finish_record(r, [content(" a") + b'data: {"choices":[{"text":" b\n\n' + DONE], [10.1], chat=False)
    assert (r.success, r.error_class) == (False, "malformed_sse")
    r = record()
    finish_record(r, [content(" a") + ev({"error": {"message": "boom"}}) + DONE], [10.1], chat=False)
    assert r.error_class == "stream_error"
    r = record()
    finish_record(r, [USAGE + DONE], [10.1], chat=False)
    assert r.error_class == "no_content"
    r = record()
    finish_record(r, [content(" a") + b'data: {"choices":[{"te'], [10.1], chat=False)
    assert r.error_class == "connection_reset"


def test_prometheus_parse_and_delta():
    before = parse_prometheus('# HELP x\nvllm:prompt_tokens_total{model="m"} 10\nvllm:lat_bucket{le="1"} 3\n'
                              'vllm:lat_sum 1.5\nbad line here\n')
    after = parse_prometheus('vllm:prompt_tokens_total{model="m"} 42\nvllm:lat_bucket{le="1"} 5\nvllm:lat_sum 2.5\n')
    d = delta(before, after)
    assert d == {'vllm:prompt_tokens_total{model="m"}': 32, 'vllm:lat_bucket{le="1"}': 2, "vllm:lat_sum": 1.0}
    assert headline(d) == {'vllm:prompt_tokens_total{model="m"}': 32, "vllm:lat_sum": 1.0}
