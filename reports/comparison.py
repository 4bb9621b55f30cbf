"""This run against a baseline run: per metric the ratio, its 95% interval and a decision.

Why intervals: a mean alone cannot tell a 3% change from noise. Each metric's ratio (this run's mean /
the baseline's) gets a 95% interval from the run-to-run spread of the accepted runs measured alike on this
host (``reports.run_noise``: one run's requests share its host state, so only runs are independent), hulled
with a bootstrap over both runs' per-request records; the decision is made on that interval, never on the
ratio alone:

* ``regressed``: the whole interval is worse than the tolerance allows (above ``1 + tolerance`` for a
  lower-is-better metric);
* ``improved``: the whole interval is better than 1 by more than the tolerance;
* ``within_noise``: anything else (no change beyond the tolerance that the samples can show);
* ``inconclusive``: a run has no per-request records for the metric, or fewer than
  ``MIN_REQUESTS`` (a percentile bootstrap of 4 requests has a handful of distinct resamples and an
  interval far narrower than the truth: it is shown, never trusted to decide); fewer than
  ``run_noise.MIN_RUNS`` accepted runs tell the run-to-run noise (the requests' interval is shown); or
  the host was not equally busy in both runs.

Why the host's busyness: the interval resamples requests within each run, so it knows nothing of what
else ran on the host. On a shared machine the same build measured 15-50% slower while other work
kept the CPUs saturated, and the gate "decided" a regression of the host, not of the build. Each run's
manifest records, per step, the share of wall time during which some task waited for a CPU (Linux
PSI, ``contracts.run_dir``); when the benchmarks step's shares of the two runs differ by more than
``PRESSURE_TOLERANCE``, or only one run recorded it, every metric is inconclusive (shown, not
deciding) and a note says why. A host that cannot say in both runs is compared on the requests alone,
and the note says so.

Compared today: every LLM benchmark point both runs measured (same ISL/OSL/concurrency), on mean
TTFT, mean TPOT (lower is better) and mean per-request output throughput (output tokens over the
request's end-to-end seconds; higher is better, so ``regressed`` means lower), and every media point
both measured (same kind and concurrency), on the mean end-to-end latency of its successful requests
(``MediaPoint.requests``). The baseline is found in
the run history (``last``, a run id) or given as a run directory; its numbers are read from its own
run directory, the source of truth. Which runs may be a baseline (never an unfinished one; ``last``
never a failed one) is ``history.baseline``'s rule; ``last`` also takes only a run measured alike
(``run_setup``: the same size mode and server kind, e.g. never a local ci run for a Docker smoke
release), and a baseline named on purpose that was measured otherwise is compared with a note. A run
of a host with another fingerprint is a baseline only with ``compare_hosts=any`` (then the report says
the hosts differ): ``last`` never considers one, and one named on purpose is refused (``baseline_from``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from itertools import islice
from typing import Callable, Iterator, Sequence

from contracts.workflow_args import parse_workflow_args
from contracts.model_spec import ModelSpec
from records.report import Comparison, ComparisonMetric, ReportRecord, TrendPoint
from reports.distributions import request_output_rates, request_values
from reports.run_noise import MIN_RUNS, NOISE_RUNS, ratio_interval

DEFAULT_TOLERANCE = 0.05
#: Fewest requests of each run for an interval that may decide (below: inconclusive, shown only).
MIN_REQUESTS = 8
POLICIES = ("fail", "warn")
#: Metrics compared per LLM point: (name, per-request values of a ``point_*.requests.jsonl``, higher is
#: better). output_tok_s is each request's output tokens over its end-to-end seconds: a per-request value
#: of both runs, so its ratio gets the same bootstrap interval as the latencies (the point's aggregate
#: throughput is one number per run, with nothing to resample).
POINT_METRICS: tuple[tuple[str, Callable[[Path], list[float] | None], bool], ...] = (
    ("ttft_ms", lambda path: (request_values(path) or ([], []))[0], False),
    ("tpot_ms", lambda path: (request_values(path) or ([], []))[1], False),
    ("output_tok_s", request_output_rates, True),
)
#: Metrics the trend plot draws (per point), in this order.
TREND_METRICS = ("ttft_ms", "tpot_ms", "latency_p50_ms")
#: Most recent candidates ``last`` looks at before saying there is no baseline.
LAST_CANDIDATES = 20
#: Largest difference of the benchmarks step's host CPU pressure (share of wall time) between the two
#: runs for which a change is still the build's: beyond it, the host was busier in one run.
PRESSURE_TOLERANCE = 0.10
#: The step whose host CPU pressure is compared (every compared point is measured there).
MEASURING_STEP = "benchmarks"


class CompareError(ValueError):
    """The baseline asked for cannot be used; one line for the user."""


@dataclass(frozen=True)
class CompareSettings:
    """What ``--compare-to`` and the comparison's workflow args asked for."""

    requested: str
    tolerance: float = DEFAULT_TOLERANCE
    on_regression: str = "fail"
    any_host: bool = False
    default: bool = False  # chosen by the release default, not by the user
    setup: str = ""  # how this run measured (run_setup): `last` takes only a baseline measured alike


