"""A customer's requirements document: its reading (one line per mistake), its judgement on intervals (checked by
simulation against a known truth), and its place in the verdict (a must not met FAILs, a must undecided leaves
the run INCONCLUSIVE, a should never blocks)."""
from __future__ import annotations

import random

import pytest

from contracts import REPO_ROOT
from records import judge
from records.judge_requirements import PointSamples, SessionSamples, judge_requirements
from records.report import EvalRow, Section
from records.requirements import RequirementsError, parse_requirements, read_requirements

EXAMPLES = REPO_ROOT / "examples" / "requirements"


def _doc(**over) -> dict:
    doc = {"schema_version": "2.0", "model": {"name": "SmolLM2-135M-Instruct"}, "device": "cpu",
           "benchmarks": [{"isl": 128, "osl": 32, "concurrency": 1, "targets": [
               {"id": "ttft", "metric": "ttft_ms", "max": 100, "level": "must"}]}]}
    doc.update(over)
    return doc


def _point(bad_target: dict) -> dict:
    return _doc(benchmarks=[{"isl": 128, "osl": 32, "targets": [bad_target]}])


@pytest.mark.parametrize("name", ["smollm2_cpu.yaml", "smollm2_cpu_relaxed.yaml", "smollm2_cpu_at_value.yaml",
                                  "smollm2_stub.json"])
def test_the_shipped_examples_read(name: str) -> None:
    reqs = read_requirements(EXAMPLES / name)
    assert reqs.benchmarks and reqs.schema_version.startswith("2.")


@pytest.mark.parametrize("doc, words", [
    (_doc(benchmark=[]), "unknown key 'benchmark' in the document; did you mean 'benchmarks'"),
    (_point({"metric": "ttft_ms", "max": 1, "colour": "red"}), "unknown key 'colour'"),
    (_point({"metric": "ttft_ms", "level": "must"}), "is a must without a target: give max"),
    (_doc(evals=[{"task": "tt_offline_mc", "level": "must"}]), "must without a target: give reference_score"),
    (_point({"metric": "ttft_s", "max": 1}), "no metric 'ttft_s' exists; did you mean 'ttft_ms' (ms)"),
    (_point({"metric": "latency_ms", "max": 1}), "no metric 'latency_ms' exists"),
    (_point({"metric": "ttft_ms", "max": "500ms"}), "wrong units"),
    (_point({"metric": "ttft_ms", "max": 0.5, "unit": "s"}), "wrong unit 's' for ttft_ms: its unit is ms"),
    (_point({"metric": "error_rate", "max": 5}), "wrong units: error_rate is a share in 0..1"),
    (_point({"metric": "ttft_ms", "min": 5}), "give max alone, not min"),
    (_point({"metric": "throughput", "stat": "p99", "min": 5}), "throughput takes stat mean"),
    (_point({"metric": "goodput", "min": 0.9}), "goodput needs slo_ttft_ms"),
    (_point({"metric": "ttft_ms", "max": 5, "level": "may"}), "level 'may' is not must or should"),
    (_doc(schema_version="1.0"), "is not 2.x"),
    (_doc(model={"name": "x", "weights": "/w"}), "model.weights needs model.base"),
    (_doc(benchmarks=[], evals=[]), "requires nothing"),
])
def test_a_bad_document_is_refused_with_one_line(doc: dict, words: str) -> None:
    with pytest.raises(RequirementsError) as err:
        parse_requirements(doc)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_later_2x_version_is_read_and_points_become_the_benchmarks_points_arg() -> None:
    reqs = parse_requirements(_doc(schema_version="2.3"))
    assert reqs.points_arg() == "128x32x1"


def _samples(mean: float, n: int, rng: random.Random, sd: float = 10.0) -> PointSamples:
    ttfts = [rng.gauss(mean, sd) for _ in range(n)]
    tpots = [rng.gauss(10.0, 1.0) for _ in range(n)]
    return PointSamples("isl-128_osl-32_con-1", 1, ttfts, tpots, list(zip(ttfts, tpots)), 0)


