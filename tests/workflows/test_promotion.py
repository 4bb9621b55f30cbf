"""Status from evidence: proposals from synthetic releases (promote only on N clean PASSes in a row that
measured the higher status; INCONCLUSIVE never promotes; a FAIL or a regression demotes, naming the run),
the history read per host class and judged status, line-level catalog edits with the version rule, and
the generated support doc and release notes."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from datetime import date
from pathlib import Path

import pytest

from contracts import REPO_ROOT
from contracts.model_spec import KnownIssue
from history.store import RunEntry
from workflows.catalog import load_catalog, load_catalog_from
from workflows.catalog_edit import CatalogEditError, apply_statuses, next_version
from workflows.promotion import Evidence, host_class_runs, propose, write_promotions
from workflows.release_docs import render_release_notes, render_support_doc

SMOL = "id_vllm-cpu_SmolLM2-135M-Instruct_cpu"


def ev(run_id: str, verdict: str = "PASS", measured: str | None = "TOP_PERF", regressed: tuple[str, ...] = (),
       **kw) -> Evidence:
    return Evidence(run_id=run_id, started=run_id, verdict=verdict, measured_status=measured,
                    judged_status="COMPLETE", regressed=regressed, **kw)


def decide(current: str, *evidence: Evidence, releases: int = 2):
    return propose(SMOL, "SmolLM2-135M-Instruct", "cpu", "vllm-cpu", current, list(evidence), releases)


def test_two_clean_passes_that_measured_higher_promote_to_the_lowest_they_all_support() -> None:
    p = decide("COMPLETE", ev("r3"), ev("r2"))
    assert (p.decision, p.to_status, p.evidence) == ("promote", "TOP_PERF", ("r3", "r2"))
    p = decide("FUNCTIONAL", ev("r3", measured="TOP_PERF"), ev("r2", measured="COMPLETE"), ev("r1", "FAIL"))
    assert (p.decision, p.to_status, p.evidence) == ("promote", "COMPLETE", ("r3", "r2"))


@pytest.mark.parametrize("evidence, why", [
    ((ev("r1"),), "1 clean PASS(es) in a row; a status change needs 2"),          # one lucky run
    ((ev("r2"), ev("r1", "INCONCLUSIVE")), "run r1 was INCONCLUSIVE"),              # an undecided one between
    ((ev("r2", "INCONCLUSIVE"), ev("r1")), "run r2 is INCONCLUSIVE"),               # the newest undecided
    ((), "no release of it at this status"),
])
def test_one_run_or_an_inconclusive_one_never_promotes(evidence, why) -> None:
    p = decide("COMPLETE", *evidence)
    assert p.decision == "keep" and p.to_status == "COMPLETE" and why in p.reason, p.reason


def test_passes_that_measure_no_higher_status_keep_it() -> None:
    p = decide("COMPLETE", ev("r2", measured="COMPLETE"), ev("r1"))
    assert p.decision == "keep" and "no higher status than COMPLETE" in p.reason


def test_a_fail_or_a_regression_in_the_newest_release_demotes_naming_the_run() -> None:
    p = decide("COMPLETE", ev("r3", "FAIL", measured="EXPERIMENTAL", blocker="[crash] server: died"), ev("r2"))
    assert (p.decision, p.to_status, p.evidence) == ("demote", "EXPERIMENTAL", ("r3",))
    assert "run r3 FAILED: [crash] server: died" in p.reason
    p = decide("TOP_PERF", ev("r3", regressed=("isl-128 ttft_ms",), baseline_run="r2"), ev("r2"), ev("r1"))
    assert (p.decision, p.to_status) == ("demote", "COMPLETE")
    assert p.reason == "run r3 regressed against r2: isl-128 ttft_ms"
    p = decide("EXPERIMENTAL", ev("r1", "FAIL", measured=None))
    assert p.decision == "keep" and "already the lowest status" in p.reason


def _gated_release(tmp_path: Path, run_id: str, ratio: float, on_regression: str = "fail") -> RunEntry:
    """A release's report.json whose comparison decided TPOT regressed at ``ratio`` against r1: with
    on_regression=fail the judge made it a blocker of category comparison (verdict FAIL)."""
    from records.report import Blocker, Comparison, ComparisonMetric
    from reports import build_report

    record = build_report(REPO_ROOT / "tests" / "reports" / "fixtures" / "benchmarks_only_run")
    name = "isl-128_osl-128_con-1 tpot_ms"
    record.comparison = Comparison(baseline_run="r1", on_regression=on_regression, metrics=[
        ComparisonMetric(name=name, baseline=10.0, value=10.0 * ratio, ratio=ratio, ci95=[ratio - 0.05, ratio + 0.05],
                         decision="regressed"),
        ComparisonMetric(name="isl-128_osl-128_con-1 ttft_ms", ratio=1.01, decision="within_noise")])
    record.metadata.model_status = "COMPLETE"
    if on_regression == "fail":
        record.verdict.result = "FAIL"
        record.verdict.blockers = [Blocker("comparison", name, f"x{ratio:.2f} beyond 1.05 against r1")]
    (tmp_path / run_id / "reports").mkdir(parents=True)
    record.write(tmp_path / run_id / "reports" / "report.json")
    return RunEntry(run_id, str(tmp_path / run_id), "k", "m", "cpu", "i", "vllm", "0.1.0", "h",
                    {"engine": "external"}, "release", "failed", record.verdict.result, run_id, run_id)


def test_a_regression_the_gate_failed_demotes_naming_the_metric_and_its_ratio(tmp_path) -> None:
    from workflows.promotion import evidence_of

    newest = evidence_of(_gated_release(tmp_path, "r3", 1.4))
    assert newest is not None and newest.gated and newest.verdict == "FAIL"
    assert newest.regressions == ("isl-128_osl-128_con-1 tpot_ms x1.40",) and newest.within_noise == 1
    p = decide("COMPLETE", newest, ev("r2"), ev("r1"))
    assert (p.decision, p.to_status, p.evidence) == ("demote", "FUNCTIONAL", ("r3",))
    assert p.reason == ("run r3 regressed against r1: isl-128_osl-128_con-1 tpot_ms x1.40 (the regression gate "
                        "failed its verdict)")
    notes = render_release_notes("0.1.1", "cpu", 2, [load_catalog().specs[SMOL]], [p], {SMOL: [newest]}, "abc",
                                 today=date(2026, 1, 1))
    assert "| COMPLETE | FUNCTIONAL | r3 | run r3 regressed against r1: isl-128_osl-128_con-1 tpot_ms x1.40" in notes
    assert "vs r1: regressed: isl-128_osl-128_con-1 tpot_ms x1.40 (failed the verdict); 1 within noise" in notes
    assert "engine external" in notes
    warned = evidence_of(_gated_release(tmp_path, "r4", 1.4, on_regression="warn"))
    assert warned is not None and not warned.gated and warned.verdict != "FAIL"
    assert decide("COMPLETE", warned, ev("r2")).reason == \
        "run r4 regressed against r1: isl-128_osl-128_con-1 tpot_ms x1.40"


def test_the_host_class_is_the_newest_runs(tmp_path) -> None:
    def entry(run_id: str, host: str) -> RunEntry:
        return RunEntry(run_id, "", "k", "m", "cpu", "i", "vllm", "0.1.0", host, {}, "release", "passed", "PASS",
                        run_id, run_id)

    runs = host_class_runs([entry("2026-01-01", "a"), entry("2026-01-03", "b"), entry("2026-01-02", "b")])
    assert [e.run_id for e in runs] == ["2026-01-03", "2026-01-02"]
    found = [decide("COMPLETE", ev("r2"), ev("r1"))]
    doc = json.loads(write_promotions(tmp_path, "cpu", 2, found, {SMOL: [ev("r2")]}).read_text())
    assert doc["promotions"][0] == {"spec": SMOL, "model": "SmolLM2-135M-Instruct", "device": "cpu",
                                    "impl": "vllm-cpu", "from": "COMPLETE", "to": "TOP_PERF", "decision": "promote",
                                    "evidence": ["r2", "r1"], "reason": found[0].reason}


@pytest.fixture
def repo_copy(tmp_path) -> Path:
    """The catalog's templates, VERSION and the docs folder, copied: edits never touch the checkout."""
    shutil.copytree(REPO_ROOT / "workflows" / "model_specs", tmp_path / "workflows" / "model_specs")
    shutil.copy(REPO_ROOT / "VERSION", tmp_path / "VERSION")
    (tmp_path / "docs").mkdir()
    return tmp_path


