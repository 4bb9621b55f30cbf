"""The history store on SQLite (default, no set-up) and on a real PostgreSQL server: the same code."""
from __future__ import annotations

import copy
import sqlite3
from pathlib import Path

import pytest

from history.fingerprint import fingerprint, host_facts_of, spec_identity
from history.store import MIGRATIONS, SCHEMA_VERSION, HistoryError, open_store, store_url
from reports import build_report

FIXTURE = Path(__file__).resolve().parent.parent / "reports" / "fixtures" / "benchmarks_only_run"


def _record(run_id: str, started: str, ttft: float, cpu: str = "Test CPU @ 2GHz"):
    record = copy.deepcopy(build_report(FIXTURE))
    record.metadata.run_id, record.metadata.run_started = run_id, started
    record.metadata.environment.host.cpu = cpu
    record.benchmarks[0].mean_ttft_ms = ttft
    return record


def test_index_last_and_trend(url, tmp_path) -> None:
    with open_store(url) as store:
        assert store.schema_version == SCHEMA_VERSION == len(MIGRATIONS)
        a = store.index(_record("run-a", "2026-01-01T00:00:00+00:00", 60.0), tmp_path / "a")
        store.index(_record("run-b", "2026-01-02T00:00:00+00:00", 70.0), tmp_path / "b")
        store.index(_record("run-x", "2026-01-03T00:00:00+00:00", 80.0, cpu="Other CPU"), tmp_path / "x")
        # indexing the same run again replaces it (a re-index after a rebuild)
        store.index(_record("run-b", "2026-01-02T00:00:00+00:00", 72.0), tmp_path / "b")
    with open_store(url) as store:  # a second connection sees the same rows; migrations are not re-applied
        assert store.schema_version == SCHEMA_VERSION
        last = store.last(a.spec_key, a.host_fingerprint, before="2026-01-09", exclude="run-c")
        assert last is not None and last.run_id == "run-b"
        assert last.metrics["isl-128_osl-128_con-1 ttft_ms"] == 72.0
        assert last.run_dir == str((tmp_path / "b").resolve())
        assert store.last(a.spec_key, a.host_fingerprint, before="2026-01-02", exclude="run-c").run_id == "run-a"
        any_host = store.last(a.spec_key, None, before=None, exclude="run-c")
        assert any_host.run_id == "run-x" and any_host.host_facts["cpu"] == "Other CPU"
        assert [e.run_id for e in store.trend(a.spec_key, a.host_fingerprint, until=None)] == ["run-a", "run-b"]
        assert store.get("run-x").host_fingerprint != a.host_fingerprint
        assert store.get("nope") is None


def test_identity_and_fingerprint_come_from_the_record() -> None:
    record = build_report(FIXTURE)
    ident = spec_identity(record)
    assert ident.key == "SmolLM2-135M-Instruct|cpu|cpu-reference|vllm" and ident.spec_version == "0.1.0"
    facts = host_facts_of(record)
    assert facts["cpu"] == "Test CPU @ 2GHz" and facts["package vllm"] == "0.9.2"
    other = dict(facts, cores=64)
    assert fingerprint(facts) == fingerprint(dict(facts)) != fingerprint(other)


def test_a_store_newer_than_the_code_is_refused(tmp_path) -> None:
    path = tmp_path / "h.sqlite3"
    open_store(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(HistoryError, match=f"schema version {SCHEMA_VERSION + 1}"):
        open_store(f"sqlite:///{path}")


def test_an_older_store_is_migrated_in_place(tmp_path) -> None:
    """A store made by version 1 of the schema gains the later tables, keeping its rows."""
    path = tmp_path / "h.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO schema_version VALUES (1)")
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("INSERT INTO runs VALUES ('old', '/r', 'k', 'm', 'cpu', 'i', 'e', 'v', 'h', '{}', 'release', "
                     "'passed', 'PASS', '2025-01-01', NULL, '2025-01-01')")
    with open_store(f"sqlite:///{path}") as store:
        assert store.schema_version == SCHEMA_VERSION
        assert store.get("old").verdict == "PASS" and store.get("old").metrics == {}


def test_unreachable_and_bad_urls_are_one_line(tmp_path) -> None:
    with pytest.raises(HistoryError, match="cannot be reached") as err:
        open_store("postgresql://tt:secret@127.0.0.1:9/nothing?connect_timeout=2")
    assert "secret" not in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(HistoryError, match="neither"):
        open_store("mysql://x")


def test_default_store_is_sqlite_in_the_cache_directory(tmp_path) -> None:
    assert store_url({"CACHE_ROOT": str(tmp_path)}) == f"sqlite:///{tmp_path}/workflow_logs/history.sqlite3"
    assert store_url({"TT_HISTORY_URL": "postgresql://h/db"}) == "postgresql://h/db"
