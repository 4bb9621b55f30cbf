"""The tests and stress records' judged numbers as verdict checks, and how the verdict reads them."""
from __future__ import annotations

import pytest

from records import judge
from records.report import EvalRow, Section, SectionItem
from records.section_checks import capacity_checks, section_checks, stress_checks, conformance_checks
from records.server_tests import CaseResult, TestsRecord
from records.stress import CapacityLevel, CapacityRecord, Drift, StressPointRecord, StressRecord


def _tests(divergent: int | None, compared: int | None = 8, outcome: str = "passed") -> TestsRecord:
    record = TestsRecord(cases=[CaseResult("a.py::t_shape", "passed"),
                                CaseResult("test_invariance.py::t_batch", outcome, divergent=divergent,
                                           compared=compared if divergent is not None else None)])
    record.summarise()
    return record


@pytest.mark.parametrize("divergent, allowed, decision", [
    (0, 0.0, "pass"),          # an allowance of 0 is a rule about the run's own answers
    (1, 0.0, "fail"),
    (0, 0.25, "inconclusive"),  # 0 of 8: Wilson 0%..32% holds 25%
    (7, 0.25, "fail"),          # 7 of 8: Wilson 53%..98%
])
def test_the_divergence_rate_is_recorded_and_decided_on_its_wilson_interval(divergent, allowed, decision):
    record = _tests(divergent)
    assert (record.batch_divergent, record.batch_compared) == (divergent, 8)
    assert record.batch_divergence_rate == divergent / 8
    cases, rate = conformance_checks(record, allowed)
    assert (cases.name, cases.n, cases.decision, cases.value) == ("tests api_conformance", 2, "pass", None)
    assert (rate.name, rate.value, rate.n, rate.target, rate.decision) == (
        "batch_divergence api_conformance", divergent / 8, 8, allowed, decision)
    assert rate.required and "Wilson" in rate.ci_method and rate.ci95[0] <= rate.value <= rate.ci95[1]


def test_a_record_without_invariance_cases_has_only_its_cases_check():
    record = _tests(None)
    assert record.batch_compared is None
    assert [c.name for c in conformance_checks(record, 0.0)] == ["tests api_conformance"]
    errored = _tests(3, outcome="error")  # an invariance case that broke compared nothing it can stand by
    assert errored.batch_compared is None and conformance_checks(errored, 0.0)[0].decision == "fail"


def _stress_point(**kw) -> StressPointRecord:
    base = dict(name="single_isl-64_osl-16_con-2_n-8", mode="single", sent=8, completed=8, status="passed",
                passed=True)
    return StressPointRecord(**{**base, **kw})


def test_stress_checks_carry_the_records_numbers_and_intervals():
    drift = Drift(latency_statistic="p99", latency_judged_drift_pct=12.0, latency_judged_drift_ci=[-5.0, 30.0],
                  latency_p99_drift_pct=12.0, latency_p99_drift_ci=[-5.0, 30.0], latency_p99_n=[300, 280],
                  latency_decision="inconclusive", memory_growth_after_warmup_pct=1.2, memory_growth_ci=[0.9, 1.5],
                  memory_samples=40, memory_decision="pass")
    endurance = _stress_point(name="endurance_con-2_dur-60s", mode="endurance", sent=100, completed=99, failed=1,
                              drift=drift, status="failed", passed=False, checks={
                                  "error_rate": {"value": 0.01, "limit": 0.0, "passed": False},
                                  "completed_any": {"value": 99.0, "limit": 1.0, "passed": True},
                                  "latency_drift_pct": {"value": 12.0, "limit": 20.0, "passed": None,
                                                            "decision": "inconclusive", "ci95": [-5.0, 30.0],
                                                            "n": [300, 280], "detail": "p99 drift 12%"}})
    not_run = _stress_point(name="multiple_con-8", status="not_run", passed=False)
    checks = {c.name: c for c in stress_checks(StressRecord(points=[endurance, not_run]))}
    assert set(checks) == {f"{k} endurance_con-2_dur-60s" for k in (
        "error_rate", "completed_any", "latency_drift_pct", "memory_growth_pct")}
    error = checks["error_rate endurance_con-2_dur-60s"]
    assert (error.value, error.n, error.decision, error.target) == (0.01, 100, "fail", 0.0) and error.ci95[0] > 0
    assert "1 of 100 requests failed" in error.detail
    latency = checks["latency_drift_pct endurance_con-2_dur-60s"]
    assert (latency.value, latency.ci95, latency.n, latency.target, latency.decision, latency.detail) == (
        12.0, [-5.0, 30.0], 580, 20.0, "inconclusive", "p99 drift 12%")
    assert "order-statistic" in latency.ci_method
    memory = checks["memory_growth_pct endurance_con-2_dur-60s"]  # judged on the record's drift alone
    assert (memory.value, memory.ci95, memory.n, memory.decision) == (1.2, [0.9, 1.5], 40, "pass")
    assert "Student t" in memory.ci_method
    done = checks["completed_any endurance_con-2_dur-60s"]
    assert (done.value, done.n, done.decision, done.ci95) == (99.0, 100, "pass", None)
    assert {c.item for c in checks.values()} == {"stress_load"}


