"""Media figures' 95% intervals from a point's own per-request rows, and the media tier checks decided on them."""
from __future__ import annotations

import pytest

from contracts.intervals import bootstrap_ratio, quantile_interval
from contracts.sequential import mean_cs
from records import judge
from records.media import MediaPoint
from records.media_estimates import figure_estimates
from records.report import EvalRow, MediaRow, Section

LATENCIES = [900.0, 1100.0, 1000.0, 950.0, 1050.0, 1000.0, 980.0, 1020.0, 990.0, 1010.0, 1005.0, 995.0]


def _point(kind="image", latencies=LATENCIES, units=None, figures=None, failed=0, **kw) -> MediaPoint:
    rows = [{"request_id": f"r{i}", "ms": ms, "status": 200, "error_class": None,
             **({} if units is None else {"units": units[i]})} for i, ms in enumerate(latencies)]
    rows += [{"request_id": f"f{i}", "ms": 5.0, "status": 503, "error_class": "http_5xx"} for i in range(failed)]
    return MediaPoint(model_id="m", served_model_name="m", kind=kind, endpoint="/x", max_concurrency=1,
                      num_requests=len(rows), completed=len(latencies), failed=failed, requests=rows,
                      figures=figures or {}, **kw)


def test_each_figure_gets_the_interval_its_definition_calls_for():
    mean_s = sum(LATENCIES) / len(LATENCIES) / 1000
    point = _point(params={"num_inference_steps": 4}, items_per_request=1, failed=2,
                   figures={"s_per_step": mean_s / 4, "images_per_s": 0.5, "latency_p50_ms": 1000.0,
                            "latency_p95_ms": 1080.0})
    est = figure_estimates(point)
    assert {k: e.n for k, e in est.items()} == dict.fromkeys(est, 12)  # completed requests only
    mean = mean_cs([ms / 1000 for ms in LATENCIES], batch=1)   # the point's concurrency 1: one request a round
    step = est["s_per_step"].interval
    assert (step.low, step.high) == pytest.approx((mean.low / 4, mean.high / 4))
    assert step.low < est["s_per_step"].value < step.high and "confidence sequence" in step.method
    p50 = quantile_interval(LATENCIES, 0.5)
    assert (est["latency_p50_ms"].interval.low, est["latency_p50_ms"].interval.high) == (p50.low, p50.high)
    assert est["latency_p95_ms"].interval is None  # 12 requests cannot bound a p95 from above
    # throughput: the spread of items per request-second, applied to the point's own images/s
    rate = 12 / (sum(LATENCIES) / 1000)
    spread = bootstrap_ratio([1.0] * 12, [ms / 1000 for ms in LATENCIES], iterations=judge.BOOTSTRAP_ITERATIONS)
    tput = est["images_per_s"].interval
    assert (tput.low, tput.high) == pytest.approx((0.5 * spread.low / rate, 0.5 * spread.high / rate))
    assert tput.low < 0.5 < tput.high and "wall time" in tput.method


def test_speech_needs_each_clips_audio_seconds_and_every_figure_needs_eight_requests():
    audio = [2.0, 4.0] * 6
    rtf = sum(ms / 1000 / a for ms, a in zip(LATENCIES, audio)) / 12
    with_units = figure_estimates(_point("speech", units=audio, figures={"rtf": rtf, "audio_s_per_s": 3.0}))
    assert with_units["rtf"].interval.low < rtf < with_units["rtf"].interval.high
    assert with_units["audio_s_per_s"].interval is not None
    older = figure_estimates(_point("speech", figures={"rtf": rtf}))  # rows written before units were
    assert older["rtf"].interval is None and older["rtf"].n == 12
    few = figure_estimates(_point(latencies=LATENCIES[:7], params={"num_inference_steps": 4},
                                  figures={"s_per_step": 0.25, "images_per_s": 1.0, "unknown_figure": 3.0}))
    assert all(e.interval is None for e in few.values()) and few["s_per_step"].n == 7


def _row(ci=(0.40, 0.60), figures=None, ran=True, completed=12, failed=0):
    return MediaRow(key="image_con-1", kind="image", max_concurrency=1, ran=ran, num_requests=completed + failed,
                    completed=completed, failed=failed, error_rate=failed / (completed + failed),
                    failures_by_class={"http_5xx": failed} if failed else {},
                    figures=figures or {"images_per_s": 0.5}, ci95={"images_per_s": list(ci)} if ci else {},
                    samples={"images_per_s": completed}, ci_methods={"images_per_s": "bootstrap"} if ci else {})


def _verdict(row, targets, status="FUNCTIONAL", mode=None):
    row.tiers = [judge.check_metric_tier("functional", True, targets, row.figures if row.ran else None,
                                         row.error_rate, 0.0, row.num_requests)]
    return judge.decide(model_status=status, steps=[], targets=[], evals=[EvalRow("t", "passed", passed=True)],
                        tests=Section(ran=False), stress_tests=Section(ran=False), benchmarks_judged=True,
                        evals_judged=True, known_issues=[], media=[row], mode=mode)


@pytest.mark.parametrize("target, decision, result", [
    (0.3, "pass", "PASS"), (0.5, "inconclusive", "INCONCLUSIVE"), (0.8, "fail", "FAIL")])
def test_a_media_target_is_decided_on_its_interval(target, decision, result):
    v = _verdict(_row(), {"images_per_s": target})
    check = next(c for c in v.checks if c.name == "images_per_s image_con-1 functional")
    assert (check.decision, check.required, check.n, check.ci95, check.value) == (decision, True, 12, [0.4, 0.6], 0.5)
    assert v.result == result
    error = next(c for c in v.checks if c.name == "error_rate image_con-1")
    assert (error.decision, error.n, error.value) == ("pass", 12, 0.0)
    if decision == "fail":
        assert v.blockers[0].detail == "functional: images_per_s 0.5 vs target 0.8 (95% CI [0.4, 0.6], n=12)"


def test_no_interval_is_inconclusive_and_a_smoke_run_shows_it_without_requiring_it():
    ci_run = _verdict(_row(ci=None, completed=2), {"images_per_s": 0.01})
    check = next(c for c in ci_run.checks if c.category == "benchmarks" and c.name.startswith("images_per_s"))
    assert ci_run.result == "INCONCLUSIVE" and check.decision == "inconclusive" and "fewer than 8" in check.detail
    smoke = _verdict(_row(ci=None, completed=2), {"images_per_s": 0.01}, mode="smoke")
    check = next(c for c in smoke.checks if c.name.startswith("images_per_s"))
    assert smoke.result == "PASS" and not check.required and "smoke" in check.detail
    # a smoke run still fails what it can decide, and a point that did not run still blocks
    assert _verdict(_row(), {"images_per_s": 0.8}, mode="smoke").result == "FAIL"
    not_run = _verdict(_row(ran=False, ci=None), {"images_per_s": 0.01}, mode="smoke")
    assert [(b.item, b.tier) for b in not_run.blockers] == [("image_con-1", "functional")]


def test_failed_requests_fail_the_targets_they_met():
    v = _verdict(_row(completed=11, failed=1), {"images_per_s": 0.3}, status="EXPERIMENTAL")
    assert v.result == "FAIL" and v.blockers[0].detail == "1 of 12 requests failed (http_5xx 1) > allowed 0"
    target = next(c for c in v.checks if c.name.startswith("images_per_s"))
    assert target.decision == "fail" and not target.required and "error rate" in target.detail
