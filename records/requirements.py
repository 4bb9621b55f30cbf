"""A customer's requirements document: its schema (versioned), its reading (one line per mistake) and the
typed record of how each requirement was judged.

Why a document of its own: release CI judges a model against the catalog's targets; a customer or partner
validating a model for their own workload brings their own list of what must hold, often against a server
they run (``--server-url``). The document names the model (a catalog name, or a hub id / local weights
directory with a catalog ``base`` to inherit from), the device, evals with reference scores, benchmark
sweep points with latency / throughput targets, and agentic-traffic targets, each ``must`` or ``should``.

Schema ``2.x`` (``SCHEMA_VERSION``; a ``2.y`` this reader does not know is read by the rules of 2.0, a
``1.x`` or ``3.x`` is refused)::

    schema_version: "2.0"
    model: {name: SmolLM2-135M-Instruct}            # or {name: my-ft, weights: /path, base: <catalog name>}
    device: cpu
    evals:
      - {task: tt_offline_mc, reference_score: 0.30, tolerance: 0.10, level: must}
    benchmarks:
      - isl: 128
        osl: 32
        concurrency: 1
        targets:
          - {metric: ttft_ms, stat: mean, max: 2000, level: must}
          - {metric: tpot_ms, stat: p90, max: 200, level: should}
    agentic:
      - name: coding-agent
        sessions: 3
        targets:
          - {metric: sessions_passed, min: 1.0, slo_ttft_ms: 5000, level: must}

Every target carries exactly one bound (``max`` for a metric where lower is better, ``min`` where higher
is better) and may carry ``unit`` (which must be the metric's). ``METRICS`` lists the metrics, their unit,
their direction, and the statistics they take. Reading is strict: an unknown key, a ``must`` without a
bound, a metric that does not exist, a bound in the wrong unit ("500ms", ``unit: s``) is one line
(``RequirementsError``) naming where in the document it is; ``run.py`` prints it and exits 2 before
anything starts. Stdlib only (YAML through PyYAML when it is installed: the orchestrator has it).
"""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts.typed_record import TypedRecord, described

SCHEMA_VERSION = "2.0"
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
LEVELS = ("must", "should")
#: The statistics of a latency metric: the mean (decided on an anytime-valid confidence sequence) or a
#: percentile (decided on a distribution-free order-statistic interval).
STATS = ("mean", "p50", "p90", "p95", "p99")


@dataclass(frozen=True)
class Metric:
    unit: str
    higher_is_better: bool
    stats: tuple[str, ...] = ("mean",)
    what: str = ""


#: Benchmark sweep point metrics.
POINT_METRICS: dict[str, Metric] = {
    "ttft_ms": Metric("ms", False, STATS, "time to first token of a request"),
    "tpot_ms": Metric("ms", False, STATS, "time per output token after the first, per request"),
    "tput_user": Metric("tok/s/user", True, ("mean",), "output tokens per second seen by one user (1000 / TPOT)"),
    "throughput": Metric("tok/s", True, ("mean",), "decode throughput of the point (t/s/u times its users)"),
    "goodput": Metric("share", True, ("mean",), "share of requests within the target's slo_ttft_ms / slo_tpot_ms"),
    "error_rate": Metric("share", False, ("mean",), "share of the point's requests that failed or were never sent"),
}
#: Agentic session metrics.
AGENTIC_METRICS: dict[str, Metric] = {
    "turn_ttft_ms": Metric("ms", False, STATS, "time to first token of each turn of every session"),
    "sessions_passed": Metric("share", True, ("mean",), "share of sessions whose every turn answered (and, with "
                                                        "slo_ttft_ms, answered within it)"),
    "error_rate": Metric("share", False, ("mean",), "share of the turns that failed or were never sent"),
}
METRICS = {"benchmarks": POINT_METRICS, "agentic": AGENTIC_METRICS}

_TOP = ("schema_version", "model", "device", "evals", "benchmarks", "agentic", "description")
_MODEL = ("name", "weights", "base", "served_model_name")
_EVAL = ("task", "metric", "reference_score", "tolerance", "level", "id")
_POINT = ("isl", "osl", "concurrency", "num_prompts", "targets", "id")
_AGENTIC = ("name", "sessions", "concurrency", "trace", "targets")
_TARGET = ("metric", "stat", "max", "min", "unit", "level", "slo_ttft_ms", "slo_tpot_ms", "id")


