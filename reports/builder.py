"""Build the typed report from ONE run directory's files.

Everything comes from inside ``run_dir``: the manifest, the model spec snapshot, the CLI args
and the result records. Nothing globs other runs (a report that did would mix stale numbers from
earlier runs into a release), and any path a record points at must resolve inside the run dir.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import platform
from pathlib import Path
from typing import Any, Callable

from contracts.model_spec import ModelSpec
from contracts.typed_record import RecordError, TypedRecord
from contracts.workflow_args import parse_workflow_args
from records.agreement import AgreementMetric, AgreementRecord
from records.bench import BenchPoint, point_key
from records.evals import EvalRecord
from records import judge
from records.section_checks import section_checks
from records.server_tests import TestsRecord
from records.stress import CapacityRecord, StressRecord
from reports.requirements_inputs import read_requirements_section
from reports.ab_views import read_ab_section
from reports.spec_decode_views import read_spec_decode_section
from reports.distributions import from_metrics, from_requests, request_values
from reports.media_section import is_media_reference, read_media
from reports.pricing import price
from reports.section_tables import conformance_tables, stress_tables
from reports.timelines import point_timeline, stress_timelines
from records.report import (
    TIERS,
    BenchmarkRow,
    Comparison,
    EngineInfo,
    Environment,
    EvalRow,
    HostInfo,
    Metadata,
    ReportRecord,
    Section,
    SectionItem,
    SectionNotRun,
    StepSummary,
    TargetRow,
    Verdict,
)


class BadRunDir(ValueError):
    """The run directory lacks what a report needs (exit code 2 in run_reports)."""


def _load_json(path: Path) -> Any:
    with path.open(encoding="utf-8") as fh:
        return json.load(fh)


def _inside(run_dir: Path, rel: str | None) -> Path | None:
    """Resolve a record-relative path, refusing anything outside the run dir."""
    if not rel:
        return None
    candidate = (run_dir / rel).resolve()
    try:
        candidate.relative_to(run_dir.resolve())
    except ValueError:
        return None
    return candidate


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _parse_time(text: Any) -> _dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


# -- metadata ------------------------------------------------------------------------------

def _gather_environment(manifest: dict[str, Any]) -> Environment:
    block = manifest.get("environment")
    if isinstance(block, dict):
        host = block.get("host") if isinstance(block.get("host"), dict) else {}
        return Environment(
            source="manifest",
            python=_str(block.get("python")),
            packages={str(k): str(v) for k, v in (block.get("packages") or {}).items()},
            host=HostInfo(cpu=_str(host.get("cpu")), cores=_int(host.get("cores")),
                          ram_gb=_num(host.get("ram_gb")), os=_str(host.get("os")),
                          cpu_flags=_str(host.get("cpu_flags"))),
            engine=_engine_info(block.get("engine")),
        )
    # The run did not record its environment: describe the host building the report, and
    # say so (source="report-time") rather than pretending these are the run's facts.
    packages: dict[str, str] = {}
    try:
        from importlib import metadata as md

        for name in ("jinja2", "rich", "markupsafe"):
            try:
                packages[name] = md.version(name)
            except md.PackageNotFoundError:
                pass
    except ImportError:  # pragma: no cover
        pass
    return Environment(source="report-time", python=platform.python_version(),
                       packages=packages, host=_host_info())


def _engine_info(block: Any) -> EngineInfo | None:
    """The manifest's ``environment.engine`` (``workflows.engine_env``); None when the run did not record one."""
    if not isinstance(block, dict):
        return None
    packages = block.get("packages")
    return EngineInfo(server=str(block.get("server") or "external"), name=_str(block.get("name")),
                      packages={str(k): str(v) for k, v in packages.items()} if isinstance(packages, dict) else None)


def _host_info() -> HostInfo:
    from contracts.run_dir import host_facts

    return HostInfo(**host_facts())


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


