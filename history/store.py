"""The history store: SQLite in the cache directory by default, PostgreSQL given by a URL.

Why two backends and one code path: one machine needs no set-up (SQLite next to the run
directories), many CI runners need one shared place (PostgreSQL). The SQL is written once in the
subset both speak (``?`` placeholders are turned into psycopg's ``%s``; upserts are
``ON CONFLICT ... DO UPDATE``), so a test on either backend tests the same statements.

Where it is: ``TT_HISTORY_URL`` when set (``postgresql://user@host/db``, ``sqlite:///path``),
else ``<cache>/workflow_logs/history.sqlite3`` (``<cache>`` is ``$CACHE_ROOT`` or the repository).

Schema versions: ``MIGRATIONS`` is an append-only list; ``schema_version`` holds the number of the
last one applied. Opening a store applies what is missing in one transaction (PostgreSQL: under an
advisory lock, so two runners opening a new database at once do not race). A store whose version
is newer than this code refuses to be written, naming both versions.
"""
from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from contracts import REPO_ROOT
from history.baseline import LAST_STATUSES, LAST_VERDICTS
from history.fingerprint import fingerprint, host_facts_of, spec_identity
from records.report import ReportRecord

URL_ENV = "TT_HISTORY_URL"
CONNECT_TIMEOUT_S = 10
#: Advisory lock id of the migrations (PostgreSQL): any constant every writer agrees on.
MIGRATION_LOCK = 7_220_022

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: one row per run
    ("CREATE TABLE runs (run_id TEXT PRIMARY KEY, run_dir TEXT NOT NULL, spec_key TEXT NOT NULL, "
     "model TEXT NOT NULL, device TEXT NOT NULL, impl TEXT NOT NULL, engine TEXT NOT NULL, "
     "spec_version TEXT NOT NULL, host_fingerprint TEXT NOT NULL, host_facts TEXT NOT NULL, "
     "workflow TEXT, run_status TEXT, verdict TEXT, started TEXT, ended TEXT, indexed_at TEXT NOT NULL)",
     "CREATE INDEX runs_by_spec_host ON runs (spec_key, host_fingerprint, started)"),
    # 2: the headline metrics of each run, for trends without reading run directories
    ("CREATE TABLE run_metrics (run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE, "
     "name TEXT NOT NULL, value DOUBLE PRECISION NOT NULL, PRIMARY KEY (run_id, name))",),
)
SCHEMA_VERSION = len(MIGRATIONS)


class HistoryError(Exception):
    """The store cannot be reached or used; the message is one line naming the store."""


@dataclass
class RunEntry:
    """One indexed run."""

    run_id: str
    run_dir: str
    spec_key: str
    model: str
    device: str
    impl: str
    engine: str
    spec_version: str
    host_fingerprint: str
    host_facts: dict[str, Any]
    workflow: str | None
    run_status: str | None
    verdict: str | None
    started: str | None
    ended: str | None
    metrics: dict[str, float] = field(default_factory=dict)


def default_url(env: Mapping[str, str] | None = None) -> str:
    source = os.environ if env is None else env
    base = Path(source["CACHE_ROOT"]) if source.get("CACHE_ROOT") else REPO_ROOT
    return f"sqlite:///{base / 'workflow_logs' / 'history.sqlite3'}"


def store_url(env: Mapping[str, str] | None = None) -> str:
    source = os.environ if env is None else env
    return source.get(URL_ENV) or default_url(source)


def shown_url(url: str) -> str:
    """The URL without its password, for messages."""
    if "://" not in url or "@" not in url.split("://", 1)[1].split("/", 1)[0]:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.split("@", 1)
    return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}" if ":" in creds else url


def headline_metrics(record: ReportRecord) -> dict[str, float]:
    """What the trend plot and the support table show: per benchmark point mean TTFT, TPOT and output
    throughput; per media point its figures; per eval task its score."""
    out: dict[str, float] = {}
    for row in record.benchmarks:
        for name, value in (("ttft_ms", row.mean_ttft_ms), ("tpot_ms", row.mean_tpot_ms),
                            ("output_tok_s", row.output_throughput)):
            if value is not None:
                out[f"{row.key} {name}"] = float(value)
    for media in record.media:
        for name, value in media.figures.items():
            if isinstance(value, (int, float)):
                out[f"{media.key} {name}"] = float(value)
    for ev in record.evals:
        if ev.value is not None:
            out[f"accuracy {ev.task}"] = float(ev.value)
    return out