def run_setup(cli_args: dict) -> str:
    """How a run measured, from its cli_args.json: the size mode (smoke/ci/full: other points and
    sample sizes) and the server (local, docker, external: another process tree, cgroup and image).
    Two runs that differ here differ in more than the build, so ``last`` never pairs them."""
    try:
        mode = parse_workflow_args(cli_args.get("workflow_args") or "").get("mode", "ci")
    except ValueError:
        mode = "?"
    server = ("docker" if cli_args.get("docker_server") else "external" if cli_args.get("server_url")
              else "local")
    return f"mode={mode}, {server} server"


def _setup_of(run_dir: Path) -> str | None:
    try:
        return run_setup(json.loads((run_dir / "cli_args.json").read_text()))
    except (OSError, ValueError):
        return None


def default_policy(workflow_args: dict, default: bool) -> str:
    """``fail``, except a smoke release's own comparison with ``last`` (not asked for with --compare-to): ``warn``.
    Why: a smoke point is 8 requests in a few seconds of one run, and a passing slowdown of a shared host
    lands in most of them (measured: one of three healthy smoke releases here had 6 of its 8 concurrency-1
    requests 30% slower, TPOT 73 ms against 52-65, with the host's CPU pressure unchanged): the gate then
    decides a regression no rerun shows. The comparison is still shown; --compare-to or on_regression=fail
    gates a smoke run, and ci and full releases, whose points span longer, gate by default."""
    return "warn" if default and str(workflow_args.get("mode", "ci")) == "smoke" else "fail"


def settings_from(cli_args: dict, workflow_args: dict, spec: ModelSpec, workflow: str | None) -> CompareSettings | None:
    """The run's comparison settings, or None when the run compares with nothing.

    ``--compare-to`` (cli_args.json) names the baseline; a release without it compares with ``last``.
    The tolerance is ``regression_tolerance`` from --workflow-args, else the spec's
    ``device_model_spec.regression_tolerance``, else 5%.
    """
    requested = cli_args.get("compare_to")
    default = False
    if not requested:
        if workflow != "release":
            return None
        requested, default = "last", True
    own = spec.device_model_spec.regression_tolerance
    raw = workflow_args.get("regression_tolerance", DEFAULT_TOLERANCE if own is None else own)
    try:
        tolerance = float(raw)
    except (TypeError, ValueError):
        raise CompareError(f"regression_tolerance {raw!r} is not a number (a share, e.g. 0.05)") from None
    if not 0 <= tolerance < 1:
        raise CompareError(f"regression_tolerance {tolerance:g} is not a share between 0 and 1")
    policy = str(workflow_args.get("on_regression", default_policy(workflow_args, default)))
    if policy not in POLICIES:
        raise CompareError(f"on_regression={policy!r} is not one of: {', '.join(POLICIES)}")
    any_host = str(workflow_args.get("compare_hosts", "same")) == "any"
    return CompareSettings(str(requested), tolerance, policy, any_host, default, run_setup(cli_args))


