"""Unit tests of the media clients' pure parts: kinds, scores, probe inputs, point planning, load loop."""
from __future__ import annotations

import io
import json
import struct
import threading
import wave
import zlib

import pytest

from media_clients import scoring
from tests.helpers import model_spec
from records.media import kind_of
from media_clients.load import run_point
from media_clients.probe import tiny_png, tone_wav
from records.media import MediaPoint
from media_clients.run_media_benchmarks import plan_points
from media_clients.transport import Answer
from media_clients.workloads import Sent, Workload


def test_kind_of_maps_model_types_and_leaves_llms_alone():
    assert kind_of("image") == "image"
    assert kind_of("audio") == "speech"
    assert kind_of("CNN") == "cnn"
    assert kind_of("embedding") == "embedding"
    assert kind_of("text") is None
    assert kind_of("LLM") is None
    assert kind_of(None) is None and kind_of("") is None
    with pytest.raises(TypeError):
        kind_of({"model_type": "image"})   # a whole spec is a mistake, never "no media kind"


def test_wer_counts_substitutions_insertions_and_deletions():
    assert scoring.word_errors("The quick brown fox.", "the quick brown fox") == (0, 4)
    assert scoring.word_errors("a b c d", "a x c") == (2, 4)          # one substitution, one deletion
    assert scoring.word_errors("meet at 3 o'clock", "meet at three oclock") == (0, 4)
    assert scoring.corpus_wer([("a b", "a b"), ("c d", "")]) == 0.5


def test_top_k_and_cosine():
    assert scoring.top_k_hit(["Egyptian cat", "lynx"], ("tabby", "egyptian cat"))
    assert not scoring.top_k_hit(["a", "b", "c", "d", "e", "tabby"], ("tabby",), 5)
    assert abs(scoring.cosine([1, 0], [1, 0]) - 1) < 1e-9
    assert scoring.cosine([1, 0], [0, 1]) == 0


def test_probe_inputs_are_valid_png_and_wav():
    png = tiny_png(8)
    assert png.startswith(b"\x89PNG") and struct.unpack(">II", png[16:24]) == (8, 8)
    idat = png.index(b"IDAT")
    length = struct.unpack(">I", png[idat - 4:idat])[0]
    assert len(zlib.decompress(png[idat + 4:idat + 4 + length])) == 8 * 9
    with wave.open(io.BytesIO(tone_wav(0.5))) as clip:
        assert (clip.getframerate(), clip.getnchannels(), clip.getnframes()) == (16000, 1, 8000)


def _spec(kind: str, refs: list[dict], max_con: int = 4):
    return model_spec(model_type=kind, env_vars={"NUM_INFERENCE_STEPS": "4"},
                      device_model_spec={"max_concurrency": max_con, "perf_reference": refs})


def test_plan_points_takes_perf_references_then_sweeps_the_rest():
    refs = [{"isl": 0, "osl": 0, "max_concurrency": 1, "num_prompts": 6, "task_type": "image",
             "params": {"num_inference_steps": 2}},
            # another kind: ignored
            {"isl": 0, "osl": 0, "max_concurrency": 2, "num_prompts": 8, "task_type": "speech"}]
    ci = plan_points(_spec("image", refs), "image", "ci")
    assert [(p.concurrency, p.source) for p in ci] == [(1, "perf_reference"), (2, "sweep"), (4, "sweep")]
    assert ci[0].params == {"num_inference_steps": 2} and ci[1].params == {"num_inference_steps": 4}
    assert ci[0].num_requests == 8  # 6 asked for: a target is decided on at least 8 requests
    smoke = plan_points(_spec("image", refs), "image", "smoke")
    assert [(p.concurrency, p.num_requests) for p in smoke] == [(1, 2)]
    assert [p.concurrency for p in plan_points(_spec("cnn", []), "cnn", "smoke")] == [1, 2, 4]