class HistoryStore:
    """A connection to one store; use as a context manager (``with open_store() as store``)."""

    def __init__(self, url: str, conn: Any, postgres: bool) -> None:
        self.url, self._conn, self._pg = url, conn, postgres

    # -- plumbing --------------------------------------------------------------------------
    def _sql(self, text: str) -> str:
        return text.replace("?", "%s") if self._pg else text

    def _execute(self, text: str, params: Sequence[Any] = ()) -> Any:
        cur = self._conn.cursor()
        cur.execute(self._sql(text), tuple(params))
        return cur

    def _rows(self, text: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self._execute(text, params).fetchall())

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "HistoryStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        try:
            rows = self._rows("SELECT version FROM schema_version")
        except Exception:  # noqa: BLE001 - no table yet (each driver raises its own class)
            self._conn.rollback()
            return 0
        return int(rows[0][0]) if rows else 0

    def migrate(self) -> int:
        """Apply the migrations this store lacks; returns the version it is at now."""
        try:
            if self._pg:
                self._execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
            else:
                self._conn.execute("BEGIN IMMEDIATE")
            self._execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            rows = self._rows("SELECT version FROM schema_version")
            current = int(rows[0][0]) if rows else 0
            if current > SCHEMA_VERSION:
                raise HistoryError(f"history store {shown_url(self.url)} is at schema version {current}; this "
                                   f"code knows up to {SCHEMA_VERSION} (update the tool)")
            for statements in MIGRATIONS[current:]:
                for statement in statements:
                    self._execute(statement)
            if not rows:
                self._execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            elif current < SCHEMA_VERSION:
                self._execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
            self._conn.commit()
            return SCHEMA_VERSION
        except HistoryError:
            self._conn.rollback()
            raise
        except Exception as exc:  # noqa: BLE001 - driver errors become one line
            self._conn.rollback()
            raise HistoryError(f"history store {shown_url(self.url)}: migration failed: "
                               f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
                               ) from None

    # -- writing ---------------------------------------------------------------------------
    def index(self, record: ReportRecord, run_dir: Path) -> RunEntry:
        """Insert or replace the run's row and metrics (indexing the same run again updates it)."""
        from datetime import datetime, timezone

        ident = spec_identity(record)
        facts = host_facts_of(record)
        m = record.metadata
        entry = RunEntry(run_id=m.run_id, run_dir=str(Path(run_dir).resolve()), spec_key=ident.key,
                         model=ident.model, device=ident.device, impl=ident.impl, engine=ident.engine,
                         spec_version=ident.spec_version, host_fingerprint=fingerprint(facts), host_facts=facts,
                         workflow=m.workflow, run_status=m.run_status, verdict=record.verdict.result,
                         started=m.run_started, ended=m.run_ended, metrics=headline_metrics(record))
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        try:
            self._execute(
                "INSERT INTO runs (run_id, run_dir, spec_key, model, device, impl, engine, spec_version, "
                "host_fingerprint, host_facts, workflow, run_status, verdict, started, ended, indexed_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
                "run_dir = excluded.run_dir, spec_key = excluded.spec_key, model = excluded.model, "
                "device = excluded.device, impl = excluded.impl, engine = excluded.engine, "
                "spec_version = excluded.spec_version, host_fingerprint = excluded.host_fingerprint, "
                "host_facts = excluded.host_facts, workflow = excluded.workflow, run_status = excluded.run_status, "
                "verdict = excluded.verdict, started = excluded.started, ended = excluded.ended, "
                "indexed_at = excluded.indexed_at",
                (entry.run_id, entry.run_dir, entry.spec_key, entry.model, entry.device, entry.impl, entry.engine,
                 entry.spec_version, entry.host_fingerprint, json.dumps(facts, sort_keys=True, default=str),
                 entry.workflow, entry.run_status, entry.verdict, entry.started, entry.ended, now))
            self._execute("DELETE FROM run_metrics WHERE run_id = ?", (entry.run_id,))
            for name, value in sorted(entry.metrics.items()):
                self._execute("INSERT INTO run_metrics (run_id, name, value) VALUES (?, ?, ?)",
                              (entry.run_id, name, value))
            self._conn.commit()
        except Exception as exc:  # noqa: BLE001
            self._conn.rollback()
            raise HistoryError(f"history store {shown_url(self.url)}: indexing {entry.run_id} failed: "
                               f"{type(exc).__name__}: {exc}") from None
        return entry

    # -- reading ---------------------------------------------------------------------------
    _COLUMNS = ("run_id, run_dir, spec_key, model, device, impl, engine, spec_version, host_fingerprint, "
                "host_facts, workflow, run_status, verdict, started, ended")
    _COLUMN_NAMES = tuple(name.strip() for name in _COLUMNS.split(","))

    def _entries(self, where: str, params: Sequence[Any], order: str = "started DESC",
                 limit: int | None = None) -> list[RunEntry]:
        text = f"SELECT {self._COLUMNS} FROM runs WHERE {where} ORDER BY {order}"
        if limit is not None:
            text += f" LIMIT {int(limit)}"
        out = []
        for row in self._rows(text, params):
            values = dict(zip(self._COLUMN_NAMES, row))
            entry = RunEntry(**{**values, "host_facts": json.loads(values["host_facts"])})
            entry.metrics = {name: float(value) for name, value in self._rows(
                "SELECT name, value FROM run_metrics WHERE run_id = ?", (entry.run_id,))}
            out.append(entry)
        return out

    def get(self, run_id: str) -> RunEntry | None:
        found = self._entries("run_id = ?", (run_id,))
        return found[0] if found else None

    def finished(self, spec_key: str, host_fingerprint: str | None, *, before: str | None, exclude: str,
                 workflow: str | None = None, limit: int = 10) -> list[RunEntry]:
        """Runs that may be the automatic baseline, newest first: of the spec (on that host unless
        ``host_fingerprint`` is None), started before ``before``, other than ``exclude``, the same
        workflow when one is given, that ended with nothing failed as the history last saw them
        (``history.baseline``: run status passed or inconclusive, verdict PASS or INCONCLUSIVE).
        The caller checks each run's own manifest before using it (the index can be stale)."""
        where, params = self._accepted(exclude, before)
        where.append("spec_key = ?")
        params.append(spec_key)
        if host_fingerprint is not None:
            where.append("host_fingerprint = ?")
            params.append(host_fingerprint)
        if workflow is not None:
            where.append("workflow = ?")
            params.append(workflow)
        return self._entries(" AND ".join(where), params, limit=limit)

    def accepted_on_host(self, host_fingerprint: str, *, before: str | None, exclude: str,
                         limit: int = 60) -> list[RunEntry]:
        """Every run of any spec on that host that ended with nothing failed (``finished``'s statuses and
        verdicts), newest first: the runs whose spread is the host class's run-level noise
        (``reports.run_noise``)."""
        where, params = self._accepted(exclude, before)
        where.append("host_fingerprint = ?")
        params.append(host_fingerprint)
        return self._entries(" AND ".join(where), params, limit=limit)

    @staticmethod
    def _accepted(exclude: str, before: str | None) -> tuple[list[str], list[Any]]:
        """The conditions every accepted-run query shares: not ``exclude``, ended with nothing failed
        (``history.baseline``'s statuses and verdicts), started before ``before`` when given."""
        where = ["run_id <> ?", f"run_status IN ({', '.join('?' * len(LAST_STATUSES))})",
                 f"verdict IN ({', '.join('?' * len(LAST_VERDICTS))})"]
        params: list[Any] = [exclude, *LAST_STATUSES, *LAST_VERDICTS]
        if before is not None:
            where.append("started < ?")
            params.append(before)
        return where, params

    def last(self, spec_key: str, host_fingerprint: str | None, *, before: str | None, exclude: str,
             workflow: str | None = None) -> RunEntry | None:
        """The newest of ``finished``, or None."""
        found = self.finished(spec_key, host_fingerprint, before=before, exclude=exclude, workflow=workflow, limit=1)
        return found[0] if found else None

    def trend(self, spec_key: str, host_fingerprint: str, *, until: str | None, limit: int = 30) -> list[RunEntry]:
        """Runs of the spec on that host up to ``until`` (inclusive), oldest first, at most ``limit``."""
        where, params = ["spec_key = ?", "host_fingerprint = ?"], [spec_key, host_fingerprint]
        if until is not None:
            where.append("started <= ?")
            params.append(until)
        return list(reversed(self._entries(" AND ".join(where), params, limit=limit)))

    def runs(self) -> Iterator[RunEntry]:
        yield from self._entries("1 = 1", (), order="started")


