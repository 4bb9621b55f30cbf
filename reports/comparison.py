"""This run against a baseline run: per metric the ratio, its 95% interval and a decision.

Why intervals: a mean alone cannot tell a 3% change from noise. Each metric's ratio (this run's mean /
the baseline's) gets a 95% interval from the run-level noise (``reports.run_noise``: one run's requests share
its host state, so a run's level moves as a whole; that movement is known from the accepted runs of this
setup, the host class's runs in the history, both runs' own time-separated blocks, or a documented prior),
hulled with a bootstrap over both runs' per-request records; the decision is made on that interval, never on
the ratio alone, so it is made from one baseline run:

* ``regressed``: the whole interval is worse than the tolerance allows (above ``1 + tolerance`` for a
  lower-is-better metric);
* ``improved``: the whole interval is better than 1 by more than the tolerance;
* ``within_noise``: the interval shows no regression beyond the tolerance (its worse end is inside
  ``1 + tolerance``);
* ``inconclusive``: the interval holds both no change and a change beyond the tolerance (the metric says
  about how many runs of each build would decide it: ``runs_to_decide``); a run has no per-request records
  for the metric, or fewer than ``MIN_REQUESTS`` (a percentile bootstrap of 4 requests has a handful of
  distinct resamples and an interval far narrower than the truth: it is shown, never trusted to decide); or
  the host was not equally busy in both runs.

A comparison the user asked for (``--compare-to``) is a gate (``Comparison.gate``): a regression fails the
verdict (exit 3) and an undecided metric leaves it INCONCLUSIVE (exit 4); a release's own comparison with
``last`` is advisory where it cannot decide (the verdict says so). Error rates of the decision, measured by
simulation through this code: ``scripts/simulate_regression_gate.py`` and the README.

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
from typing import Iterator, Sequence

from contracts.workflow_args import parse_workflow_args
from contracts.model_spec import ModelSpec
from records.regression import decide_ratio
from records.report import Comparison, ComparisonMetric, ReportRecord, TrendPoint
from reports.comparison_data import MetricSeries, host_levels, metric_kind, run_metrics, undecidable_points
from reports.run_noise import (
    NOISE_RUNS,
    NoiseLevel,
    WithinRun,
    block_level,
    block_stats,
    choose_level,
    ratio_interval,
    runs_to_decide,
    setup_level,
    within_run,
)

DEFAULT_TOLERANCE = 0.05
#: Fewest requests of each run for an interval that may decide (below: inconclusive, shown only).
MIN_REQUESTS = 8
POLICIES = ("fail", "warn")
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
    server = ("docker" if cli_args.get("docker_server") else "local" if cli_args.get("local_server")
              else "external")  # run.py's default attaches to a running server (--server-url / --service-port)
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
        if workflow != "release" or cli_args.get("requirements"):  # a document's run compares only when asked
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
    """The decision on the ratio's interval (module docstring): the one rule of ``records.regression``."""
    return decide_ratio(ci, tolerance, higher_is_better)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _metric(name: str, v: MetricSeries, b: MetricSeries, tolerance: float, level: NoiseLevel,
            notes: list[str], within: WithinRun | None = None, blocks: tuple[int, ...] = (0, 0),
            iterations: int = 2000) -> ComparisonMetric:
    """One metric from both runs' per-request values at the run-level noise ``level``, decided (module
    docstring)."""
    higher = v.higher_is_better
    metric = ComparisonMetric(name=name, higher_is_better=higher, n=len(v.values), baseline_n=len(b.values))
    interval = None
    if v.values and b.values:
        metric.value, metric.baseline = round(_mean(v.values) or 0.0, 4), round(_mean(b.values) or 0.0, 4)
        if metric.baseline > 0:
            metric.ratio = round(metric.value / metric.baseline, 4)
            try:
                interval = ratio_interval(v.values, b.values, level, within, (blocks[0], blocks[1]),
                                          iterations=iterations)
            except ValueError:
                interval = None
    if interval is not None:
        metric.ci95 = [round(interval.low, 4), round(interval.high, 4)]
        metric.ci_method, metric.noise_source, metric.noise_df = interval.method, level.source, level.df
        metric.noise_runs = level.runs or None
        metric.run_noise_pct = round(100 * level.sd, 2)
    metric.decision = decide(metric.ci95, tolerance, higher)
    if metric.ci95 is not None and min(len(v.values), len(b.values)) < MIN_REQUESTS:
        metric.decision = "inconclusive"
        notes.append(f"{name}: {min(len(v.values), len(b.values))} requests in a run, fewer than {MIN_REQUESTS}: "
                     f"the interval is shown, not trusted to decide")
    elif metric.decision == "inconclusive" and interval is not None:
        metric.runs_to_decide = runs_to_decide(interval, tolerance, higher)
    if metric.ci95 is None:
        notes.append(f"{name}: no per-request values in {'both runs' if not v.values and not b.values else 'one run'}"
                     f"; not decided")
    return metric