def _capacity(target, levels, target_met=None, passed=True, capacity=2.0) -> CapacityRecord:
    return CapacityRecord(metric="concurrency", target=target, target_met=target_met, capacity=capacity,
                          passed=passed, status="passed" if passed else "inconclusive" if passed is None else "failed",
                          levels=levels)


def _level(level, holds, marginal=False, good=(0.98, 0.90, 1.0), sent=80):
    return CapacityLevel(level=level, holds=holds, marginal=marginal, goodput=good[0], goodput_ci_low=good[1],
                         goodput_ci_high=good[2], sent=sent, reason="holds" if holds else "undecided")


def test_capacity_is_the_goodput_of_the_level_that_decides_it():
    met = capacity_checks(_capacity(2.0, [_level(2.0, True), _level(4.0, False)], target_met=True))[0]
    assert (met.name, met.value, met.ci95, met.n, met.target, met.decision, met.required) == (
        "capacity goodput concurrency 2", 0.98, [0.90, 1.0], 80, 0.95, "pass", True)
    assert "Wilson" in met.ci_method
    assert (met.looks, met.stopped) == (1, "decided")  # measured once; how the level stopped
    undecided = _capacity(2.0, [_level(2.0, False, marginal=True, good=(0.97, 0.8, 1.0), sent=12)], passed=None,
                          capacity=0.0)
    check = capacity_checks(undecided)[0]
    assert (check.decision, check.required, check.n) == ("inconclusive", True, 12)
    shown = capacity_checks(_capacity(None, [_level(1.0, True), _level(2.0, True), _level(4.0, False)]))[0]
    assert (shown.name, shown.decision, shown.required) == ("capacity goodput concurrency 2", "pass", False)
    assert capacity_checks(_capacity(None, [])) == []


def _verdict(tests_record=None, stress_record=None, capacity=None, allowed=0.0):
    sections = {}
    for name, records in (("tests", [tests_record]), ("stress_tests", [stress_record, capacity])):
        items = [SectionItem(name=r.name, status=r.status, passed=r.passed, detail=r.detail) for r in records if r]
        sections[name] = Section(ran=bool(items), items=items)
    return judge.decide(model_status="EXPERIMENTAL", steps=[], targets=[], evals=[EvalRow("t", "passed", passed=True)],
                        tests=sections["tests"], stress_tests=sections["stress_tests"], benchmarks_judged=True,
                        evals_judged=True, known_issues=[],
                        section_checks=section_checks(tests_record, stress_record, capacity, allowed))


def test_the_verdict_lists_the_numbers_and_agrees_with_the_records():
    assert _verdict(_tests(0)).result == "PASS"
    v = _verdict(_tests(0), allowed=0.25)  # the case passed, but 8 answers cannot show a rate under 25%
    assert v.result == "INCONCLUSIVE" and [c.name for c in v.checks if c.decision == "inconclusive"] == [
        "batch_divergence api_conformance"]
    failing = _tests(2, outcome="failed")
    v = _verdict(failing)
    assert v.result == "FAIL" and [b.item for b in v.blockers] == ["api_conformance"]
    assert [c.decision for c in v.checks] == ["fail", "fail"]
    drift = Drift(latency_judged_drift_pct=30.0, latency_p99_n=[20, 20], latency_decision="inconclusive")
    point = _stress_point(mode="endurance", drift=drift, status="inconclusive", passed=None)
    stress = StressRecord(points=[point], status="inconclusive", passed=None, detail="inconclusive")
    v = _verdict(stress_record=stress)
    # the undecided number is the inconclusive check; no second, numberless check for the same record
    assert v.result == "INCONCLUSIVE" and [(c.name, c.n, c.ci95) for c in v.checks] == [
        (f"latency_drift_pct {point.name}", 40, None)]
    bare = StressRecord(points=[_stress_point(status="inconclusive", passed=None)], status="inconclusive",
                        passed=None, detail="undecided")
    assert [c.name for c in _verdict(stress_record=bare).checks] == ["stress_tests stress_load"]