def _diff(before: Path, after: Path) -> list[str]:
    import difflib

    lines = difflib.unified_diff(before.read_text().splitlines(), after.read_text().splitlines(), lineterm="", n=0)
    return [line for line in lines if line[:1] in "+-" and line[:3] not in ("+++", "---")]


LLAMA8 = "id_tt-transformers_Llama-3.1-8B{}_{}"


def test_apply_edits_status_lines_and_bumps_the_versions_by_rule(repo_copy) -> None:
    catalog = load_catalog()
    smol = catalog.specs[SMOL]
    # p100: a device entry's own status; n150: the template's, so the entry gets its own. Both lines decide
    # the base and the Instruct weights, which move together.
    moves = [(smol, "TOP_PERF"), (catalog.specs["id_vllm-cpu_Llama-3.2-1B-Instruct_cpu"], "EXPERIMENTAL")]
    moves += [(catalog.specs[LLAMA8.format(w, d)], s) for w in ("", "-Instruct")
              for d, s in (("p100", "FUNCTIONAL"), ("n150", "COMPLETE"))]
    version, written = apply_statuses(repo_copy, moves)
    old = (REPO_ROOT / "VERSION").read_text().strip()
    assert version == next_version(old) and (repo_copy / "VERSION").read_text().strip() == version
    specs = repo_copy / "workflows" / "model_specs"
    assert sorted(p.name for p in written) == ["VERSION", "cpu.yaml", "tt_llm.yaml"]  # Llama cpu: no change
    cpu = _diff(REPO_ROOT / "workflows" / "model_specs" / "cpu.yaml", specs / "cpu.yaml")
    assert cpu == ["-    status: COMPLETE", "+    status: TOP_PERF", f'+    version: "{version}"'], cpu
    tt = _diff(REPO_ROOT / "workflows" / "model_specs" / "tt_llm.yaml", specs / "tt_llm.yaml")
    assert len(tt) == 5 and f'+    version: "{version}"' in tt, tt   # two entry lines changed, one version pinned
    assert any("device: p100" in line and "status: FUNCTIONAL" in line for line in tt if line.startswith("+"))
    assert any("device: n150" in line and "status: COMPLETE" in line for line in tt if line.startswith("+"))
    after = load_catalog_from(specs, version)
    changed = {spec.model_id: status for spec, status in moves}
    for sid, spec in after.specs.items():
        assert spec.status.name == changed.get(sid, catalog.specs[sid].status.name), sid
    assert after.specs[SMOL].version == version and after.specs[SMOL].docker_image == smol.docker_image.replace(
        f":{old}-", f":{version}-")
    assert apply_statuses(repo_copy, [(after.specs[SMOL], "TOP_PERF")]) == (None, [])  # nothing to change


