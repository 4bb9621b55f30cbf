"""The comparison with a baseline run, decided on the ratio's interval, and gated by the one judge."""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from history.store import open_store
from records.judge import judge_comparison
from records.report import Comparison
from reports import build_report, write_reports
from reports.comparison import CompareError, CompareSettings, baseline_from, build_comparison, decide, settings_from
from tests.helpers import model_spec

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "benchmarks_only_run"


def _run(tmp_path: Path, name: str, scale: float, run_id: str, started: str) -> Path:
    """A copy of the fixture run whose per-request TTFT and E2EL are multiplied by ``scale``."""
    dest = tmp_path / name
    shutil.copytree(FIXTURE, dest)
    for path in (dest / "benchmarks").glob("*.requests.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for row in rows:
            row["ttft_ms"] *= scale
            row["e2el_ms"] *= scale
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest.update(run_id=run_id, started=started)
    (dest / "manifest.json").write_text(json.dumps(manifest))
    return dest


def _history(tmp_path: Path, store=None, scales=(1.02, 0.98, 1.0)) -> tuple[Path, list[Path]]:
    """Accepted runs of one build, a little apart as runs on one host are (the run-to-run noise the gate
    needs: ``reports.run_noise``), indexed in ``store`` when given; (the newest, ``run-base``, all of them)."""
    runs = []
    for i, scale in enumerate(scales):
        name = "base" if i == len(scales) - 1 else f"base{i}"
        run = _run(tmp_path, name, scale, f"run-{name}", f"2026-01-0{1 + i}T00:00:00+00:00")
        if store is not None:
            store.index(build_report(run), run)
        runs.append(run)
    return runs[-1], runs


@pytest.mark.parametrize("ci, higher, expected", [
    ([1.20, 1.40], False, "regressed"), ([1.01, 1.04], False, "within_noise"), ([0.97, 1.3], False, "inconclusive"),
    ([0.85, 1.05], False, "within_noise"), ([0.96, 1.2], True, "within_noise"), ([0.85, 1.2], True, "inconclusive"),
    ([0.80, 0.90], False, "improved"), ([0.70, 0.90], True, "regressed"), ([1.1, 1.2], True, "improved"),
    (None, False, "inconclusive")])
def test_the_decision_is_made_on_the_interval_against_the_tolerance(ci, higher, expected) -> None:
    assert decide(ci, 0.05, higher) == expected


def test_a_30_percent_slower_run_regresses_and_fails_the_verdict(tmp_path) -> None:
    slow = _run(tmp_path, "slow", 1.3, "run-slow", "2026-01-11T00:00:00+00:00")
    same = _run(tmp_path, "same", 1.0, "run-same", "2026-01-12T00:00:00+00:00")
    with open_store(f"sqlite:///{tmp_path / 'h.sqlite3'}") as store:
        _history(tmp_path, store)
        settings = CompareSettings("last")

        def compare_with_last(run_dir):
            def hook(record):
                found = baseline_from(settings, record, store)
                return build_comparison(settings, record, run_dir, *found, store)
            return hook

        record = build_report(slow, compare=compare_with_last(slow))
        c = record.comparison
        assert c.baseline_run == "run-base" and c.same_host
        by_name = {m.name: m for m in c.metrics}
        ttft = by_name["isl-128_osl-128_con-1 ttft_ms"]
        assert ttft.decision == "regressed" and ttft.ratio == pytest.approx(1.3, rel=1e-3)
        assert ttft.ci95[0] > 1.05 and ttft.n == ttft.baseline_n == 8
        assert ttft.noise_runs == 3 and ttft.run_noise_pct == pytest.approx(2.0, abs=0.1)
        assert ttft.noise_source == "setup runs" and "setup runs" in ttft.ci_method
        assert record.verdict.result == "FAIL"
        assert {b.category for b in record.verdict.blockers} == {"comparison"}
        assert any(ch.category == "comparison" and ch.decision == "fail" for ch in record.verdict.checks)
        # every renderer shows it; the HTML has the trend plot
        written = write_reports(record, slow)
        assert "reports/report.html" in written
        html = (slow / "reports" / "report.html").read_text()
        assert 'data-plot="trend"' in html and "REGRESSED" in html
        assert "## Comparison with a baseline run" in (slow / "reports" / "report.md").read_text()
        assert json.loads((slow / "reports" / "report.json").read_text())["comparison"]["metrics"][0]["decision"]

        store.index(record, slow)  # as its reports step indexes it: verdict FAIL
        # the FAILED run is never the automatic baseline (else the next run as slow would pass as within
        # noise): the next run compares with the last run that passed, and the trend still shows both
        record = build_report(same, compare=compare_with_last(same))
        assert record.comparison.baseline_run == "run-base"
        # the same build: 8 requests of 15% spread a point cannot show "no change beyond 5%": undecided, and
        # advisory in a release's own comparison with last (not a gate): the verdict stays PASS
        same_ttft = [m for m in record.comparison.metrics if m.name.endswith("ttft_ms")]
        assert {m.decision for m in same_ttft} == {"inconclusive"} and all(m.runs_to_decide for m in same_ttft)
        # asked for (CompareSettings default=False, as --compare-to): a gate, so undecided is INCONCLUSIVE
        assert record.comparison.gate and record.verdict.result == "INCONCLUSIVE", record.verdict
        assert any(c.required and c.category == "comparison" and "runs of each build would decide" in c.detail
                   for c in record.verdict.checks)
        assert [p.run_id for p in record.comparison.trend] == ["run-base0", "run-base1", "run-base", "run-slow",
                                                               "run-same"]


def test_output_throughput_per_request_is_compared_and_lower_is_a_regression(tmp_path) -> None:
    """Each request's output tokens over its end-to-end seconds, from both runs' per-request records:
    a 30% slower run makes about 1/1.3 of the tokens/s (regressed), a 30% faster one more (improved)."""
    from reports.comparison import compare_runs
    from reports.distributions import request_output_rates

    base, history = _history(tmp_path)
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps(r) for r in (
        {"success": True, "e2el_ms": 2000.0, "output_tokens": 100},
        {"success": True, "e2el_s": 0.5, "completion_tokens": 10},
        {"success": False, "e2el_ms": 10.0, "output_tokens": 100},     # failed: no rate
        {"warmup": True, "e2el_ms": 10.0, "output_tokens": 100},       # warm-up: excluded like its latencies
        {"success": True, "e2el_ms": 0.0, "output_tokens": 5}, "not a row")) + "\n\n{broken\n")
    assert request_output_rates(rows) == [50.0, 20.0]
    assert request_output_rates(tmp_path / "missing.jsonl") is None
    for scale, decision in ((1.3, "regressed"), (1 / 1.3, "improved"), (1.0, "inconclusive")):
        run = _run(tmp_path, f"run-{scale:.2f}", scale, f"run-{scale:.2f}", "2026-01-11T00:00:00+00:00")
        metrics, _ = compare_runs(run, base, 0.05, history)
        rate = {m.name: m for m in metrics}["isl-128_osl-128_con-4 output_tok_s"]
        assert rate.higher_is_better and rate.n == rate.baseline_n == 16
        assert rate.ratio == pytest.approx(1 / scale, rel=1e-3) and rate.decision == decision, rate
        assert rate.baseline == pytest.approx(sum(request_output_rates(next((base / "benchmarks").glob(
            "*con-4*.requests.jsonl")))) / 16, rel=1e-3)
        if decision == "regressed":  # the one judge blocks on it like on a slower TTFT
            _, blockers, _ = judge_comparison(Comparison(baseline_run="run-base", metrics=[rate]))
            assert [b.item for b in blockers] == ["isl-128_osl-128_con-4 output_tok_s"]


