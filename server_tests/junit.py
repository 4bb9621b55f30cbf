"""JUnit XML (pytest's --junitxml) -> CaseResult list (stdlib only)."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from records.server_tests import CaseResult


def _first_line(text: str | None) -> str | None:
    if not text:
        return None
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:400] or None


def _count(text: str | None) -> int | None:
    return int(text) if text is not None and text.strip().isdigit() else None


def read_cases(path: Path) -> list[CaseResult]:
    """One CaseResult per <testcase>; the outcome comes from its failure/error/skipped child, the
    markers from the ``markers`` property the suite's conftest attaches to every case, and an
    invariance case's ``divergent`` / ``compared`` counts from the properties it records."""
    root = ET.parse(path).getroot()
    out = []
    for case in root.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        module = classname.rsplit(".", 1)[-1] if "." in classname else classname
        node = f"{module}.py::{name}" if module else name
        outcome, message = "passed", None
        for tag in ("failure", "error", "skipped"):
            child = case.find(tag)
            if child is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                message = _first_line(child.get("message")) or _first_line(child.text)
                break
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        markers = [m for m in (props.get("markers") or "").split(",") if m]
        out.append(CaseResult(name=node, outcome=outcome, duration_s=float(case.get("time") or 0.0),
                              message=message, markers=markers, divergent=_count(props.get("divergent")),
                              compared=_count(props.get("compared"))))
    return out


def merge(parts: list[Path], out: Path, suite_name: str) -> int:
    """Write every <testcase> of ``parts`` (pytest JUnit files) into one suite at ``out``, with its totals;
    returns the number of cases."""
    cases = [case for part in parts for case in ET.parse(part).getroot().iter("testcase")]
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", name=suite_name, tests=str(len(cases)),
                          failures=str(sum(c.find("failure") is not None for c in cases)),
                          errors=str(sum(c.find("error") is not None for c in cases)),
                          skipped=str(sum(c.find("skipped") is not None for c in cases)),
                          time=f"{sum(float(c.get('time') or 0) for c in cases):.3f}")
    suite.extend(cases)
    ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)
    return len(cases)