def test_a_line_that_decides_specs_the_evidence_did_not_move_is_refused(repo_copy) -> None:
    catalog = load_catalog()
    with pytest.raises(CatalogEditError, match="also decides the status of id_tt-transformers_Llama-3.1-8B_n150"):
        apply_statuses(repo_copy, [(catalog.specs[LLAMA8.format("-Instruct", "n150")], "COMPLETE")])
    assert (repo_copy / "VERSION").read_text() == (REPO_ROOT / "VERSION").read_text()  # nothing written


def test_support_doc_and_release_notes_come_from_the_catalog_and_the_evidence() -> None:
    catalog = load_catalog()
    smol = replace(catalog.specs[SMOL], known_issues=[
        KnownIssue("evals", "gsm8k", "tokenizer drift", "release team", "2999-01-01"),
        KnownIssue("evals", "mmlu", "old waiver", "someone", "2020-01-01")])
    found = [decide("COMPLETE", ev("r2", engines={"vllm-cpu": "0.32.0"}, host_fingerprint="abcd", baseline_run="r1",
                                   improved=("isl-128 tpot_ms",), within_noise=3), ev("r1"))]
    evidence = {SMOL: [ev("r2", engines={"vllm-cpu": "0.32.0"}, host_fingerprint="abcd", baseline_run="r1",
                          improved=("isl-128 tpot_ms",), within_noise=3), ev("r1")]}
    doc = render_support_doc(list(catalog.specs.values()), "0.1.1", evidence)
    assert doc == render_support_doc(list(catalog.specs.values()), "0.1.1", evidence)  # no timestamp
    rows = [line for line in doc.splitlines() if line.startswith("| ") and not line.startswith("| Model")]
    assert len(rows) == len(catalog.specs)
    assert "| SmolLM2-135M-Instruct | cpu | vllm-cpu | yes | COMPLETE |" in doc and "PASS r2, PASS r1" in doc
    notes = render_release_notes("0.1.1", "cpu", 2, [smol], found, evidence, "abc123", today=date(2026, 1, 1))
    assert "Commit abc123" in notes and "| COMPLETE | TOP_PERF | r2, r1 |" in notes
    assert "vs r1: improved: isl-128 tpot_ms; 3 within noise" in notes and "vllm-cpu 0.32.0" in notes
    assert "| abcd |" in notes
    assert "| evals/gsm8k | tokenizer drift | release team | 2999-01-01 |" in notes
    assert "evals/mmlu no longer waives: expired after 2020-01-01" in notes and "| evals/mmlu |" not in notes


def test_the_committed_support_doc_lists_every_catalog_spec_at_its_status() -> None:
    doc = (REPO_ROOT / "docs" / "model_support.md").read_text()
    for spec in load_catalog().specs.values():
        row = f"| {spec.model_name} | {spec.device_type.value} | {spec.impl.impl_name} |"
        line = next((x for x in doc.splitlines() if x.startswith(row)), None)
        assert line is not None and f"| {spec.status.name} | {spec.version} |" in line, (row, line)