def decide(ci: list[float] | None, tolerance: float, higher_is_better: bool) -> str:
    """The decision on the ratio's interval (module docstring)."""
    if ci is None:
        return "inconclusive"
    low, high = ci
    worse_low, worse_high = (1 / high, 1 / low) if higher_is_better and low > 0 else (low, high)
    if higher_is_better and low <= 0:
        return "inconclusive"
    if worse_low > 1 + tolerance:
        return "regressed"
    if worse_high < 1 - tolerance:
        return "improved"
    return "within_noise"


def _point_requests(run_dir: Path) -> dict[str, Path]:
    """Point key (isl-..._osl-..._con-...) -> its per-request file, from the run's benchmark records."""
    out: dict[str, Path] = {}
    for path in sorted((run_dir / "benchmarks").glob("point_*.requests.jsonl")):
        name = path.name.removeprefix("point_").removesuffix(".requests.jsonl")
        key = "_".join(part for part in name.split("_") if not part.startswith("n-"))
        out.setdefault(key, path)
    return out


def _media_latencies(run_dir: Path) -> dict[str, list[float]]:
    """Media point key (<kind>_con-<c>) -> end-to-end latencies (ms) of its successful requests."""
    from records.media import MediaPoint

    out: dict[str, list[float]] = {}
    for path in sorted((run_dir / "benchmarks").glob("media_point_*.json")):
        try:
            point = MediaPoint.read(path)
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            continue
        out[path.stem.removeprefix("media_point_")] = [
            float(r["ms"]) for r in point.requests if isinstance(r, dict) and r.get("error_class") is None
            and isinstance(r.get("ms"), (int, float)) and not isinstance(r.get("ms"), bool)]
    return out


def run_metrics(run_dir: Path) -> dict[str, tuple[list[float], bool]]:
    """Every compared metric of a run: name -> (its per-request values, higher is better)."""
    out: dict[str, tuple[list[float], bool]] = {}
    for key, latencies in _media_latencies(run_dir).items():
        out[f"{key} latency_ms"] = (latencies, False)
    for key, path in _point_requests(run_dir).items():
        for name, values_of, higher in POINT_METRICS:
            out[f"{key} {name}"] = (values_of(path) or [], higher)
    return out


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def noise_unknown(metric: ComparisonMetric) -> bool:
    """The metric has an interval, but too few accepted runs to tell the run-to-run noise: not decided."""
    return metric.ci95 is not None and (metric.noise_runs or 0) < MIN_RUNS


def _metric(name: str, v: list[float], b: list[float], tolerance: float, higher: bool, run_means: list[float],
            notes: list[str]) -> ComparisonMetric:
    """One metric from both runs' per-request values and the accepted runs' means, decided (module docstring)."""
    metric = ComparisonMetric(name=name, higher_is_better=higher, n=len(v), baseline_n=len(b))
    if v and b:
        metric.value = round(sum(v) / len(v), 4)
        metric.baseline = round(sum(b) / len(b), 4)
        if metric.baseline > 0:
            metric.ratio = round(metric.value / metric.baseline, 4)
            try:
                interval = ratio_interval(v, b, run_means)
            except ValueError:
                interval = None
            if interval is not None:
                metric.ci95 = [round(interval.low, 4), round(interval.high, 4)]
                metric.ci_method, metric.noise_runs = interval.method, interval.runs
                metric.run_noise_pct = None if interval.run_noise is None else round(100 * interval.run_noise, 2)
    metric.decision = decide(metric.ci95, tolerance, higher)
    if metric.ci95 is not None and min(len(v), len(b)) < MIN_REQUESTS:
        metric.decision = "inconclusive"
        notes.append(f"{name}: {min(len(v), len(b))} requests in a run, fewer than {MIN_REQUESTS}: "
                     f"the interval is shown, not trusted to decide")
    elif noise_unknown(metric):
        metric.decision = "inconclusive"
    if metric.ci95 is None:
        notes.append(f"{name}: no per-request values in {'both runs' if not v and not b else 'one run'}"
                     f"; not decided")
    return metric