def test_warn_shows_a_regression_without_failing(tmp_path) -> None:
    slow = _run(tmp_path, "slow", 1.3, "run-slow", "2026-01-11T00:00:00+00:00")
    settings = CompareSettings(str(tmp_path / "base"), on_regression="warn")
    with open_store(f"sqlite:///{tmp_path / 'h.sqlite3'}") as store:
        _history(tmp_path, store)
        record = build_report(slow, compare=lambda r: build_comparison(settings, r, slow, *baseline_from(
            settings, r, store), store))
    assert any(m.decision == "regressed" for m in record.comparison.metrics)
    # the slower requests leave some complete-tier targets inside their 95% interval (inconclusive), but
    # the regression itself neither blocks nor is a required check
    assert record.verdict.result == "INCONCLUSIVE" and not record.verdict.blockers
    assert not [c for c in record.verdict.checks if c.category == "comparison" and c.required]
    assert any("warn only" in n for n in record.verdict.notes)
    checks, blockers, _ = judge_comparison(record.comparison)
    assert not blockers and all(not c.required for c in checks)


def test_another_host_is_compared_only_when_asked_and_said(tmp_path) -> None:
    base = _run(tmp_path, "base", 1.0, "run-base", "2026-01-10T00:00:00+00:00")
    other = _run(tmp_path, "other", 1.0, "run-other", "2026-01-11T00:00:00+00:00")
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["environment"]["host"]["cores"] = 64
    (other / "manifest.json").write_text(json.dumps(manifest))
    with open_store(f"sqlite:///{tmp_path / 'h.sqlite3'}") as store:
        store.index(build_report(base), base)
        record = build_report(other)
        assert baseline_from(CompareSettings("last"), record, store) is None
        settings = CompareSettings("last", any_host=True)
        found = baseline_from(settings, record, store)
        c = build_comparison(settings, record, other, *found, store)
        assert not c.same_host and any("cores" in d for d in c.host_differences)
        assert any("hosts differ" in n for n in c.notes)


