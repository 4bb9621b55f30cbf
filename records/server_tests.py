"""The tests workflow's typed record: ``RUN_DIR/tests/tests_record.json`` (stdlib only).

One record per run of the suite, one ``CaseResult`` per collected case, read back by the report.
The JUnit XML beside it is the same outcome in the format CI systems read.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.typed_record import TypedRecord, described

OUTCOMES = ("passed", "failed", "error", "skipped")


@dataclass
class CaseResult(TypedRecord):
    """One test case's outcome."""

    name: str = described("pytest node id of the case, relative to server_tests/cases")
    outcome: str = described("passed, failed, error (broke outside its assertions) or skipped")
    duration_s: float = described("wall time of the case", 0.0, unit="s")
    message: str | None = described("first line of the failure, error or skip reason", None)
    markers: list[str] = described("the case's markers (what --workflow-args markers= selects on)",
                                   factory=list)
    divergent: int | None = described("invariance cases: inputs whose answer alone differed from their answer "
                                      "under load (null: not an invariance case)", None)
    compared: int | None = described("invariance cases: comparisons of an answer alone vs under load (the n of "
                                     "the divergence rate)", None)


@dataclass
class TestsRecord(TypedRecord):
    """The API conformance suite against one server."""

    SCHEMA = "tt-tests-record/1"
    __test__ = False  # not a pytest class

    name: str = described("what was tested (one report item)", "api_conformance")
    model_id: str = described("model spec id of the run", "")
    served_model_name: str = described("model name sent in every request", "")
    server_url: str = described("base URL of the server under test", "")
    engine: str | None = described("engine from the model spec; decides which features are skipped", None)
    status: str = described("passed when no case failed or errored and at least one passed", "failed")
    passed: bool = described("same as status == passed (the verdict reads this)", False)
    detail: str = described("one-line summary: counts, and the failed case names", "")
    counts: dict[str, int] = described("number of cases per outcome", factory=dict)
    filters: dict[str, Any] = described("markers / test_name filters that selected the cases", factory=dict)
    started: str = described("ISO 8601 UTC start", "")
    duration_s: float = described("wall time of the whole suite", 0.0, unit="s")
    junit_xml: str = described("JUnit XML path relative to the run directory", "tests/junit.xml")
    pytest_command: str = described("the pytest command line (secrets are in the environment, not here)", "")
    cases: list[CaseResult] = described("every collected case", factory=list, record_list=CaseResult)
    batch_divergent: int | None = described("answers that changed under load, over the invariance cases that ran "
                                            "(null: none ran)", None)
    batch_compared: int | None = described("comparisons alone vs under load over those cases (the rate's n)", None)
    batch_divergence_rate: float | None = described(
        "batch_divergent / batch_compared: judged against the spec's max_batch_divergence on its 95% Wilson "
        "interval (an allowance of 0: one changed answer fails, none passes)", None)

    def summarise(self) -> None:
        """Fill counts, status, passed and detail from ``cases``."""
        self.counts = {o: sum(1 for c in self.cases if c.outcome == o) for o in OUTCOMES}
        bad = [c.name for c in self.cases if c.outcome in ("failed", "error")]
        measured = [c for c in self.cases if c.compared and c.outcome in ("passed", "failed")]
        divergent = sum(c.divergent or 0 for c in measured)
        compared = sum(c.compared or 0 for c in measured)  # every measured case compared at least once
        self.batch_divergent = divergent if measured else None
        self.batch_compared = compared if measured else None
        self.batch_divergence_rate = round(divergent / compared, 6) if measured else None
        self.passed = not bad and self.counts["passed"] > 0
        self.status = "passed" if self.passed else "failed"
        parts = [f"{self.counts[o]} {o}" for o in OUTCOMES if self.counts[o]]
        self.detail = ", ".join(parts) or "no cases ran"
        if bad:
            self.detail += "; failing: " + ", ".join(bad[:8]) + (" ..." if len(bad) > 8 else "")
