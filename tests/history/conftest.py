"""A real PostgreSQL server for the history tests: a private cluster in a temp directory.

The Debian package's ``initdb``/``pg_ctl`` (``/usr/lib/postgresql/*/bin``) start an unprivileged
cluster on a Unix socket in the temp directory (no TCP port, nothing shared with the host). CI runs
as root, which PostgreSQL refuses: the cluster then runs as ``nobody``. Without the package the
tests that need it skip with the reason, unless ``REQUIRE_POSTGRES=1`` (``.ci/run`` sets it).
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

START_TIMEOUT_S = 60


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def _as_user(cmd: list[str], user: str | None) -> list[str]:
    return ["runuser", "-u", user, "--", *cmd] if user else cmd


@pytest.fixture(scope="session")
def postgres_url():
    """``postgresql://`` URL of a fresh database on a private server, stopped after the session."""
    pg = _pg_bin()
    if pg is None:
        if os.environ.get("REQUIRE_POSTGRES") == "1":
            pytest.fail("REQUIRE_POSTGRES=1 but no PostgreSQL server binaries in /usr/lib/postgresql/*/bin "
                        "(Debian package postgresql)")
        pytest.skip("no PostgreSQL server binaries in /usr/lib/postgresql/*/bin (Debian package postgresql; "
                    "set REQUIRE_POSTGRES=1 to make this a failure)")
    user = "nobody" if os.geteuid() == 0 else None
    root = Path(tempfile.mkdtemp(prefix="tt-history-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if user:
        shutil.chown(root, user)
        shutil.chown(sock, user)
    run = lambda cmd, **kw: subprocess.run(_as_user(cmd, user), capture_output=True, text=True,  # noqa: E731
                                           timeout=START_TIMEOUT_S, **kw)
    init = run([str(pg / "initdb"), "-D", str(data), "-U", "tt", "--auth=trust", "-E", "UTF8", "--no-sync"])
    assert init.returncode == 0, f"initdb failed: {init.stderr[-2000:]}"
    start = run([str(pg / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w", "-t",
                 str(START_TIMEOUT_S), "-o", f"-k {sock} -c listen_addresses='' -c fsync=off", "start"])
    server_log = (root / "server.log").read_text()[-2000:] if (root / "server.log").exists() else ""
    assert start.returncode == 0, f"pg_ctl start failed: {start.stderr[-2000:]} {server_log}"
    try:
        made = run([str(pg / "createdb"), "-h", str(sock), "-U", "tt", "history"])
        assert made.returncode == 0, f"createdb failed: {made.stderr[-2000:]}"
        yield f"postgresql://tt@/history?host={sock}"
    finally:
        run([str(pg / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path):
    """A fresh history store: SQLite in the test's directory, or a fresh database on the private server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.sqlite3'}"
    base = request.getfixturevalue("postgres_url")
    import psycopg

    name = f"t_{abs(hash(request.node.nodeid)) % 10**9}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return base.replace("/history?", f"/{name}?")