def open_store(url: str | None = None) -> HistoryStore:
    """Connect and bring the schema up to date; ``HistoryError`` (one line) when that fails."""
    url = url or store_url()
    if url.startswith(("postgresql://", "postgres://")):
        try:
            import psycopg
        except ImportError:
            raise HistoryError(f"history store {shown_url(url)} is PostgreSQL but psycopg is not installed in "
                               f"this venv (requirements/reports.txt)") from None
        try:
            pg_conn = psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - psycopg.OperationalError and friends
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise HistoryError(f"history store {shown_url(url)} cannot be reached: {first}") from None
        store = HistoryStore(url, pg_conn, postgres=True)
    elif url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///"):])
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=CONNECT_TIMEOUT_S, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise HistoryError(f"history store {url} cannot be opened: {exc}") from None
        store = HistoryStore(url, _SqliteTx(conn), postgres=False)
    else:
        raise HistoryError(f"history store URL {shown_url(url)} is neither postgresql://... nor sqlite:///PATH "
                           f"(set {URL_ENV})")
    try:
        store.migrate()
    except HistoryError:
        store.close()
        raise
    return store


class _SqliteTx:
    """sqlite3 in autocommit mode with explicit BEGIN/COMMIT, so ``BEGIN IMMEDIATE`` works for the
    migrations and every write is its own transaction (the psycopg connection's shape)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        conn.execute("PRAGMA foreign_keys = ON")

    def execute(self, text: str) -> None:
        self._conn.execute(text)

    def cursor(self) -> "_SqliteTx._Cursor":
        return self._Cursor(self._conn)

    def commit(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("COMMIT")

    def rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def close(self) -> None:
        self._conn.close()

    class _Cursor:
        def __init__(self, conn: sqlite3.Connection) -> None:
            self._conn = conn
            self._cur: sqlite3.Cursor | None = None

        def execute(self, text: str, params: tuple[Any, ...]) -> None:
            if not self._conn.in_transaction and not text.lstrip().upper().startswith(("SELECT", "BEGIN")):
                self._conn.execute("BEGIN")
            self._cur = self._conn.execute(text, params)

        def fetchall(self) -> list[tuple[Any, ...]]:
            return self._cur.fetchall() if self._cur is not None else []