class RequirementsError(ValueError):
    """A requirements document that cannot be used: one line naming where and what."""


@dataclass(frozen=True)
class Target:
    """One requirement on a measured metric: ``stat`` of ``metric`` at most ``max`` / at least ``min``."""

    id: str
    metric: str
    stat: str
    bound: float
    higher_is_better: bool
    level: str
    unit: str
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None

    @property
    def must(self) -> bool:
        return self.level == "must"

    def shown_target(self) -> str:
        return f"{'>=' if self.higher_is_better else '<='} {self.bound:g} {self.unit}"


@dataclass(frozen=True)
class EvalRequirement:
    id: str
    task: str
    reference_score: float
    tolerance: float
    level: str
    metric: str | None = None

    @property
    def min_score(self) -> float:
        return self.reference_score * (1.0 - self.tolerance)


@dataclass(frozen=True)
class PointRequirement:
    isl: int
    osl: int
    concurrency: int
    num_prompts: int | None
    targets: tuple[Target, ...]

    @property
    def key(self) -> str:
        return f"isl-{self.isl}_osl-{self.osl}_con-{self.concurrency}"


@dataclass(frozen=True)
class AgenticRequirement:
    name: str
    sessions: int
    concurrency: int
    trace: str | None
    targets: tuple[Target, ...]


@dataclass(frozen=True)
class Requirements:
    """A read, checked requirements document (``read_requirements``)."""

    schema_version: str
    model: dict[str, str]
    device: str | None
    evals: tuple[EvalRequirement, ...] = ()
    benchmarks: tuple[PointRequirement, ...] = ()
    agentic: tuple[AgenticRequirement, ...] = ()
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    def points_arg(self) -> str:
        """The benchmarks ``points=`` value measuring exactly the document's sweep points."""
        return ",".join(f"{p.isl}x{p.osl}x{p.concurrency}" + (f"x{p.num_prompts}" if p.num_prompts else "")
                        for p in self.benchmarks)

    def to_json(self) -> str:
        """What the run directory keeps (``requirements.json``): the document as given, with its source."""
        return json.dumps({**self.raw, "_source": self.source}, indent=2, sort_keys=True)


# ---------------------------------------------------------------------- reading


