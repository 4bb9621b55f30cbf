"""Adaptive sample size of media benchmark points (media_clients/load.py, records/sampling.py), no server.

The server's answers are a named fake (``_FakeServerAnswers``): the real CNN workload, whose one HTTP
exchange returns a prepared answer with a prepared latency (evenly spread over [20, 40] ms, median
about 30 ms), so the real body check, figures, estimates and stop rule run on known numbers. The
point is then read back by the report, which must decide each check as the point's sampling did.
"""
from __future__ import annotations

import json
import threading

import pytest

from benchmarking.bench_args import BenchArgError
from benchmarking.bench_args import parse_workflow_args as parse_bench_args

from media_clients.common import BadInput
from media_clients.load import run_point
from media_clients.run_media_benchmarks import plan_points, sample_goal, sampling_args
from media_clients.transport import Answer
from media_clients.workloads import CnnWorkload
from records.bench import STOP_REASONS, PointSampling
from records.media import MediaPoint
from records.sampling import MAX_REQUESTS_FACTOR, SampleGoal
from reports import build_report
from reports.markdown import render_markdown
from tests.helpers import MEDIA_SPEC_ID, model_spec, write_model_spec

BODY = json.dumps({"image_data": [{"label": "tabby", "score": 0.9}]}).encode()


def latency_ms(index: int) -> float:
    """The fake server's latency of request ``index``: evenly spread over [20, 40] ms."""
    return 20.0 + 20.0 * ((index * 0.6180339887) % 1.0)


class _FakeServerAnswers(CnnWorkload):
    """The CNN workload with its HTTP exchange replaced by a prepared answer (the server's fake); it can
    set the run's stop event when a given request is sent, as a Ctrl-C would."""

    def __init__(self, run=None, stop_at: int | None = None):
        super().__init__({})
        self.run, self.stop_at, self.indices = run, stop_at, []
        self._photos = [None]  # no photo is read: the fake never looks at the request

    def classify(self, http, model, photo, top_k=None):
        index = len(self.indices)
        self.indices.append(index)
        if self.stop_at is not None and index == self.stop_at:
            self.run.stop.set()
        return Answer("fake://cnn", 200, BODY, latency_ms(index) / 1000.0, request_id=f"r{index}")


class _Run:
    model_id, served_model_name, http = "id_x", "x", None

    def __init__(self, run_dir):
        self.run_dir = run_dir
        self.stop = threading.Event()


def _ref(con=2, num_prompts=4, targets=None):
    return {"isl": 0, "osl": 0, "max_concurrency": con, "num_prompts": num_prompts, "task_type": "cnn",
            "targets": {"functional": {"metrics": targets}} if targets else {}}


def _spec(refs, status="FUNCTIONAL", max_con=2):
    return model_spec(MEDIA_SPEC_ID, model_type="cnn", status=status,
                      device_model_spec={"max_concurrency": max_con, "perf_reference": refs})


def _goal(target, mode="ci", con=2, **kw) -> SampleGoal:
    planned = plan_points(_spec([_ref(con=con, targets={"latency_p50_ms": target})]), "cnn", mode)[0]
    goal = sample_goal(planned, *sampling_args({}, mode))
    for key, value in kw.items():
        setattr(goal, key, value)
    return goal


def _measure(tmp_path, goal, workload=None, run=None):
    run = run or _Run(tmp_path)
    workload = workload or _FakeServerAnswers()
    return run_point(run, workload, goal.concurrency, goal.min_requests, "perf_reference", goal)


def test_a_point_feeding_a_required_check_sends_the_deciding_minimum_in_every_mode():
    refs = [_ref(con=1, num_prompts=20, targets={"latency_p50_ms": 36.0}), _ref(con=3, targets={"rtf": 0.5})]
    for mode, counts in (("smoke", [8, 9]), ("ci", [8, 9]), ("full", [40, 9])):
        planned = [p for p in plan_points(_spec(refs, max_con=3), "cnn", mode) if p.source == "perf_reference"]
        assert [p.num_requests for p in planned] == counts, mode  # ci: 8, not the spec's 20, then rounds
        assert planned[0].checks == (("latency_p50_ms cnn_con-1 functional", "latency_p50_ms", 36.0),)
    # not required (EXPERIMENTAL), or on a figure that can have no interval: today's fixed counts, no checks
    for spec in (_spec(refs, status="EXPERIMENTAL", max_con=3),
                 _spec([_ref(con=1, num_prompts=20, targets={"prompt_tokens_per_image": 5.0})], max_con=3)):
        smoke, ci = plan_points(spec, "cnn", "smoke")[0], plan_points(spec, "cnn", "ci")[0]
        assert (smoke.num_requests, ci.num_requests, smoke.checks) == (2, 20, ())