def _history_level(name: str, baseline: MetricSeries, others: list[dict[str, MetricSeries]],
                   host: dict[str, NoiseLevel]) -> NoiseLevel | None:
    """The history's run-level noise of a metric: the accepted runs of this setup when there are enough, else
    the host class's level of its kind (``reports.run_noise``)."""
    means = [m for m in (_mean(baseline.values), *(_mean(run[name].values) for run in others if name in run))
             if m is not None]
    return setup_level(means) or host.get(metric_kind(name))


def compare_runs(run_dir: Path, baseline_dir: Path, tolerance: float, history: Sequence[Path] = (),
                 host: dict[str, NoiseLevel] | None = None,
                 restarted: bool = False) -> tuple[list[ComparisonMetric], list[str]]:
    """Every metric both runs measured, decided; and notes on what could not be compared. ``history``: the
    accepted runs measured alike (the baseline counts among them whether listed or not); ``host``: the host
    class's run-level noise per metric kind (``comparison_data.host_levels``)."""
    seen, others = {Path(baseline_dir).resolve()}, []
    for path in history:
        if Path(path).resolve() not in seen:
            seen.add(Path(path).resolve())
            others.append(run_metrics(Path(path)))
    metrics, notes = compare_series(run_metrics(run_dir), run_metrics(baseline_dir), tolerance, others, host,
                                    restarted=restarted)
    unfit = {key: f"this run's {why}" for key, why in undecidable_points(run_dir).items()}
    unfit.update({key: f"the baseline's {why}" for key, why in undecidable_points(baseline_dir).items()
                  if key not in unfit})
    for metric in metrics:
        why = unfit.get(metric.name.rsplit(" ", 1)[0])
        if why is not None and metric.decision != "inconclusive":
            metric.decision, metric.runs_to_decide = "inconclusive", None
    notes += [f"{key}: not decided: {why}" for key, why in sorted(unfit.items())
              if any(m.name.startswith(key + " ") for m in metrics)]
    return metrics, notes