def test_a_mean_bound_at_the_truth_is_rarely_decided_either_way() -> None:
    """Simulation against a known truth: the true mean TTFT is exactly the bound, so a 'met' or 'not met' is
    wrong; over 300 runs of 40 requests the judge decides wrongly at most about 5% of the time."""
    rng = random.Random(7)
    reqs = parse_requirements(_doc())
    wrong = 0
    for _ in range(300):
        section, _ = judge_requirements(reqs, {"isl-128_osl-32_con-1": _samples(100.0, 40, rng)}, [], {})
        wrong += section.rows[0].status != "undecided"
    assert wrong / 300 <= 0.05


def test_a_clear_miss_and_a_clear_pass_are_decided() -> None:
    rng = random.Random(3)
    reqs = parse_requirements(_doc())
    miss, _ = judge_requirements(reqs, {"isl-128_osl-32_con-1": _samples(140.0, 40, rng)}, [], {})
    met, _ = judge_requirements(reqs, {"isl-128_osl-32_con-1": _samples(60.0, 40, rng)}, [], {})
    assert miss.rows[0].status == "not met" and met.rows[0].status == "met"
    assert miss.rows[0].ci95[0] > 100 > met.rows[0].ci95[1]


def test_an_undecided_must_says_what_more_sampling_would_take() -> None:
    rng = random.Random(11)
    reqs = parse_requirements(_doc())
    section, judgement = judge_requirements(reqs, {"isl-128_osl-32_con-1": _samples(103.0, 12, rng)}, [], {})
    row = section.rows[0]
    assert row.status == "undecided" and "more) would decide it" in row.detail
    assert judgement.checks[0].required and judgement.checks[0].decision == "inconclusive" and not judgement.blockers


def _verdict(doc: dict, points=None, evals=(), sessions=None) -> judge.Verdict:
    _, judgement = judge_requirements(parse_requirements(doc), points or {}, list(evals), sessions or {})
    return judge.decide(model_status="EXPERIMENTAL", steps=[], targets=[], evals=[], tests=Section(ran=False),
                        stress_tests=Section(ran=False), benchmarks_judged=False, evals_judged=False,
                        known_issues=[], requirements=judgement)


def test_must_fails_the_run_should_never_blocks_and_an_unmeasured_must_is_inconclusive() -> None:
    rng = random.Random(5)
    slow = {"isl-128_osl-32_con-1": _samples(300.0, 40, rng)}
    failed = _verdict(_doc(), slow)
    assert failed.result == "FAIL" and failed.blockers[0].category == "requirements"
    assert "must not met: ttft_ms" in failed.blockers[0].detail
    should = _doc(benchmarks=[{"isl": 128, "osl": 32, "targets": [
        {"metric": "ttft_ms", "max": 100, "level": "should"}]}])
    assert _verdict(should, slow).result == "PASS"
    assert _verdict(_doc()).result == "INCONCLUSIVE"


def test_evals_are_decided_on_their_interval_against_reference_times_tolerance() -> None:
    doc = _doc(benchmarks=[], evals=[{"task": "mc", "reference_score": 0.7, "tolerance": 0.1}])
    row = EvalRow(task="mc", status="passed", value=0.66, ci95=[0.64, 0.68], samples=120, metric="acc")
    assert _verdict(doc, evals=[row]).result == "PASS"  # 0.64 >= 0.63
    row.ci95 = [0.55, 0.60]
    assert _verdict(doc, evals=[row]).result == "FAIL"


def test_sessions_passed_of_every_session_is_exact_over_the_run() -> None:
    doc = _doc(benchmarks=[], agentic=[{"name": "a", "sessions": 3, "targets": [
        {"metric": "sessions_passed", "min": 1.0, "slo_ttft_ms": 500}]}])
    good = SessionSamples("a", [100.0] * 9, [(True, 120.0)] * 3, 0, 9)
    slow = SessionSamples("a", [100.0] * 9, [(True, 120.0), (True, 900.0), (True, 120.0)], 0, 9)
    section, _ = judge_requirements(parse_requirements(doc), {}, [], {"a": good})
    assert section.rows[0].status == "met" and section.rows[0].shown_value == "3/3 sessions"
    assert _verdict(doc, sessions={"a": slow}).result == "FAIL"