def compare_runs(run_dir: Path, baseline_dir: Path, tolerance: float,
                 history: Sequence[Path] = ()) -> tuple[list[ComparisonMetric], list[str]]:
    """Every metric both runs measured, decided; and notes on what could not be compared. ``history``: the
    accepted runs measured alike whose spread is the run-to-run noise (``reports.run_noise``); the baseline
    counts among them whether listed or not."""
    mine, theirs = run_metrics(run_dir), run_metrics(baseline_dir)
    seen, others = {Path(baseline_dir).resolve()}, []
    for path in history:
        if Path(path).resolve() not in seen:
            seen.add(Path(path).resolve())
            others.append(run_metrics(Path(path)))
    metrics: list[ComparisonMetric] = []
    notes: list[str] = []
    only = sorted({name.rsplit(" ", 1)[0] for name in set(mine) ^ set(theirs)})
    if only:
        notes.append("points measured by one run only (not compared): " + ", ".join(only))
    for name in sorted(set(mine) & set(theirs)):
        (v, higher), (b, _) = mine[name], theirs[name]
        run_means = [m for m in (_mean(b), *(_mean(run[name][0]) for run in others if name in run))
                     if m is not None]
        metrics.append(_metric(name, v, b, tolerance, higher, run_means, notes))
    if not metrics:
        notes.append("the runs measured no benchmark point in common; nothing to compare")
    undecided = [m for m in metrics if noise_unknown(m) and min(m.n or 0, m.baseline_n or 0) >= MIN_REQUESTS]
    if undecided:
        runs = max(m.noise_runs or 0 for m in undecided)
        notes.append(f"run-to-run noise unknown for {len(undecided)} metric(s): {runs} accepted run(s) of this setup "
                     f"on this host, {MIN_RUNS} needed; the requests' interval is shown, not trusted to decide (one "
                     f"run's requests share its host state: they cannot tell the build from the run)")
    return metrics, notes


def _report_of(run_dir: Path) -> ReportRecord:
    """A run's report record: its report.json, else built from its files."""
    path = run_dir / "reports" / "report.json"
    if path.is_file():
        try:
            return ReportRecord.read(path)
        except (OSError, ValueError):
            pass
    from reports.builder import build_report

    return build_report(run_dir)


def _read_baseline(path: Path) -> ReportRecord:
    try:
        return _report_of(path)
    except Exception as exc:  # noqa: BLE001 - a broken baseline is named, never a traceback
        raise CompareError(f"baseline {path} cannot be read: {type(exc).__name__}: {exc}") from None