def test_another_host_named_on_purpose_is_refused_unless_asked(tmp_path, capsys) -> None:
    """As ``last`` never takes another host's run, a run named on purpose from another host is refused:
    the reports step leaves the run not compared, with one line naming both hosts' differing facts."""
    from reports.run_reports import RunHistory

    base = _run(tmp_path, "base", 1.0, "run-base", "2026-01-10T00:00:00+00:00")
    other = _run(tmp_path, "other", 1.0, "run-other", "2026-01-11T00:00:00+00:00")
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["environment"]["host"]["cores"] = 64
    (other / "manifest.json").write_text(json.dumps(manifest))
    record = build_report(other)
    with pytest.raises(CompareError) as refused:
        baseline_from(CompareSettings(str(base)), record, None)
    line = str(refused.value)
    assert "\n" not in line and f"--compare-to {base} ran on another host (cores: 64 (baseline None))" in line
    assert "compare_hosts=any" in line
    asked = CompareSettings(str(base), any_host=True)
    c = build_comparison(asked, record, other, *baseline_from(asked, record, None), None)
    assert not c.same_host and c.metrics and any("hosts differ (cores: 64 (baseline None))" in n for n in c.notes)
    # the reports step: not compared, and says why in one line
    cli = json.loads((other / "cli_args.json").read_text())
    (other / "cli_args.json").write_text(json.dumps({**cli, "compare_to": str(base)}))
    for wf_args, compared in (({}, False), ({"compare_hosts": "any"}, True)):
        history = RunHistory()
        try:
            comparison = history.comparer(other, None, wf_args)(build_report(other))
        finally:
            history.close()
        assert (comparison is not None and comparison.baseline_run == "run-base") is compared
    out = capsys.readouterr().out
    assert f"reports: comparison: --compare-to {base} ran on another host (cores: 64 (baseline None))" in out
    assert "compare_hosts=any; not compared" in out