def load_document(path: str | Path) -> dict[str, Any]:
    """The document at ``path`` as a mapping (JSON, or YAML when the name ends .yaml/.yml)."""
    path = Path(path)
    if path.exists() and not path.is_file():  # a FIFO or a device would hang the read, a directory cannot be one
        raise RequirementsError(f"requirements file {str(path)!r} is not a regular file")
    if path.is_file() and path.stat().st_size > MAX_DOCUMENT_BYTES:
        raise RequirementsError(f"requirements file {str(path)!r} is over {MAX_DOCUMENT_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise RequirementsError(f"requirements file {str(path)!r} cannot be read: {why}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml  # type: ignore[import-untyped]
            data = yaml.safe_load(text)
        except ImportError:
            raise RequirementsError("requirements file is YAML but PyYAML is not installed: give it as JSON") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            raise RequirementsError(f"requirements file {path.name} is not valid YAML{where}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RequirementsError(f"requirements file {path.name} is not valid JSON: {exc.msg} (line {exc.lineno})"
                                    ) from None
    if not isinstance(data, dict):
        raise RequirementsError(f"requirements file {path.name} must hold a mapping, got {type(data).__name__}")
    return data


def read_requirements(path: str | Path) -> Requirements:
    """Read and check a requirements document; ``RequirementsError`` (one line) on the first mistake."""
    data = load_document(path)
    return parse_requirements(data, source=str(path))


def parse_requirements(data: dict[str, Any], source: str = "") -> Requirements:
    _keys(data, _TOP, "the document")
    version = str(data.get("schema_version", ""))
    if not version:
        raise RequirementsError(f"schema_version is missing: this reader takes {SCHEMA_VERSION} (2.x)")
    if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise RequirementsError(f"schema_version {version!r} is not 2.x: this reader takes {SCHEMA_VERSION}")
    model = data.get("model")
    if not isinstance(model, dict) or not isinstance(model.get("name"), str) or not model["name"].strip():
        raise RequirementsError("model must be a mapping with a name (a catalog name or a hub id)")
    _keys(model, _MODEL, "model")
    if model.get("weights") is not None and not model.get("base"):
        raise RequirementsError("model.weights needs model.base: the catalog model whose spec it inherits")
    device = data.get("device")
    if device is not None and not isinstance(device, str):
        raise RequirementsError("device must be a device name (e.g. cpu)")
    evals = tuple(_eval(e, f"evals[{i}]") for i, e in enumerate(_list(data, "evals")))
    points = tuple(_point(p, f"benchmarks[{i}]") for i, p in enumerate(_list(data, "benchmarks")))
    agentic = tuple(_agentic(a, f"agentic[{i}]") for i, a in enumerate(_list(data, "agentic")))
    if not (evals or points or agentic):
        raise RequirementsError("the document requires nothing: give evals, benchmarks or agentic")
    ids = [t.id for p in points for t in p.targets] + [t.id for a in agentic for t in a.targets] + [e.id for e in evals]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise RequirementsError(f"requirement id {twice[0]!r} is given twice; give each requirement its own id")
    keys = [p.key for p in points]
    if len(set(keys)) != len(keys):
        raise RequirementsError("a benchmark point (isl, osl, concurrency) is given twice; merge its targets")
    return Requirements(version, {k: str(v) for k, v in model.items() if v is not None}, device, evals, points,
                        agentic, source, dict(data))


def _keys(block: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in block:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(allowed)}"
            raise RequirementsError(f"unknown key {key!r} in {where}{hint}")


def _list(data: dict[str, Any], key: str) -> list[Any]:
    value = data.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise RequirementsError(f"{key} must be a list of mappings")
    return value


def _level(block: dict[str, Any], where: str) -> str:
    level = block.get("level", "must")
    if level not in LEVELS:
        raise RequirementsError(f"{where}.level {level!r} is not must or should")
    return str(level)


def _number(value: Any, where: str, unit: str | None = None, minimum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        hint = f" in {unit}" if unit else ""
        raise RequirementsError(f"{where} {value!r} must be a number{hint} (wrong units: the unit is the metric's, "
                                f"written in its name, not in the value)" if isinstance(value, str)
                                else f"{where} {value!r} must be a number{hint}")
    if minimum is not None and value < minimum:
        raise RequirementsError(f"{where} {value!r} must be >= {minimum:g}")
    return float(value)


def _whole(block: dict[str, Any], key: str, where: str, default: int | None = None) -> int | None:
    value = block.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RequirementsError(f"{where}.{key} {value!r} must be a whole number >= 1")
    return value


def _eval(block: dict[str, Any], where: str) -> EvalRequirement:
    _keys(block, _EVAL, where)
    task = block.get("task")
    if not isinstance(task, str) or not task:
        raise RequirementsError(f"{where} needs a task")
    level = _level(block, where)
    if "reference_score" not in block:
        raise RequirementsError(f"{where} ({task}) is a {level} without a target: give reference_score")
    ref = _number(block["reference_score"], f"{where}.reference_score", minimum=0.0)
    tol = _number(block.get("tolerance", 0.0), f"{where}.tolerance", minimum=0.0)
    if tol >= 1:
        raise RequirementsError(f"{where}.tolerance {tol:g} is a relative shortfall and must be below 1 (e.g. 0.1)")
    return EvalRequirement(str(block.get("id") or f"eval {task}"), task, ref, tol, level,
                           block.get("metric") if isinstance(block.get("metric"), str) else None)


def _point(block: dict[str, Any], where: str) -> PointRequirement:
    _keys(block, _POINT, where)
    isl, osl, con = (_whole(block, k, where) for k in ("isl", "osl", "concurrency"))
    if isl is None or osl is None:
        raise RequirementsError(f"{where} needs isl and osl")
    con = con or 1
    key = f"isl-{isl}_osl-{osl}_con-{con}"
    targets = tuple(_target(t, f"{where}.targets[{i}]", POINT_METRICS, key)
                    for i, t in enumerate(_list(block, "targets")))
    if not targets:
        raise RequirementsError(f"{where} ({key}) has no targets")
    return PointRequirement(isl, osl, con, _whole(block, "num_prompts", where), targets)


def _agentic(block: dict[str, Any], where: str) -> AgenticRequirement:
    _keys(block, _AGENTIC, where)
    name = block.get("name")
    if not isinstance(name, str) or not name:
        raise RequirementsError(f"{where} needs a name")
    trace = block.get("trace")
    if trace is not None and not isinstance(trace, str):
        raise RequirementsError(f"{where}.trace must be a file path or a bundled trace name")
    targets = tuple(_target(t, f"{where}.targets[{i}]", AGENTIC_METRICS, f"agentic {name}")
                    for i, t in enumerate(_list(block, "targets")))
    if not targets:
        raise RequirementsError(f"{where} ({name}) has no targets")
    return AgenticRequirement(name, _whole(block, "sessions", where, 3) or 3,
                              _whole(block, "concurrency", where, 1) or 1, trace, targets)


def _target(block: dict[str, Any], where: str, metrics: dict[str, Metric], item: str) -> Target:
    _keys(block, _TARGET, where)
    name = block.get("metric")
    if name not in metrics:
        close = difflib.get_close_matches(str(name), metrics, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r} ({metrics[close[0]].unit})?" if close else f"; known: {', '.join(metrics)}"
        raise RequirementsError(f"{where}: no metric {name!r} exists{hint}")
    metric = metrics[name]
    stat = block.get("stat", "mean")
    if stat not in metric.stats:
        raise RequirementsError(f"{where}: {name} takes stat {', '.join(metric.stats)}, not {stat!r}")
    level = _level(block, where)
    bounds = [k for k in ("max", "min") if block.get(k) is not None]
    if not bounds:
        raise RequirementsError(f"{where} ({name}) is a {level} without a target: give "
                                f"{'min' if metric.higher_is_better else 'max'}")
    wanted = "min" if metric.higher_is_better else "max"
    if bounds != [wanted]:
        raise RequirementsError(f"{where}: {name} is {'higher' if metric.higher_is_better else 'lower'} is better: "
                                f"give {wanted} alone, not {' and '.join(bounds)}")
    unit = block.get("unit")
    if unit is not None and unit != metric.unit:
        raise RequirementsError(f"{where}: wrong unit {unit!r} for {name}: its unit is {metric.unit}")
    bound = _number(block[wanted], f"{where}.{wanted}", metric.unit, minimum=0.0)
    if metric.unit == "share" and bound > 1:
        raise RequirementsError(f"{where}: wrong units: {name} is a share in 0..1, not {bound:g} (a percent?)")
    slos = {k: _number(block[k], f"{where}.{k}", "ms", minimum=0.0) for k in ("slo_ttft_ms", "slo_tpot_ms")
            if block.get(k) is not None}
    if name == "goodput" and not slos:
        raise RequirementsError(f"{where}: goodput needs slo_ttft_ms and/or slo_tpot_ms (what a good request is)")
    if slos and name not in ("goodput", "sessions_passed"):
        raise RequirementsError(f"{where}: slo_ttft_ms / slo_tpot_ms apply to goodput and sessions_passed only")
    default_id = f"{name}{'' if stat == 'mean' else ' ' + stat} {item}"
    return Target(str(block.get("id") or default_id), name, stat, bound, metric.higher_is_better, level,
                  metric.unit, slos.get("slo_ttft_ms"), slos.get("slo_tpot_ms"))


# ---------------------------------------------------------------------- the judged table


@dataclass
class RequirementRow(TypedRecord):
    """One requirement as the verdict judged it: the report's "Requirements" table row."""

    id: str = described("The requirement's id (its own, or '<metric> [stat] <point or session set>').")
    kind: str = described("evals, benchmarks or agentic.")
    level: str = described("must (a miss fails the run, an undecided one leaves it INCONCLUSIVE) or should "
                           "(shown, never blocking).")
    metric: str = described("What is measured (with its statistic: mean or a percentile).")
    target: str = described("The bound, with its unit, e.g. '<= 500 ms'.")
    status: str = described("met, not met, or undecided (its 95% interval holds the bound, or it was not measured).")
    value: float | None = described("The measured value.", None)
    ci95: list[float] | None = described("95% interval of the value [low, high].", None)
    ci_method: str | None = described("How ci95 was made.", None)
    n: int | None = described("Samples behind the value.", None)
    shown_value: str | None = described("The value as the table shows it (e.g. '3/3 sessions').", None)
    detail: str | None = described("Why undecided and what more sampling would take, or what was missed.", None)


@dataclass
class RequirementsSection(TypedRecord):
    """The report's "Requirements" section: the document judged, row by row."""

    source: str = described("The requirements file the run was given.")
    schema_version: str = described("The document's schema version.")
    rows: list[RequirementRow] = described("One row per requirement, in the document's order.", factory=list,
                                           record_list=RequirementRow)
    summary: str | None = described("'N met, M not met, K undecided' of the musts and the shoulds.", None)
