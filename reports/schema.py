"""Typed report record (``tt-report/1``): the single source every renderer reads.

The report is an API: ``report.json`` is written from these dataclasses and read back into the
same dataclasses, so markdown, CSV, HTML and the console are all views of one record and a
consumer (CI, a dashboard) can rely on the shape. Stdlib only, so any venv can read a report.

Versioning: ``schema`` is ``tt-report/<major>``. Readers accept the major they know and ignore
unknown keys (additive changes keep the major); a different major is rejected loudly.
"""
from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "tt-report/1"
SCHEMA_MAJOR = 1

#: Target tiers, weakest first; the order is used for display and for status enforcement.
TIERS = ("functional", "complete", "target")


class SchemaError(ValueError):
    """A report document that does not match the schema this code understands."""


@dataclass
class HostInfo:
    cpu: str | None = None
    cores: int | None = None
    ram_gb: float | None = None
    os: str | None = None


@dataclass
class Environment:
    """Software and host facts. ``source`` says whether the run recorded them (``manifest``)
    or the report builder had to gather them itself (``report-time``), which may differ from
    the host the run happened on."""

    source: str = "report-time"
    python: str | None = None
    packages: dict[str, str] = field(default_factory=dict)
    host: HostInfo = field(default_factory=HostInfo)


@dataclass
class StepSummary:
    name: str
    status: str
    duration_s: float | None = None
    detail: str | None = None


@dataclass
class Metadata:
    run_id: str
    model_id: str
    model_name: str | None = None
    hf_model_repo: str | None = None
    served_model_name: str | None = None
    device: str | None = None
    impl_id: str | None = None
    impl_name: str | None = None
    engine: str | None = None
    docker_image: str | None = None
    tt_metal_commit: str | None = None
    vllm_commit: str | None = None
    model_status: str | None = None
    model_version: str | None = None
    workflow: str | None = None
    run_status: str | None = None
    run_started: str | None = None
    run_ended: str | None = None
    duration_s: float | None = None
    run_command: str | None = None
    generated_at: str | None = None
    generator: str = "tt-inference-server reports"
    environment: Environment = field(default_factory=Environment)
    steps: list[StepSummary] = field(default_factory=list)


@dataclass
class Distribution:
    """Summary of a per-request metric; enough to draw a box plot and a histogram without
    copying every request into the report."""

    source: str  # "requests" (per-request file) or "metrics" (point's percentiles only)
    count: int | None = None
    min: float | None = None
    p5: float | None = None
    p25: float | None = None
    p50: float | None = None
    p75: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None
    mean: float | None = None
    hist_edges: list[float] = field(default_factory=list)
    hist_counts: list[int] = field(default_factory=list)


@dataclass
class BenchmarkRow:
    """One benchmark point as measured; values are the point record's, never recomputed from
    other runs."""

    key: str  # "isl-128_osl-128_con-1" (the key known_issues waivers use)
    isl: int
    osl: int
    max_concurrency: int
    num_prompts: int
    source: str | None = None
    tool: str | None = None
    completed: int | None = None
    failed: int | None = None
    mean_ttft_ms: float | None = None
    median_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    mean_tpot_ms: float | None = None
    mean_itl_ms: float | None = None
    mean_e2el_ms: float | None = None
    tput_user: float | None = None
    decode_throughput: float | None = None
    prefill_throughput: float | None = None
    request_throughput: float | None = None
    output_throughput: float | None = None
    point_file: str | None = None
    requests_file: str | None = None
    ttft_dist: Distribution | None = None
    tpot_dist: Distribution | None = None


@dataclass
class TierCheck:
    """One tier's targets for one point and how the measurement compares.

    Ratios are measured/target. TTFT passes when ratio <= 1 (not slower than the target);
    throughputs pass when ratio >= 1. A ``None`` check means the tier sets no such target."""

    tier: str
    required: bool
    ttft_ms: float | None = None
    tput_user: float | None = None
    tput: float | None = None
    ttft_ratio: float | None = None
    tput_user_ratio: float | None = None
    tput_ratio: float | None = None
    ttft_pass: bool | None = None
    tput_user_pass: bool | None = None
    tput_pass: bool | None = None
    passed: bool | None = None  # all defined checks pass; None when the point did not run


@dataclass
class TargetRow:
    key: str
    isl: int
    osl: int
    max_concurrency: int
    num_prompts: int | None
    ran: bool
    measured_ttft_ms: float | None = None
    measured_tput_user: float | None = None
    measured_tput: float | None = None
    tiers: list[TierCheck] = field(default_factory=list)