def compare_series(mine: dict[str, MetricSeries], theirs: dict[str, MetricSeries], tolerance: float,
                   others: Sequence[dict[str, MetricSeries]] = (), host: dict[str, NoiseLevel] | None = None, *,
                   iterations: int = 2000, restarted: bool = False) -> tuple[list[ComparisonMetric], list[str]]:
    """The decision of every metric both runs measured (``compare_runs`` on what it read; the simulation of
    the gate's error rates calls it directly): each metric's level is chosen by ``run_noise.choose_level``
    from the history (this setup's runs, else the host class) and the drift between both runs' blocks,
    pooled over the points of its kind."""
    notes: list[str] = []
    only = sorted({name.rsplit(" ", 1)[0] for name in set(mine) ^ set(theirs)})
    if only:
        notes.append("points measured by one run only (not compared): " + ", ".join(only))
    common = sorted(set(mine) & set(theirs))
    stats = {name: (block_stats(mine[name].values, mine[name].concurrency),
                    block_stats(theirs[name].values, theirs[name].concurrency)) for name in common}
    within = {kind: within_run([s for name in common if metric_kind(name) == kind for s in stats[name]])
              for kind in {metric_kind(name) for name in common}}
    metrics = []
    for name in common:
        kind = metric_kind(name)
        level = choose_level(_history_level(name, theirs[name], list(others), host or {}),
                             block_level(within[kind]), restarted)
        blocks = tuple(0 if s is None else len(s.means) for s in stats[name])
        metrics.append(_metric(name, mine[name], theirs[name], tolerance, level, notes, within[kind], blocks,
                               iterations))
    if not metrics:
        notes.append("the runs measured no benchmark point in common; nothing to compare")
    notes.extend(noise_notes(metrics))
    return metrics, notes


def noise_notes(metrics: list[ComparisonMetric]) -> list[str]:
    """Where each metric's run-level noise came from, and what would decide the undecided ones."""
    notes = []
    sources: dict[str, list[str]] = {}
    for m in metrics:
        if m.noise_source:
            sources.setdefault(m.noise_source, []).append(f"{m.name} ±{m.run_noise_pct:g}%")
    if sources:
        notes.append("run-level noise (SD of one run's log mean) from " + "; ".join(
            f"{source}: {', '.join(names)}" for source, names in sources.items()))
    undecided = [m for m in metrics if m.decision == "inconclusive" and m.ci95 is not None
                 and min(m.n or 0, m.baseline_n or 0) >= MIN_REQUESTS]
    if undecided:
        counts = [m.runs_to_decide for m in undecided if m.runs_to_decide is not None]
        more = (f"about {max(counts)} runs of each build would decide them at the noise seen, or a paired A/B "
                f"run (--baseline-url / --baseline-vllm-args)" if counts else
                "their ratios sit on the tolerance: no number of runs decides them")
        notes.append(f"{len(undecided)} metric(s) undecided (their 95% interval holds both no change and a change "
                     f"beyond the tolerance): {more}")
    return notes


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


def restarts(settings: CompareSettings) -> bool:
    """Whether each run started its own server (local or Docker, ``run_setup``): a fresh process per run."""
    return settings.setup.endswith(("local server", "docker server"))


def host_noise(settings: CompareSettings, record: ReportRecord, store) -> dict[str, NoiseLevel]:
    """The host class's run-level noise per metric kind (``comparison_data.host_levels``) from every accepted
    run on this host in the run history; none without it, or when runs of any host are compared."""
    from history.fingerprint import fingerprint, host_facts_of

    if store is None or settings.any_host:
        return {}
    try:
        entries = store.accepted_on_host(fingerprint(host_facts_of(record)), before=record.metadata.run_started,
                                         exclude=record.metadata.run_id)
        return host_levels(entries, _setup_of)
    except Exception:  # noqa: BLE001 - an unreadable history leaves the host class unknown, said per metric
        return {}


def build_comparison(settings: CompareSettings, record: ReportRecord, run_dir: Path,
                     baseline_dir: Path, baseline: ReportRecord, store) -> Comparison:
    """The ``comparison`` block of the report (without the verdict, which the judge adds)."""
    from history.fingerprint import fingerprint, host_differences, host_facts_of, spec_identity

    mine, theirs = host_facts_of(record), host_facts_of(baseline)
    same = fingerprint(mine) == fingerprint(theirs)
    metrics, notes = compare_runs(run_dir, baseline_dir, settings.tolerance, noise_runs(settings, record, store),
                                  host_noise(settings, record, store), restarted=restarts(settings))
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
        baseline_cpu_pressure=base_pressure, metrics=metrics, notes=notes,
        gate=not settings.default and settings.on_regression == "fail")
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