def baseline_from(settings: CompareSettings, record: ReportRecord, store,
                  skipped: list[str] | None = None) -> tuple[Path, ReportRecord] | None:
    """The baseline's run directory and report, or None when ``last`` finds no usable earlier run.

    Which runs may be a baseline is ``history.baseline``'s rule: ``last`` takes the newest run that
    ended with nothing failed (each candidate's own manifest and report checked, since the index can
    be stale; those passed over are appended to ``skipped``); a run named on purpose must have
    finished with whole measurements. Another host's runs are baselines only with ``compare_hosts=any``:
    ``last`` never considers them, and a run named on purpose that ran on another host is refused as
    run.py refuses it before the run starts (``workflows.cli.check_baseline_host``, exit 2): here
    the run is then not compared, with one line naming both hosts' differing facts. ``store`` is an
    open history store, or None when it could not be reached (then only a run directory can be a
    baseline). Raises ``CompareError`` when the named baseline cannot be used.
    """
    from history.baseline import unusable_reason
    from history.fingerprint import fingerprint, host_differences, host_facts_of, other_host_line

    requested = settings.requested
    if requested == "last":
        if store is None:
            raise CompareError("--compare-to last needs the run history, which could not be reached")
        return next(accepted_runs(settings, record, store, skipped), None)
    if Path(requested).is_dir():
        path = Path(requested)
    else:
        if store is None:
            raise CompareError(f"--compare-to {requested}: not a directory, and the run history (to look the run "
                               f"id up) could not be reached")
        entry = store.get(requested)
        if entry is None:
            raise CompareError(f"--compare-to {requested}: no such run directory and no run with that id in the "
                               f"history")
        path = Path(entry.run_dir)
    why = unusable_reason(path, explicit=True)
    if why is not None:
        raise CompareError(f"--compare-to {requested}: this run cannot be a baseline: {why}")
    baseline = _read_baseline(path)
    mine, theirs = host_facts_of(record), host_facts_of(baseline)
    if not settings.any_host and fingerprint(mine) != fingerprint(theirs):
        raise CompareError(other_host_line(requested, host_differences(mine, theirs)))
    return path, baseline


def accepted_runs(settings: CompareSettings, record: ReportRecord, store,
                  skipped: list[str] | None = None) -> Iterator[tuple[Path, ReportRecord]]:
    """The earlier runs ``last`` may take, newest first: the same spec and workflow on this host (any host with
    ``compare_hosts=any``), measured alike, ended with nothing failed (each candidate's own manifest and report
    checked, since the index can be stale; those passed over are appended to ``skipped``)."""
    from history.baseline import LAST_VERDICTS, unusable_reason
    from history.fingerprint import fingerprint, host_facts_of, spec_identity

    ident = spec_identity(record)
    host = None if settings.any_host else fingerprint(host_facts_of(record))
    for entry in store.finished(ident.key, host, before=record.metadata.run_started,
                                exclude=record.metadata.run_id, workflow=record.metadata.workflow,
                                limit=LAST_CANDIDATES):
        path = Path(entry.run_dir)
        why = unusable_reason(path, explicit=False)
        theirs = _setup_of(path)
        if why is None and settings.setup and theirs != settings.setup:
            why = f"measured otherwise ({theirs or 'no cli_args.json'}; this run: {settings.setup})"
        if why is None:
            try:
                baseline = _read_baseline(path)
            except CompareError as exc:
                why = str(exc)
            else:
                if baseline.verdict.result in LAST_VERDICTS:
                    yield path, baseline
                    continue
                why = f"its report's verdict is {baseline.verdict.result}"
        if skipped is not None:
            skipped.append(f"{entry.run_id} passed over: {why}")


def noise_runs(settings: CompareSettings, record: ReportRecord, store) -> list[Path]:
    """The run directories whose spread is the run-to-run noise: the newest ``NOISE_RUNS`` accepted runs
    (``accepted_runs``); none without the run history."""
    if store is None:
        return []
    try:
        return [path for path, _ in islice(accepted_runs(settings, record, store), NOISE_RUNS)]
    except Exception:  # noqa: BLE001 - an unreadable history leaves the noise unknown, said per metric
        return []