_SECRET_WORDS = ("token", "secret", "password", "api_key", "apikey", "jwt")
# cli_args.json keys run.py derives from the flags (not flags themselves): never rendered as a flag.
DERIVED_CLI_KEYS = ("workflow_args_passthrough",)


def run_command(cli_args: dict[str, Any]) -> str | None:
    """Reconstruct the command line from cli_args.json (model/workflow/device first)."""
    if not isinstance(cli_args, dict) or not cli_args:
        return None
    parts = ["python3", "run.py"]
    order = ["model", "workflow", "device"] + sorted(
        k for k in cli_args if k not in ("model", "workflow", "device", *DERIVED_CLI_KEYS))
    for key in order:
        value = cli_args.get(key)
        if value is None or value is False or value == "" or value == [] or value == {}:
            continue
        flag = "--" + key.replace("_", "-")
        if any(word in key.lower() for word in _SECRET_WORDS):
            parts += [flag, "<redacted>"]  # cli_args.json should hold no secrets; be sure
        elif value is True:
            parts.append(flag)
        elif isinstance(value, (dict, list)):
            parts += [flag, json.dumps(value, separators=(",", ":"))]
        else:
            parts += [flag, str(value)]
    return " ".join(parts)


def _passthrough(cli_args: dict) -> dict[str, list[str]]:
    """``workflow_args_passthrough`` from cli_args.json, kept only when it has the shape run.py writes."""
    value = cli_args.get("workflow_args_passthrough")
    if not isinstance(value, dict):
        return {}
    return {str(k): [str(w) for w in v] for k, v in value.items() if isinstance(v, list)}


def _metadata(manifest: dict, spec: ModelSpec, cli_args: dict, steps: list[StepSummary]) -> Metadata:
    started, ended = manifest.get("started"), manifest.get("ended")
    t0, t1 = _parse_time(started), _parse_time(ended)
    # Still running (the reports step is part of the run): up to the end of the last finished step, so a
    # rebuild gives the same number instead of "now - started". Not the sum of the steps' durations:
    # steps may overlap (a release runs evals and tests side by side).
    ends = [_parse_time(step.get("ended")) for step in manifest.get("steps") or [] if isinstance(step, dict)]
    ends = [t for t in ends if t is not None and t0 is not None and (t.tzinfo is None) == (t0.tzinfo is None)]
    if t0 and t1:
        duration = round((t1 - t0).total_seconds(), 1)
    elif t0 and ends:
        duration = round((max(ends) - t0).total_seconds(), 1)
    else:
        done = [s.duration_s for s in steps if s.duration_s is not None]
        duration = round(sum(done), 1) if done else None
    return Metadata(
        run_id=str(manifest.get("run_id") or "unknown"),
        model_id=str(manifest.get("model_id") or spec.model_id or "unknown"),
        model_name=_str(spec.model_name),
        hf_model_repo=_str(spec.hf_model_repo),
        served_model_name=_str(spec.served_model_name),
        device=spec.device_type.value,
        impl_id=_str(spec.impl.impl_id),
        impl_name=_str(spec.impl.impl_name),
        engine=spec.engine.value,
        docker_image=_str(spec.docker_image),
        tt_metal_commit=_str(spec.tt_metal_commit),
        vllm_commit=_str(spec.vllm_commit),
        model_status=spec.status.name,
        model_version=_str(spec.version),
        workflow=_str(manifest.get("workflow")),
        run_status=_str(manifest.get("status")),
        run_started=_str(started),
        run_ended=_str(ended),
        duration_s=duration,
        run_command=run_command(cli_args),
        workflow_args_passthrough=_passthrough(cli_args),
        generated_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        environment=_gather_environment(manifest),
        steps=steps,
    )


def _steps(manifest: dict) -> list[StepSummary]:
    out = []
    for step in manifest.get("steps") or []:
        if isinstance(step, dict) and step.get("name"):
            out.append(StepSummary(name=str(step["name"]), status=str(step.get("status") or "?"),
                                   duration_s=_num(step.get("duration_s")),
                                   detail=_str(step.get("detail"))))
    return out