def test_rounds_go_on_while_the_check_is_undecided_and_stop_when_it_is_decided(tmp_path):
    point = _measure(tmp_path, _goal(36.0))
    s = point.sampling
    assert (s.stop_reason, s.min_requests) == ("decided", 8) and s.rounds >= 2, s
    assert s.decisions == {"latency_p50_ms cnn_con-2 functional": "pass"}
    assert point.num_requests == s.requests == point.completed == len(point.requests) > 8
    assert (s.requests - 8) % 2 == 0 and point.not_sent == 0 and point.interrupted is None  # whole rounds of con 2
    assert len({r["request_id"] for r in point.requests}) == s.requests  # every round sends new requests
    clear = _measure(tmp_path, _goal(1000.0)).sampling  # decided at the minimum: no further round
    assert (clear.stop_reason, clear.rounds, clear.requests) == ("decided", 1, 8)
    missed = _measure(tmp_path, _goal(10.0)).sampling  # the whole interval misses it: decided, failed
    assert (missed.stop_reason, missed.rounds) == ("decided", 1) and set(missed.decisions.values()) == {"fail"}


def test_the_sampling_budget_precision_goal_and_cap_stop_an_undecided_point(tmp_path):
    on_median = 30.0  # the target sits inside every interval: never decided
    budget = _measure(tmp_path, _goal(on_median, budget_s=1e-6)).sampling
    assert (budget.stop_reason, budget.rounds, budget.requests) == ("sample_budget", 1, 8), budget
    assert "would overrun" in budget.detail and budget.decisions == {
        "latency_p50_ms cnn_con-2 functional": "inconclusive"}
    precise = _measure(tmp_path, _goal(on_median, precision=0.25)).sampling
    assert precise.stop_reason == "precision" and precise.rounds >= 2 and "still undecided" in precise.detail
    capped = _measure(tmp_path, _goal(on_median, max_requests=12)).sampling
    assert (capped.stop_reason, capped.requests) == ("max_requests", 12), capped
    assert _goal(on_median).max_requests == 8 * MAX_REQUESTS_FACTOR
    assert {budget.stop_reason, precise.stop_reason, capped.stop_reason} <= set(STOP_REASONS)


def test_a_signal_stops_inside_a_round_and_between_rounds_and_the_partial_point_says_so(tmp_path):
    run = _Run(tmp_path)
    inside = _measure(tmp_path, _goal(36.0, con=1), _FakeServerAnswers(run, stop_at=5), run)
    assert (inside.completed, inside.not_sent, inside.num_requests, inside.interrupted) == (6, 2, 8, "signal")
    assert (inside.sampling.stop_reason, inside.sampling.rounds) == ("cut_short", 1)
    run = _Run(tmp_path)
    between = _measure(tmp_path, _goal(36.0, con=1), _FakeServerAnswers(run, stop_at=7), run)
    assert (between.completed, between.not_sent, between.interrupted) == (8, 0, "signal")
    assert (between.sampling.stop_reason, between.sampling.rounds) == ("cut_short", 1)