def build_comparison(settings: CompareSettings, record: ReportRecord, run_dir: Path,
                     baseline_dir: Path, baseline: ReportRecord, store) -> Comparison:
    """The ``comparison`` block of the report (without the verdict, which the judge adds)."""
    from history.fingerprint import fingerprint, host_differences, host_facts_of, spec_identity

    mine, theirs = host_facts_of(record), host_facts_of(baseline)
    same = fingerprint(mine) == fingerprint(theirs)
    metrics, notes = compare_runs(run_dir, baseline_dir, settings.tolerance, noise_runs(settings, record, store))
    pressure, base_pressure = step_cpu_pressure(run_dir), step_cpu_pressure(baseline_dir)
    why = busier_host(pressure, base_pressure)
    if why is not None:
        notes.append(why)
        for metric in metrics:
            metric.decision = "inconclusive"
    elif pressure is None:
        notes.append("the host cannot say how busy its CPUs were (no Linux PSI) in either run: the comparison "
                     "assumes it was equally busy")
    comparison = Comparison(
        baseline_run=baseline.metadata.run_id, baseline_started=baseline.metadata.run_started,
        baseline_dir=str(baseline_dir.resolve()), requested=settings.requested, tolerance=settings.tolerance,
        on_regression=settings.on_regression, same_host=same,
        host_differences=[] if same else host_differences(mine, theirs),
        baseline_spec_version=baseline.metadata.model_version, cpu_pressure=pressure,
        baseline_cpu_pressure=base_pressure, metrics=metrics, notes=notes)
    if baseline.verdict.result not in ("PASS", "INCONCLUSIVE"):
        comparison.notes.append(f"the baseline's own verdict was {baseline.verdict.result} (named with --compare-to; "
                                f"`last` never picks a run that failed)")
    theirs = _setup_of(baseline_dir)
    if settings.setup and theirs and theirs != settings.setup:
        comparison.notes.append(f"the runs measured otherwise (baseline: {theirs}; this run: {settings.setup}; "
                                f"named with --compare-to): the ratios include that difference")
    if not same:
        comparison.notes.append("the hosts differ (" + "; ".join(comparison.host_differences) + "): the ratios "
                                "include the host difference")
    from history.store import headline_metrics

    own = _trend_metrics(headline_metrics(record), None)
    if store is not None:
        ident = spec_identity(record)
        for entry in store.trend(ident.key, fingerprint(mine), until=record.metadata.run_started):
            points = _trend_metrics(entry.metrics, set(own))
            if entry.run_id != record.metadata.run_id and points:  # runs of other points say nothing here
                comparison.trend.append(TrendPoint(entry.run_id, entry.started, entry.verdict, points))
    comparison.trend.append(TrendPoint(record.metadata.run_id, record.metadata.run_started, None, own))
    return comparison


def step_cpu_pressure(run_dir: Path, step: str = MEASURING_STEP) -> float | None:
    """The host CPU pressure its manifest recorded for ``step``, or None."""
    from contracts.run_dir import Manifest

    try:
        found = Manifest.read(Path(run_dir) / "manifest.json").step(step)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    value = getattr(found, "cpu_pressure", None)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def busier_host(pressure: float | None, baseline: float | None) -> str | None:
    """Why the two runs' host CPU pressures keep the comparison from deciding, or None (module docstring)."""
    if pressure is None and baseline is None:
        return None
    if pressure is None or baseline is None:
        which = "this run" if pressure is None else "the baseline"
        return (f"host CPU pressure during {MEASURING_STEP} is known for one run only ({which} did not record it): "
                f"a busier host cannot be told from a slower build, so no metric is decided")
    if abs(pressure - baseline) > PRESSURE_TOLERANCE:
        return (f"the host was not equally busy: some task waited for a CPU {pressure:.0%} of the {MEASURING_STEP} "
                f"step in this run against {baseline:.0%} in the baseline (more than {PRESSURE_TOLERANCE:.0%} apart): "
                f"a busier host, not the build, may explain a change, so no metric is decided")
    return None


def _trend_metrics(metrics: dict[str, float], keep: set[str] | None) -> dict[str, float]:
    """The trend's metrics (TREND_METRICS of each point), only those in ``keep`` when given."""
    return {k: v for k, v in metrics.items()
            if k.rsplit(" ", 1)[-1] in TREND_METRICS and (keep is None or k in keep)}