@pytest.mark.slow
def test_release_dry_run_two_clean_runs_promote_then_a_regression_demotes(repo_copy, tmp_path) -> None:
    """Slow: three stub-engine matrix runs (each a run.py with its server, benchmarks and report), each
    followed by --promote --apply on a copy of the catalog, as the release pipeline does on a runner.

    Run 1 is one clean PASS (kept: one run never promotes); run 2 is the second in a row, so the COMPLETE
    spec rises to TOP_PERF (its catalog line, VERSION and the spec version move; the docs follow); run 3's
    stub answers slower than the TOP_PERF target, so the spec is demoted naming run 3."""
    import os
    import subprocess
    import sys

    ttft = tmp_path / "ttft_ms"
    engine = tmp_path / "fake_engine.sh"
    engine.write_text(f"#!/bin/sh\ncd {REPO_ROOT}\nexec {sys.executable} -m benchmarking.stub_server --port "
                      f"$SERVICE_PORT --ttft-ms $(cat {ttft}) --itl-ms 5 --model SmolLM2-135M-Instruct\n")
    engine.chmod(0o755)
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        "schema: tt-release-matrix/1\ntiers:\n  stub:\n    description: the stub engine\n    devices: [cpu]\n"
        "    statuses: [EXPERIMENTAL, FUNCTIONAL, COMPLETE, TOP_PERF]\n    models: [SmolLM2-135M-Instruct]\n"
        "    impls: [vllm-cpu]\n    workflow: benchmarks\n    mode: smoke\n"
        "promotion:\n  releases: 2\n  required_tiers:\n    cpu: [stub]\n")
    env = dict(os.environ, TT_ENGINE_PYTHON=str(engine), TT_HISTORY_URL=f"sqlite:///{tmp_path / 'h.sqlite3'}",
               CACHE_ROOT=str(tmp_path / "cache_root"))  # the run directories go there, not into the repository
    env.pop("TT_INFERENCE_ORCHESTRATOR", None)
    decisions = []
    for attempt, ttft_ms in (("first", 20), ("second", 20), ("third", 700)):
        ttft.write_text(str(ttft_ms))
        out = tmp_path / attempt
        # only the third run is compared (--compare-to is a gate: the stub's TTFT on a busy test host can leave
        # an explicit comparison of two clean runs undecided, which neither promotes nor demotes)
        compare = ["--compare-to", "last"] if attempt == "third" else []
        done = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "release_matrix.py"), "--matrix",
                               str(matrix), "--tier", "stub", "--workflow-args",
                               "mode=smoke regression_tolerance=0.5", *compare, "--out", str(out),
                               "--promote", "--apply", "--apply-to", str(repo_copy)],
                              capture_output=True, text=True, timeout=900, cwd=REPO_ROOT, env=env)
        assert done.returncode in (0, 3), (done.stdout + done.stderr)[-3000:]
        promotions = json.loads((out / "promotions.json").read_text())["promotions"]
        decisions.append([(p["decision"], p["from"], p["to"], len(p["evidence"])) for p in promotions])
        assert (out / "release_notes.md").is_file()
    assert decisions[0] == [("keep", "COMPLETE", "COMPLETE", 1)], decisions
    assert decisions[1] == [("promote", "COMPLETE", "TOP_PERF", 2)], decisions
    assert decisions[2][0][:3] == ("demote", "TOP_PERF", "COMPLETE") and decisions[2][0][3] == 1, decisions
    third = json.loads((tmp_path / "third" / "promotions.json").read_text())
    run3 = third["promotions"][0]["evidence"][0]
    assert run3 in third["promotions"][0]["reason"] and third["evidence"][SMOL][0]["judged_status"] == "TOP_PERF"
    old = (REPO_ROOT / "VERSION").read_text().strip()
    assert (repo_copy / "VERSION").read_text().strip() == next_version(next_version(old))
    specs = Path("workflows") / "model_specs" / "cpu.yaml"
    cpu = _diff(REPO_ROOT / specs, repo_copy / specs)
    assert cpu == [f'+    version: "{next_version(next_version(old))}"'], cpu  # back to COMPLETE, two releases on
    doc = (repo_copy / "docs" / "model_support.md").read_text()
    assert f"| SmolLM2-135M-Instruct | cpu | vllm-cpu | yes | COMPLETE | {next_version(next_version(old))} |" in doc
    notes = (tmp_path / "second" / "release_notes.md").read_text()
    assert "| COMPLETE | TOP_PERF |" in notes and f"# Release {next_version(old)}" in notes