def test_sweep_points_keep_their_fixed_count_and_record_no_sampling(tmp_path):
    spec = _spec([_ref(con=1, targets={"latency_p50_ms": 36.0})], max_con=4)
    sweeps = [p for p in plan_points(spec, "cnn", "ci") if p.source == "sweep"]
    assert [(p.concurrency, p.num_requests, p.checks) for p in sweeps] == [(2, 8, ()), (4, 16, ())]
    assert sample_goal(sweeps[0], 0.05, 60.0) is None
    point = run_point(_Run(tmp_path), _FakeServerAnswers(), 2, 8, "sweep")
    assert (point.num_requests, point.completed, point.sampling) == (8, 8, None)
    # a perf-reference point without a required check: its fixed count, and why it stopped there
    quiet = _spec([_ref(con=2, num_prompts=6)])
    planned = plan_points(quiet, "cnn", "ci")[0]
    point = run_point(_Run(tmp_path), _FakeServerAnswers(), 2, planned.num_requests, "perf_reference",
                      sample_goal(planned, 0.05, 60.0))
    assert (point.sampling.stop_reason, point.sampling.requests, point.sampling.decisions) == ("no_checks", 8, {})


def test_the_point_record_round_trips_and_the_report_decides_as_the_sampling_did(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    refs = [_ref(con=2, targets={"latency_p50_ms": 36.0, "items_per_s": 1.0})]
    write_model_spec(run_dir / "model_spec.json", MEDIA_SPEC_ID, model_type="cnn", status="FUNCTIONAL",
                     device_model_spec={"max_concurrency": 2, "perf_reference": refs})
    (run_dir / "manifest.json").write_text(json.dumps({
        "schema": "tt-run-manifest/1", "run_id": "r1", "model_id": "m", "workflow": "benchmarks", "status": "passed",
        "steps": [{"name": "benchmarks", "status": "passed"}]}))
    planned = plan_points(_spec(refs), "cnn", "ci")[0]
    point = run_point(_Run(run_dir), _FakeServerAnswers(), 2, planned.num_requests, "perf_reference",
                      sample_goal(planned, 0.05, 60.0))
    path = point.write(run_dir / "benchmarks" / "media_point_cnn_con-2.json")
    back = MediaPoint.read(path)
    assert back.to_dict() == point.to_dict() and isinstance(back.sampling, PointSampling)
    assert json.loads(path.read_text())["sampling"]["stop_reason"] == point.sampling.stop_reason == "decided"

    record = build_report(run_dir)
    checks = {c.name: c for c in record.verdict.checks if c.item == "cnn_con-2" and not c.name.startswith("error")}
    assert {name: c.decision for name, c in checks.items()} == point.sampling.decisions == {
        "latency_p50_ms cnn_con-2 functional": "pass", "items_per_s cnn_con-2 functional": "pass"}
    assert all(c.n == point.sampling.requests for c in checks.values())
    md = render_markdown(record)
    assert f"cnn_con-2: {point.sampling.requests} requests in {point.sampling.rounds} rounds (minimum 8" in md
    assert "stopped: decided" in md


def test_sampling_args_read_the_benchmarks_keys_and_refuse_bad_values():
    assert sampling_args({}, "smoke") == (0.05, 30.0) and sampling_args({}, "full") == (0.05, 300.0)
    assert sampling_args({"precision": "0.1", "sample_budget_s": "12"}, "ci") == (0.1, 12.0)
    for bad in ({"precision": "1.5"}, {"precision": "x"}, {"sample_budget_s": "0"}, {"sample_budget_s": "nan"}):
        with pytest.raises(BadInput) as media_error:
            sampling_args(bad, "ci")
        # The LLM benchmarks refuse the same values with the same line (records.sampling.sampling_setting).
        with pytest.raises(BenchArgError) as llm_error:
            parse_bench_args(bad)
        assert str(media_error.value) == str(llm_error.value)


def test_perf_tiers_caps_the_checks_a_point_samples_for():
    """A COMPLETE model's point samples for its functional and complete targets; with perf_tiers=functional
    only for the functional one, as the verdict then requires."""
    ref = _ref(con=1)
    ref["targets"] = {"functional": {"metrics": {"latency_p50_ms": 900.0}},
                      "complete": {"metrics": {"latency_p50_ms": 300.0}}}
    spec = _spec([ref], status="COMPLETE")
    tiers = lambda checks: sorted(name.rsplit(" ", 1)[1] for name, _, _ in checks)  # noqa: E731
    assert tiers(plan_points(spec, "cnn", "ci")[0].checks) == ["complete", "functional"]
    assert tiers(plan_points(spec, "cnn", "ci", perf_tiers="functional")[0].checks) == ["functional"]