# -- records -------------------------------------------------------------------------------

def _benchmark_row(run_dir: Path, path: Path, rec: BenchPoint) -> BenchmarkRow:
    """The report's view of one point record: its own numbers, nothing recomputed."""
    point, m = rec.point, rec.metrics
    req_path = _inside(run_dir, rec.requests_file)
    if req_path is None:
        sibling = path.with_name(path.stem + ".requests.jsonl")
        req_path = sibling if sibling.is_file() else None
    ttft_dist = tpot_dist = None
    ci95: dict[str, list[float]] = {}
    if req_path is not None and req_path.is_file():
        ttft_dist, tpot_dist = from_requests(req_path)
        ci95 = _point_intervals(req_path, point.users)
    metrics = m.to_dict()
    ttft_dist = ttft_dist or from_metrics(metrics, "ttft")
    tpot_dist = tpot_dist or from_metrics(metrics, "tpot")
    return BenchmarkRow(
        key=point.key, isl=point.isl, osl=point.osl, max_concurrency=point.max_concurrency,
        num_prompts=point.num_prompts, source=_str(point.source), tool=_str(rec.tool),
        completed=_int(m.completed), failed=_int(m.failed),
        failures_by_class=rec.failure_classes(), error_rate=_num(m.error_rate),
        mean_ttft_ms=_num(m.mean_ttft_ms), median_ttft_ms=_num(m.median_ttft_ms),
        p99_ttft_ms=_num(metrics.get("p99_ttft_ms")), mean_tpot_ms=_num(m.mean_tpot_ms),
        mean_itl_ms=_num(m.mean_itl_ms), mean_e2el_ms=_num(m.mean_e2el_ms),
        tput_user=_num(m.tput_user), decode_throughput=_num(m.decode_throughput),
        prefill_throughput=_num(m.prefill_throughput),
        request_throughput=_num(m.request_throughput),
        output_throughput=_num(m.output_throughput),
        core_seconds_per_1k_output_tokens=_num(rec.core_seconds_per_1k_output_tokens),
        joules_per_1k_output_tokens=_num(rec.joules_per_1k_output_tokens), cost_note=rec.cost_note,
        point_file=path.relative_to(run_dir).as_posix(),
        requests_file=req_path.relative_to(run_dir.resolve()).as_posix() if req_path else None, ci95=ci95,
        ttft_dist=ttft_dist, tpot_dist=tpot_dist,
        timeline=point_timeline(path.stem, rec, req_path) if rec.tool == "tt-bench" else None,
        **_reconciliation(rec),
    )


def _reconciliation(rec: BenchPoint) -> dict[str, str | None]:
    """The row's reconciliation status and words (``records.reconciliation``); empty for a point without one."""
    r = rec.reconciliation
    if r is None:
        return {}
    bound = r.pacing is not None and r.pacing.client_bound
    return {"reconciliation": r.status + (" (client-bound)" if bound else ""),
            "reconciliation_detail": r.detail + (f"; client-bound: {r.pacing.detail}" if bound else "")}


def _point_intervals(req_path: Path, users: int) -> dict[str, list[float]]:
    """95% intervals of a point's means from its per-request file (``judge.target_estimates``: the intervals
    its targets are decided on), for the throughput-latency plot's error bars."""
    values = request_values(req_path)
    if values is None:
        return {}
    est = judge.target_estimates(values[0], values[1], users)
    out = {name: est[key].interval.as_list() for name, key in (("ttft_ms", "ttft_ms"), ("tput_user", "tput_user"),
                                                               ("decode_throughput", "tput"))
           if est[key].interval is not None}
    if "tput_user" in out and out["tput_user"][0] > 0:
        out["tpot_ms"] = [round(1000.0 / out["tput_user"][1], 6), round(1000.0 / out["tput_user"][0], 6)]
    return out


PointKey = tuple[int, int, int, int]