class _FakeWorkload(Workload):
    """Answers without a server: every third request fails as HTTP 503 (exercises the counting)."""

    def __init__(self):
        super().__init__("cnn", "/v1/cnn/search-image", {})

    def send(self, http, model, index):
        if index % 3 == 2:
            return Sent(Answer("u", 503, b"{}", 0.01, "http_503", "busy"), 1, 0.0, "http_503", "busy")
        return Sent(Answer("u", 200, b"{}", 0.02), 1)

    def figures(self, sent, duration_s, latencies_ms):
        return {"items_per_s": sum(1 for s in sent if s.ok) / duration_s}


class _Run:
    model_id, served_model_name, http = "id_x", "x", None
    stop = threading.Event()

    def __init__(self, run_dir):
        self.run_dir = run_dir


def test_run_point_counts_and_classifies_failures(tmp_path):
    point = run_point(_Run(tmp_path), _FakeWorkload(), concurrency=2, num_requests=9, source="sweep")
    assert (point.completed, point.failed, point.not_sent) == (6, 3, 0)
    assert point.failures_by_class == {"http_503": 3}
    assert abs(point.error_rate - 3 / 9) < 1e-6
    assert point.latency_p50_ms == 20.0 and point.figures["items_per_s"] > 0
    back = MediaPoint.read(point.write(tmp_path / "p.json"))
    assert back.to_dict() == point.to_dict()
    assert json.loads((tmp_path / "p.json").read_text())["schema"] == "tt-media-point/1"
    # No server.pid.json and no container: the cost is n/a and says why, never a made-up number.
    assert point.work_units == 6 and point.cost_unit == "item" and point.server_core_seconds is None
    assert "CPU n/a: the server's process is not known" in point.cost_note


def test_run_point_records_the_local_servers_core_seconds_per_item(tmp_path):
    import os

    # The "server" is this test process: its own threads run the fake workload, so its tree's CPU grows.
    (tmp_path / "server.pid.json").write_text(json.dumps({"kind": "local", "pid": os.getpid()}))
    point = run_point(_Run(tmp_path), _FakeWorkload(), concurrency=2, num_requests=9, source="sweep")
    assert point.server_core_seconds is not None and point.server_core_seconds >= 0
    assert abs(point.core_seconds_per_unit * 6 - point.server_core_seconds) < 0.01
    assert point.cost_note.startswith(f"CPU: process tree of local server pid {os.getpid()}")


def test_speech_accuracy_interval_is_a_bootstrap_over_sentences_and_few_sentences_decide_little():
    from media_clients.eval_references import reference_for
    from media_clients.run_media_evals import score_interval

    ref = reference_for("speech", "whisper-tiny.en")
    three = [{"word_errors": e, "words": 12} for e in (0, 2, 5)]
    interval = score_interval("speech", ref, 1 - 7 / 36, three)
    assert interval.method.startswith("percentile bootstrap")
    assert interval.low < ref.target < interval.high  # 3 sentences at 0.81: undecided, not a fail
    many = [{"word_errors": e, "words": 12} for e in (0, 1, 2, 1, 0, 2, 1, 3, 1, 0) * 4]
    assert score_interval("speech", ref, 1 - 44 / 480, many).low > ref.target  # 40 sentences decide it


def test_fixed_item_checks_are_exact_and_condition_differences_are_named():
    from media_clients.eval_references import reference_for
    from media_clients.run_media_evals import condition_differences, score_interval

    cnn = reference_for("cnn", "efficientnet-lite0")
    assert cnn.every_item and score_interval("cnn", cnn, 1.0, []).as_list() == [1.0, 1.0]
    speech = reference_for("speech", "whisper-tiny.en")
    assert set(speech.conditions) == {"data", "generator", "cpu_isa", "compute_type"}
    from media_clients import data
    assert speech.conditions["data"] == data._speech_module().dataset_identity()  # the set it was measured on
    now = {**speech.conditions, "generator": "eSpeak NG text-to-speech: 1.52", "cpu_isa": "avx2"}
    assert condition_differences(speech.conditions, now) == [
        f"generator: eSpeak NG text-to-speech: 1.52 here, {speech.conditions['generator']} for the reference",
        f"cpu_isa: avx2 here, {speech.conditions['cpu_isa']} for the reference"]
    assert condition_differences(speech.conditions, dict(speech.conditions)) == []
