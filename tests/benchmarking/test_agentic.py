"""``workload=agentic`` (benchmarking/workloads/agentic.py): the session file is checked line by line, and
against the stub the sessions run in the benchmarks and as a stress point with their figures (per-turn and
per-session TTFT, tokens per session, tool calls), each turn sending the whole growing context."""
from __future__ import annotations

import json

import pytest

from benchmarking.workloads.agentic import BUNDLED, read_sessions
from records.stress import StressRecord
from tests.benchmarking.test_workloads_stub import _bench
from tests.stress_tests.test_stress_workflow import run_stress, stub  # noqa: F401 - stub is a fixture


def test_the_bundled_sessions_read_and_carry_tool_results() -> None:
    sessions = read_sessions(BUNDLED)
    assert len(sessions) == 8 and all(3 <= len(s["turns"]) <= 5 for s in sessions)
    assert any(t["tool"] for s in sessions for t in s["turns"])


@pytest.mark.parametrize("line, words", [
    ('{"turns": []}', "non-empty list of turns"),
    ('{"turns": [{"user_tokens": 8, "tool_result_tokens": 8}]}', "one of them"),
    ('{"turns": [{"user_tokens": 0}]}', "whole number >= 1"),
    ('{"turns": [{"user_tokens": 8, "think_s": -1}]}', "think_s must be seconds"),
    ('{"turns": [{"user_tokens": 8, "colour": 1}]}', "keys are"),
    ('not json', "not JSON"),
])
def test_a_bad_session_file_names_its_line(tmp_path, line: str, words: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"turns": [{"user_tokens": 8}]}\n' + line + "\n")
    with pytest.raises(ValueError, match="line 2") as err:
        read_sessions(path)
    assert words in str(err.value)


def _sessions(tmp_path):
    path = tmp_path / "agent.jsonl"
    path.write_text(json.dumps({"session": "a", "osl": 4, "turns": [
        {"user_tokens": 12}, {"tool": "search", "tool_result_tokens": 40, "think_s": 0.01},
        {"user_tokens": 8, "think_s": 0.01}]}) + "\n")
    return path


def test_agentic_sessions_in_the_benchmarks(stub_factory, tmp_path, tiny_tokenizer_dir) -> None:
    server = stub_factory("--ttft-ms", "5", "--itl-ms", "1")
    p = _bench(tmp_path / "run", server.url, {"workload": "agentic", "sessions_file": str(_sessions(tmp_path)),
                                            "sessions": "2", "points": "12x4x2"}, tiny_tokenizer_dir)
    assert p.returncode == 0, p.stdout + p.stderr
    (point,) = [f for f in (tmp_path / "run" / "benchmarks").glob("point_agentic*.json") if f.stem.count(".") == 0]
    rec = json.loads(point.read_text())
    w = rec["workload"]
    assert w["kind"] == "agentic" and w["sessions_passed"] == "2/2" and w["tool_calls"] == 2
    assert [t["turn"] for t in w["per_turn"]] == [1, 2, 3] and all(t["ttft"]["n"] == 2 for t in w["per_turn"])
    assert all(s["passed"] and s["tokens"] for s in w["per_session"])
    rows = [json.loads(line) for line in point.with_suffix(".requests.jsonl").read_text().splitlines()]
    by_turn = {r["turn"]: r["input_tokens"] for r in rows if r["session"] == "a#0"}
    assert by_turn[1] < by_turn[2] < by_turn[3]  # the context grows: answers and the tool result are carried
    assert {r["tool"] for r in rows} == {None, "search"} and all(r["turns_planned"] == 3 for r in rows)


def test_agentic_sessions_as_a_stress_point(stub, tmp_path) -> None:  # noqa: F811
    url, _ = stub("--ttft-ms", "5", "--itl-ms", "1")
    shape = {"mode": "smoke", "input_size": "16", "output_size": "4", "max_concurrent": "1", "num_prompts": "2"}
    proc = run_stress(tmp_path / "ag", url, {**shape, "workload": "agentic", "sessions": "2"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (point,) = StressRecord.read(tmp_path / "ag" / "stress_tests" / "stress_record.json").points
    assert point.workload["kind"] == "agentic" and point.passed
    assert point.completed == sum(s["planned"] for s in point.workload["per_session"])