def _read_benchmarks(run_dir: Path, problems: list[str]
                     ) -> tuple[list[BenchmarkRow], dict[PointKey, BenchPoint]]:
    rows, points = [], {}
    for path in sorted((run_dir / "benchmarks").glob("point_*.json")):
        if "." in path.stem:  # companions of a point (e.g. .prom.json metrics snapshots), not summaries
            continue
        rel = path.relative_to(run_dir).as_posix()
        try:
            rec = BenchPoint.read(path)
            row = _benchmark_row(run_dir, path, rec)
        except (RecordError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            problems.append(f"{rel}: {exc}")
            continue
        rows.append(row)
        if rec.workload is None:  # a workload's traffic (trace, conversations ...) is not its shape's reference point
            points[(row.isl, row.osl, row.max_concurrency, row.num_prompts)] = rec
    rows.sort(key=lambda r: (r.isl, r.osl, r.max_concurrency, r.num_prompts))
    return rows, points


def _read_agreement(run_dir: Path, problems: list[str]) -> list[AgreementMetric]:
    """The metrics of every ``benchmarks/*.agreement.json`` (``--workflow-args agreement=``), point order."""
    out: list[AgreementMetric] = []
    for path in sorted((run_dir / "benchmarks").glob("point_*.agreement.json")):
        try:
            out += AgreementRecord.read(path).metrics
        except (RecordError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            problems.append(f"{path.relative_to(run_dir).as_posix()}: {exc}")
    return out


def _target_intervals(run_dir: Path, row: TargetRow, point: BenchPoint) -> None:
    """The row's 95% intervals of its target metrics, from the point's per-request file
    (``judge.target_estimates``, the estimate the benchmark's adaptive stop uses too)."""
    path = _inside(run_dir, point.requests_file)
    values = request_values(path) if path is not None and path.is_file() else None
    if values is None:
        return
    for key, est in judge.target_estimates(values[0], values[1], point.point.users).items():
        row.samples[key] = est.n
        if est.interval is not None:
            row.ci95[key] = est.interval.as_list()
            row.ci_method = est.interval.method


def _targets(spec: ModelSpec, rows: list[BenchmarkRow], points: dict[PointKey, BenchPoint],
             allowed_error_rate: float, run_dir: Path) -> list[TargetRow]:
    """One target row per perf-reference entry (from the run's spec snapshot), judged by
    ``judge.check_tier``, with each target metric's 95% interval. A matching point is one with the
    same ISL/OSL/concurrency, preferring the same prompt count."""
    tiers_required = judge.required_tiers(spec.status.name)
    out = []
    for ref in spec.device_model_spec.perf_reference:
        if is_media_reference(ref):
            continue  # judged in the media section
        isl, osl, con = int(ref.isl), int(ref.osl), int(ref.max_concurrency)
        n = int(ref.num_prompts) or None
        same = [r for r in rows if (r.isl, r.osl, r.max_concurrency) == (isl, osl, con)
                and (r.isl, r.osl, r.max_concurrency, r.num_prompts) in points]
        exact = [r for r in same if n is None or r.num_prompts == n]
        row_point = (exact or same or [None])[0]
        point = points[(row_point.isl, row_point.osl, row_point.max_concurrency,
                        row_point.num_prompts)] if row_point is not None else None
        targets = {tier: dataclasses.asdict(t) for tier, t in ref.targets.items()} or None
        if targets is None and point is not None:
            targets = point.targets  # the spec entry has none: the ones the point ran with
        row = TargetRow(key=point_key(isl, osl, con), isl=isl, osl=osl, max_concurrency=con,
                        num_prompts=n, ran=point is not None,
                        point_file=row_point.point_file if row_point is not None else None)
        if point is not None:
            measured = judge.measured_values(point)
            row.measured_ttft_ms = measured["ttft_ms"]
            row.measured_tput_user = measured["tput_user"]
            row.measured_tput = measured["tput"]
            _target_intervals(run_dir, row, point)
            row.not_deciding = point.reconciliation.why_not if point.reconciliation is not None else None
            if point.sampling is not None:
                row.rounds, row.stop_reason = point.sampling.rounds, point.sampling.stop_reason or None
        for tier in TIERS:
            tier_targets = (targets or {}).get(tier)
            if not isinstance(tier_targets, dict):
                continue
            row.tiers.append(judge.check_tier(
                tier, tier in tiers_required, tier_targets, point, allowed_error_rate))
        out.append(row)
    return out


def _read_evals(run_dir: Path, problems: list[str]) -> list[EvalRow]:
    """Eval records read through their own record (``records.evals.EvalRecord``)."""
    rows = []
    for path in sorted((run_dir / "evals").glob("*/eval_record.json")):
        rel = path.relative_to(run_dir).as_posix()
        try:
            r = EvalRecord.read(path)
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            problems.append(f"{rel}: {exc}")
            continue
        rows.append(EvalRow(
            task=str(r.task or path.parent.name), status=str(r.status or "error"),
            metric=_str(r.metric), value=_num(r.value), stderr=_num(r.stderr),
            samples=_int(r.samples), mode=_str(r.mode),
            published_score=_num(r.published_score), published_source=_str(r.published_source),
            reference_score=_num(r.reference_score), reference_source=_str(r.reference_source),
            tolerance=_num(r.tolerance), target=_num(r.target), ci95=_interval(r.ci95),
            ci_method=_str(r.ci_method), decision=_str(r.decision),
            condition_differences=[str(d) for d in r.condition_differences or []],
            in_process_score=_num(r.in_process_score), in_process_ci95=_interval(r.in_process_ci95),
            in_process_samples=_int(r.in_process_samples), in_process_source=_str(r.in_process_source),
            serving_decision=_str(r.serving_decision), serving_detail=_str(r.serving_detail),
            disagreements=_int(r.disagreements), disagreement_ci95=_interval(r.disagreement_ci95),
            max_disagreement=_num(r.max_disagreement), items_total=_int(r.items_total), looks=_int(r.looks),
            stopped=_str(r.stopped),
            ratio_to_reference=_num(r.ratio_to_reference), ratio_to_published=_num(r.ratio_to_published),
            passed=r.passed if isinstance(r.passed, bool) else None,
            error=_str(r.error), record_file=rel))
    rows.sort(key=lambda e: e.task)
    return rows


def _interval(value: Any) -> list[float] | None:
    """A [low, high] pair of numbers, else None."""
    if isinstance(value, list) and len(value) == 2 and all(_num(v) is not None for v in value):
        return [float(v) for v in value]
    return None


#: The records a tests or stress_tests section is made of, by file name (``outputs.json`` lists them).
SECTION_RECORDS: dict[str, dict[str, type[TypedRecord]]] = {
    "tests": {"tests_record.json": TestsRecord},
    "stress_tests": {"stress_record.json": StressRecord, "capacity_record.json": CapacityRecord},
}


def _read_section(run_dir: Path, name: str, problems: list[str]) -> tuple[list[SectionItem], dict[str, TypedRecord]]:
    """The tests and stress-test records, read once through their own record classes: each becomes
    one item with its name, status, pass flag and detail, and the records (by file name) feed the
    section's tables. Another JSON file there is a problem (the verdict blocks on it): nothing a
    client wrote is judged by guessing its keys."""
    items, records = [], {}
    kinds = SECTION_RECORDS[name]
    for path in sorted((run_dir / name).glob("*.json")):
        if path.name == "outputs.json":
            continue
        rel = path.relative_to(run_dir).as_posix()
        kind = kinds.get(path.name)
        if kind is None:
            problems.append(f"{rel}: not a {name} record (the {name} workflow writes {', '.join(sorted(kinds))})")
            continue
        try:
            rec = kind.read(path)
        except RecordError as exc:
            problems.append(f"{rel}: {exc}")
            continue
        records[path.name] = rec
        items.append(SectionItem(name=rec.name, status=rec.status, passed=rec.passed, detail=rec.detail or None,
                                 record_file=rel))
    return items, records


# -- assembly ------------------------------------------------------------------------------

def _judged(name: str, steps: list[StepSummary], workflow: str | None,
            has_records: bool) -> tuple[bool, str | None]:
    """Was this section part of the run? Returns (judged, reason-if-not)."""
    step = next((s for s in reversed(steps) if s.name == name), None)
    if step is not None:
        if step.status == "skipped":
            return False, "skipped" + (f": {step.detail}" if step.detail else "")
        if step.status == "not_run":
            return False, "not run: an earlier step failed"
        return True, None
    if has_records or workflow in (name, "release"):
        return True, None
    return False, f"not part of the {workflow or 'unknown'} workflow"


def load_inputs(run_dir: Path, model_spec_json: Path | None = None) -> tuple[dict, ModelSpec, dict]:
    """Read manifest, model spec and CLI args; raise BadRunDir when the run is unusable."""
    if not run_dir.is_dir():
        raise BadRunDir(f"run directory not found: {run_dir}")
    try:
        manifest = _load_json(run_dir / "manifest.json")
    except FileNotFoundError as exc:
        raise BadRunDir(f"no manifest.json in {run_dir}") from exc
    except ValueError as exc:
        raise BadRunDir(f"manifest.json is not valid JSON: {exc}") from exc
    if not isinstance(manifest, dict) or not str(manifest.get("schema", "")).startswith(
            "tt-run-manifest/"):
        raise BadRunDir("manifest.json is not a tt-run-manifest document")
    spec_path = run_dir / "model_spec.json"
    if not spec_path.is_file() and model_spec_json is not None:
        spec_path = model_spec_json  # only when the run dir has no snapshot of its own
    try:
        spec = ModelSpec.read(spec_path)
    except FileNotFoundError as exc:
        raise BadRunDir(f"no model_spec.json in {run_dir}") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise BadRunDir(f"{spec_path} is not a valid model spec: {exc}") from exc
    cli_args: dict = {}
    if (run_dir / "cli_args.json").is_file():
        try:
            loaded = _load_json(run_dir / "cli_args.json")
            cli_args = loaded if isinstance(loaded, dict) else {}
        except ValueError:
            cli_args = {}
    if not cli_args:
        cli_args = dict(spec.cli_args)
    return manifest, spec, cli_args


def build_report(run_dir: Path, model_spec_json: Path | None = None,
                 compare: Callable[[ReportRecord], Comparison | None] | None = None,
                 workflow_args: dict[str, Any] | None = None) -> ReportRecord:
    """The run's report. ``compare``, when given, is called with the record before its verdict is
    decided and returns the comparison with a baseline run (``reports.comparison``), which the one
    judge then gates on; it is the only part of a report read from outside ``run_dir``.
    ``workflow_args`` are the reports step's own (a rebuild may price the run anew: ``reports.pricing``);
    the run's cli_args.json gives what they do not."""
    run_dir = Path(run_dir)
    manifest, spec, cli_args = load_inputs(run_dir, model_spec_json)
    steps = _steps(manifest)
    problems: list[str] = []
    benchmarks, points = _read_benchmarks(run_dir, problems)
    allowed_error_rate, allowance_note = judge.max_error_rate(spec)
    targets = _targets(spec, benchmarks, points, allowed_error_rate, run_dir)
    evals = _read_evals(run_dir, problems)
    media = read_media(run_dir, spec, problems, allowed_error_rate)
    test_items, test_records = _read_section(run_dir, "tests", problems)
    stress_items, stress_records = _read_section(run_dir, "stress_tests", problems)
    workflow = _str(manifest.get("workflow"))

    not_run: list[SectionNotRun] = []
    judged: dict[str, bool] = {}
    for name, has in (("benchmarks", bool(benchmarks) or any(m.ran for m in media)), ("evals", bool(evals)),
                      ("tests", bool(test_items)), ("stress_tests", bool(stress_items))):
        ok, reason = _judged(name, steps, workflow, has)
        # A tests or stress_tests section without records was not run.
        if ok and name in ("tests", "stress_tests") and not has:
            ok, reason = False, "no records (not run)"
        judged[name] = ok
        if not ok:
            not_run.append(SectionNotRun(name, reason or "not run"))

    tests = Section(ran=judged["tests"], items=test_items,
                    tables=conformance_tables(test_records.get("tests_record.json")),
                    note=None if judged["tests"] else "not run")
    stress_record = stress_records.get("stress_record.json")
    stress = Section(ran=judged["stress_tests"], items=stress_items,
                     tables=stress_tables(stress_record, stress_records.get("capacity_record.json")),
                     timelines=stress_timelines(stress_record, lambda rel: _inside(run_dir, rel)),
                     note=None if judged["stress_tests"] else "not run")
    record = ReportRecord(
        metadata=_metadata(manifest, spec, cli_args, steps),
        verdict=Verdict(result="INCONCLUSIVE"), benchmarks=benchmarks, targets=targets, evals=evals, media=media,
        tests=tests, stress_tests=stress, sections_not_run=not_run, agreement=_read_agreement(run_dir, problems),
        ab=read_ab_section(run_dir, cli_args, judged["benchmarks"], problems, judged["evals"]))
    record.requirements, requirements = read_requirements_section(run_dir, evals, problems)
    record.spec_decode = read_spec_decode_section(run_dir, record.ab)
    record.comparison = compare(record) if compare is not None else None
    price_note = price(record, {"hourly_cost": _workflow_arg(cli_args, "hourly_cost"),
                                "currency": _workflow_arg(cli_args, "currency"), **(workflow_args or {})},
                       stress_records.get("capacity_record.json"))
    record.verdict = judge.decide(judge.JudgeInput(
        model_status=spec.status.name, steps=steps, targets=targets, evals=evals,
        tests=tests, stress_tests=stress, benchmarks_judged=judged["benchmarks"],
        evals_judged=judged["evals"], known_issues=[dataclasses.asdict(k) for k in spec.known_issues],
        record_problems=problems, benchmarks=benchmarks, max_error_rate=allowed_error_rate,
        notes=[n for n in (allowance_note, price_note) if n], media=media, comparison=record.comparison,
        points_chosen=_points_chosen(workflow, cli_args) or (
            "the run measured the points of its requirements document" if record.requirements else None),
        mode=_run_mode(cli_args),
        perf_tiers=_workflow_arg(cli_args, "perf_tiers"), judged_on=_str(manifest.get("started")),
        agreement=record.agreement, ab=record.ab, requirements=requirements,
        section_checks=section_checks(test_records.get("tests_record.json"), stress_records.get("stress_record.json"),
                                      stress_records.get("capacity_record.json"),
                                      spec.device_model_spec.max_batch_divergence)))
    return record


def _run_mode(cli_args: dict[str, Any]) -> str | None:
    """The run's mode (smoke, ci, full) from its --workflow-args; None when it gave none or they do not parse."""
    return _workflow_arg(cli_args, "mode")


def _workflow_arg(cli_args: dict[str, Any], key: str) -> str | None:
    """One of the run's --workflow-args; None when it gave none or they do not parse (run.py checked them)."""
    try:
        args = parse_workflow_args(_str(cli_args.get("workflow_args")))
    except ValueError:
        return None
    value = args.get(key)
    return str(value) if value else None


def _points_chosen(workflow: str | None, cli_args: dict[str, Any]) -> str | None:
    """Why a ``benchmarks`` run measured only points its user chose (``points=``/``workload=``), or
    None. A release always judges the spec's targets, whatever points it was given."""
    if workflow != "benchmarks":
        return None
    try:
        args = parse_workflow_args(_str(cli_args.get("workflow_args")))
    except ValueError:
        return None
    chosen = [f"{key}={args[key]}" for key in ("workload", "points") if args.get(key)]
    if not chosen:
        return None
    return (f"the run measured only the points chosen with {' '.join(chosen)}; run the benchmarks workflow "
            f"without them to judge the spec's targets")