def test_run_py_refuses_another_hosts_baseline_before_the_run_with_exit_2(tmp_path, capsys) -> None:
    """The same rule at the command line, from the baseline's manifest and this host's facts as the run
    would record them: exit 2 before any server is reached (the server URL below is closed)."""
    from tests.helpers import closed_port
    from workflows.cli import UsageError, check_baseline_host
    from workflows.main import host_environment, main

    base = _run(tmp_path, "base", 1.0, "run-base", "2026-01-10T00:00:00+00:00")
    here = host_environment(model_spec())
    manifest = json.loads((base / "manifest.json").read_text())
    manifest["environment"] = here
    (base / "manifest.json").write_text(json.dumps(manifest))
    check_baseline_host(str(base), here)  # the same host: accepted
    manifest["environment"] = {**here, "host": {**here["host"], "cores": (here["host"]["cores"] or 0) + 1}}
    (base / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(UsageError, match=r"ran on another host \(cores: \d+ \(baseline \d+\)\)"):
        check_baseline_host(str(base), here)
    argv = ["--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "benchmarks", "--server-url",
            f"http://127.0.0.1:{closed_port()}", "--compare-to", str(base), "--output-dir", str(tmp_path / "run")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ran on another host (cores:" in err[0] and "compare_hosts=any" in err[0], err
    assert not (tmp_path / "run").exists()


def test_last_takes_only_a_baseline_measured_alike(tmp_path) -> None:
    """A Docker smoke release is never compared with a local ci run of the same spec (other points,
    sample sizes and process tree); named on purpose it is, with a note."""
    from reports.comparison import run_setup

    base = _run(tmp_path, "base", 1.0, "run-base", "2026-01-10T00:00:00+00:00")
    smoke = _run(tmp_path, "smoke", 1.0, "run-smoke", "2026-01-11T00:00:00+00:00")
    cli = {"model": "SmolLM2-135M-Instruct", "docker_server": True, "workflow_args": "mode=smoke on_regression=warn"}
    (smoke / "cli_args.json").write_text(json.dumps(cli))
    assert run_setup(cli) == "mode=smoke, docker server"
    assert run_setup({"local_server": True}) == "mode=ci, local server"
    assert run_setup({}) == "mode=ci, external server"  # run.py attaches to a running server by default
    assert run_setup({"server_url": "http://h:1", "workflow_args": "mode=full"}) == "mode=full, external server"
    with open_store(f"sqlite:///{tmp_path / 'h.sqlite3'}") as store:
        store.index(build_report(base), base)
        record = build_report(smoke)
        settings = settings_from(cli, {}, model_spec(), "release")
        skipped: list[str] = []
        assert settings.setup == "mode=smoke, docker server"
        assert baseline_from(settings, record, store, skipped) is None
        assert skipped and "measured otherwise (mode=ci, local server" in skipped[0]
        alike = settings_from({"local_server": True}, {}, model_spec(), "release")
        assert baseline_from(alike, build_report(smoke), store) is not None   # same setup: found
        named = dataclasses.replace(settings, requested=str(base))
        c = build_comparison(named, record, smoke, *baseline_from(named, record, store), store)
        assert any("measured otherwise" in n for n in c.notes)


def test_settings_and_bad_baselines(tmp_path) -> None:
    spec = model_spec()
    assert settings_from({}, {}, spec, "benchmarks") is None
    release = settings_from({}, {}, model_spec(device_model_spec={"regression_tolerance": 0.1}), "release")
    assert release.requested == "last" and release.default and release.tolerance == 0.1
    assert release.on_regression == "fail"   # a ci release's own comparison gates
    # a smoke release's own comparison shows regressions, asked for (or on_regression=fail) it gates
    assert settings_from({}, {"mode": "smoke"}, spec, "release").on_regression == "warn"
    assert settings_from({"compare_to": "last"}, {"mode": "smoke"}, spec, "release").on_regression == "fail"
    assert settings_from({}, {"mode": "smoke", "on_regression": "fail"}, spec, "release").on_regression == "fail"
    assert settings_from({"compare_to": "x"}, {"regression_tolerance": "0.02"}, spec, "evals").tolerance == 0.02
    assert settings_from({"compare_to": "x"}, {}, spec, "evals").tolerance == 0.05
    with pytest.raises(CompareError, match="on_regression"):
        settings_from({"compare_to": "last"}, {"on_regression": "maybe"}, spec, "release")
    record = build_report(FIXTURE)
    with pytest.raises(CompareError, match="no run with that id"):
        with open_store(f"sqlite:///{tmp_path / 'h.sqlite3'}") as store:
            baseline_from(CompareSettings("no-such-run"), record, store)
    with pytest.raises(CompareError, match="could not be reached"):
        baseline_from(CompareSettings("last"), record, None)


def test_media_points_are_compared_on_their_requests_latency(tmp_path) -> None:
    from records.media import MediaPoint
    from reports.comparison import compare_runs

    def run(name: str, latencies: list[float]) -> Path:
        path = tmp_path / name / "benchmarks" / "media_point_embedding_con-1.json"
        path.parent.mkdir(parents=True)
        requests = [{"request_id": f"r{i}", "ms": ms, "status": 200, "error_class": None}
                    for i, ms in enumerate(latencies)]
        requests.append({"request_id": "bad", "ms": 1.0, "status": 500, "error_class": "http_5xx"})  # not counted
        MediaPoint(model_id="m", served_model_name="m", kind="embedding", endpoint="/v1/embeddings",
                   max_concurrency=1, num_requests=len(requests), requests=requests).write(path)
        return tmp_path / name

    base = run("base", [100.0 + (i % 5) for i in range(12)])
    history = [run("base1", [98.0 + (i % 5) for i in range(12)]), run("base2", [103.0 + (i % 5) for i in range(12)])]
    slow = run("slow", [130.0 + (i % 5) for i in range(12)])
    metrics, notes = compare_runs(slow, base, 0.05, history)
    assert [(m.name, m.decision, m.n) for m in metrics] == [("embedding_con-1 latency_ms", "regressed", 12)]
    few = run("few", [130.0, 131.0])
    assert compare_runs(few, base, 0.05, history)[0][0].decision == "inconclusive"
    # from one baseline run: the drift between both runs' blocks is the run-level noise, and 30% is decided
    alone, notes = compare_runs(slow, base, 0.05)
    assert alone[0].decision == "regressed" and alone[0].ci95[0] > 1.2 and alone[0].noise_runs is None
    assert alone[0].noise_source == "within-run blocks" and alone[0].noise_df == 10
    assert any("from within-run blocks: embedding_con-1 latency_ms" in n for n in notes), notes
    # runs without blocks (2 requests each) and no history: the prior (8%)
    level = compare_runs(few, run("few2", [100.0, 101.0]), 0.05)[0][0]
    assert level.noise_source == "prior" and level.decision == "inconclusive"  # 2 requests: never decides


def _pressure(run_dir: Path, share: float | None) -> None:
    """Record the host CPU pressure of the run's benchmarks step, as the run directory does (PSI)."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    next(s for s in manifest["steps"] if s["name"] == "benchmarks")["cpu_pressure"] = share
    (run_dir / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("mine, base, decided", [
    (0.55, 0.50, True),    # equally busy: the 30% is the build's, regressed
    (0.95, 0.40, False),   # busier host in this run: not decided
    (0.40, 0.95, False),   # busier host in the baseline: not decided either
    (0.50, None, False),   # the baseline did not record it: a busier host cannot be told apart
    (None, None, True),    # a host that never can say: compared on the requests alone, and said
])
def test_a_busier_host_is_never_taken_for_a_slower_build(tmp_path, mine, base, decided) -> None:
    from reports.comparison import PRESSURE_TOLERANCE

    slow = _run(tmp_path, "slow", 1.3, "run-slow", "2026-01-11T00:00:00+00:00")
    with open_store(f"sqlite:///{tmp_path / 'h.sqlite3'}") as store:
        base_dir, _ = _history(tmp_path, store)
        _pressure(base_dir, base)
        _pressure(slow, mine)
        settings = CompareSettings(str(base_dir))
        record = build_report(slow, compare=lambda r: build_comparison(settings, r, slow, *baseline_from(
            settings, r, store), store))
    c = record.comparison
    assert (c.cpu_pressure, c.baseline_cpu_pressure) == (mine, base)
    decisions = {m.decision for m in c.metrics if m.name.endswith("ttft_ms")}
    if decided:
        assert decisions == {"regressed"} and record.verdict.result == "FAIL"
        if mine is None:
            assert any("cannot say how busy" in n for n in c.notes)
    else:
        assert decisions == {"inconclusive"} and {m.decision for m in c.metrics} == {"inconclusive"}
        assert any("no metric is decided" in n for n in c.notes)
        assert not [b for b in record.verdict.blockers if b.category == "comparison"]
    assert PRESSURE_TOLERANCE == 0.10


def test_the_host_class_pools_every_setup_of_this_host(tmp_path) -> None:
    """Accepted runs of any spec and setup on this host tell its run-level noise: each group of runs measured
    alike gives its runs - 1 degrees of freedom once (its points share each run's state); groups of one run
    say nothing; a comparison of a setup with no history of its own uses the host's level."""
    from types import SimpleNamespace

    from reports.comparison import compare_runs
    from reports.comparison_data import host_levels

    def entry(spec: str, setup: str, tpot: float, ttft: float) -> SimpleNamespace:
        return SimpleNamespace(spec_key=spec, run_dir=setup, metrics={
            "isl-1_osl-1_con-1 tpot_ms": tpot, "isl-1_osl-1_con-4 tpot_ms": tpot * 1.5, "accuracy x": 0.5,
            "isl-1_osl-1_con-1 ttft_ms": ttft})

    entries = [entry("a", "smoke", 10.0, 50), entry("a", "smoke", 11.0, 50), entry("a", "smoke", 10.5, 60),
               entry("b", "ci", 20.0, 40), entry("b", "ci", 20.4, 40), entry("c", "ci", 5.0, 10)]
    levels = host_levels(entries, lambda path: str(path))
    assert set(levels) == {"tpot_ms", "ttft_ms"}
    tpot = levels["tpot_ms"]
    assert tpot.source == "host class" and tpot.df == 3 and tpot.runs == 5 and 0.01 < tpot.sd < 0.05, tpot
    assert levels["ttft_ms"].df == 3
    # a setup without three runs of its own takes the host class's level when it is the larger
    base, _ = _history(tmp_path, scales=(1.0,))
    slow = _run(tmp_path, "slow", 1.3, "run-slow", "2026-01-11T00:00:00+00:00")
    wide = {"ttft_ms": dataclasses.replace(levels["ttft_ms"], sd=0.5)}
    metrics, notes = compare_runs(slow, base, 0.05, host=wide)
    ttft = {m.name: m for m in metrics}["isl-128_osl-128_con-1 ttft_ms"]
    assert ttft.noise_source == "host class" and ttft.decision == "inconclusive" and ttft.run_noise_pct == 50.0
    assert any("host class: isl-128_osl-128_con-1 ttft_ms ±50%" in n for n in notes), notes


def test_a_point_whose_counters_saw_other_traffic_decides_no_comparison(tmp_path) -> None:
    """A point the server's counters show was not this client's alone (``records.reconciliation``) is compared
    but not decided, in either run, and a note names why; the other point still decides."""
    from records.bench import BenchPoint
    from records.reconciliation import Reconciliation
    from reports.comparison import compare_runs

    base, history = _history(tmp_path)
    slow = _run(tmp_path, "slow", 1.3, "run-slow", "2026-01-11T00:00:00+00:00")
    path = next((slow / "benchmarks").glob("point_*con-4*.json"))
    point = BenchPoint.read(path)
    point.reconciliation = Reconciliation(status="contaminated", detail="7 requests finished more than this "
                                          "point's client sent")
    point.write(path)
    metrics, notes = compare_runs(slow, base, 0.05, history)
    decisions = {m.name: m.decision for m in metrics}
    assert {d for n, d in decisions.items() if "con-4" in n} == {"inconclusive"}, decisions
    assert {d for n, d in decisions.items() if "con-1" in n} == {"regressed"}, decisions
    assert any("isl-128_osl-128_con-4: not decided: this run's point not clean (contaminated): 7 requests" in n
               for n in notes), notes