@dataclass
class EvalRow:
    task: str
    status: str
    metric: str | None = None
    value: float | None = None
    stderr: float | None = None
    samples: int | None = None
    mode: str | None = None
    published_score: float | None = None
    published_source: str | None = None
    reference_score: float | None = None
    reference_source: str | None = None
    tolerance: float | None = None
    ratio_to_reference: float | None = None
    ratio_to_published: float | None = None
    passed: bool | None = None
    error: str | None = None
    record_file: str | None = None


@dataclass
class SectionItem:
    """One record of a section whose record schema belongs to a later issue (tests, stress
    tests): only the fields every record is expected to carry are lifted out."""

    name: str
    status: str | None = None
    passed: bool | None = None
    detail: str | None = None
    record_file: str | None = None


@dataclass
class Section:
    ran: bool
    note: str | None = None
    items: list[SectionItem] = field(default_factory=list)


@dataclass
class SectionNotRun:
    section: str
    reason: str


@dataclass
class Blocker:
    category: str  # workflow/section: benchmarks, evals, tests, stress_tests, records, <step>
    item: str  # point key, eval task, test name, or "step-failed" / "no-records"
    detail: str
    tier: str | None = None


@dataclass
class Waived:
    category: str
    item: str
    detail: str
    waiver_reason: str
    tier: str | None = None


@dataclass
class Verdict:
    result: str  # "PASS" | "FAIL"
    blockers: list[Blocker] = field(default_factory=list)
    waived: list[Waived] = field(default_factory=list)
    model_status: str | None = None
    required_tiers: list[str] = field(default_factory=list)
    evals_required: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass
class ReportRecord:
    metadata: Metadata
    verdict: Verdict
    benchmarks: list[BenchmarkRow] = field(default_factory=list)
    targets: list[TargetRow] = field(default_factory=list)
    evals: list[EvalRow] = field(default_factory=list)
    tests: Section = field(default_factory=lambda: Section(ran=False))
    stress_tests: Section = field(default_factory=lambda: Section(ran=False))
    sections_not_run: list[SectionNotRun] = field(default_factory=list)
    schema: str = SCHEMA

    # -- serialisation -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = _clean(dataclasses.asdict(self))
        # "schema" first so a human opening the file sees what it is.
        return {"schema": data.pop("schema"), **data}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReportRecord:
        schema = data.get("schema") if isinstance(data, dict) else None
        if not isinstance(schema, str) or not schema.startswith("tt-report/"):
            raise SchemaError(f"not a tt-report document (schema={schema!r})")
        try:
            major = int(schema.split("/", 1)[1].split(".")[0])
        except ValueError as exc:
            raise SchemaError(f"bad schema version {schema!r}") from exc
        if major != SCHEMA_MAJOR:
            raise SchemaError(f"unsupported report schema {schema!r}; this code reads {SCHEMA}")
        return _build(cls, data, "report")

    @classmethod
    def from_json(cls, text: str) -> ReportRecord:
        return cls.from_dict(json.loads(text))

    def write(self, path: Path) -> None:
        path.write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def read(cls, path: Path) -> ReportRecord:
        return cls.from_json(path.read_text(encoding="utf-8"))


def _clean(value: Any) -> Any:
    """Make a value strict-JSON safe: non-finite floats become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _build(tp: Any, value: Any, where: str) -> Any:
    """Convert plain JSON data into ``tp`` (dataclass, list[...], dict[str, ...], Optional)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _build(inner[0], value, where)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise SchemaError(f"{where}: expected an object, got {type(value).__name__}")
        hints = typing.get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in value:
                kwargs[f.name] = _build(hints[f.name], value[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise SchemaError(f"{where}: missing required field {f.name!r}")
        return tp(**kwargs)
    if origin is list:
        if not isinstance(value, list):
            raise SchemaError(f"{where}: expected a list")
        (item_tp,) = typing.get_args(tp)
        return [_build(item_tp, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise SchemaError(f"{where}: expected an object")
        _, val_tp = typing.get_args(tp)
        return {str(k): _build(val_tp, v, f"{where}.{k}") for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SchemaError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SchemaError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise SchemaError(f"{where}: expected true/false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise SchemaError(f"{where}: expected a string, got {value!r}")
        return value
    return value  # Any
