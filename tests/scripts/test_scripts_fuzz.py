"""Every script in scripts/ (and scripts/ci/; not the _repo.py bootstrap they import), given hostile arguments,
ends in one clear line and a documented exit code, never a traceback.

The cases are bad input every command must refuse before it does any work: a flag it does not have, an argument
that is not UTF-8, a 3,000-character flag. (argparse echoes an unknown argument back to who typed it; run.py's own
fuzz test also keeps planted secrets out of its output.) A new script is fuzzed the
day it is added (the list is read from the folder). run.py has its own, deeper fuzz test (tests/test_run_py_fuzz.py).
"""
from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p for p in [*REPO.glob("scripts/*.py"), *REPO.glob("scripts/ci/*.py")] if not p.name.startswith("_"))
#: Exit codes each script documents for bad input (default: argparse's 2). run_tests.py hands its arguments to
#: pytest, whose usage error is 4.
BAD_INPUT_CODES = {"run_tests.py": {4}}
CASES: tuple[tuple[str, list[str | bytes]], ...] = (
    ("unknown flag", ["--definitely-not-a-flag"]),
    ("not UTF-8", [b"--\xff\xfe-flag"]),
    ("3000-character flag", ["--" + "x" * 3000]),
)


def _run(script: Path, argv: list[str | bytes]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    return subprocess.run([sys.executable, str(script), *argv], cwd=REPO, env=env, capture_output=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def test_the_scripts_folder_is_read():
    assert len(SCRIPTS) >= 20 and REPO / "scripts" / "run_dev.py" in SCRIPTS


@pytest.mark.parametrize("case", [name for name, _ in CASES])
def test_every_script_refuses_bad_arguments_in_one_line_without_a_traceback(case):
    argv = dict(CASES)[case]
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = dict(zip(SCRIPTS, pool.map(lambda s: _run(s, argv), SCRIPTS)))
    problems = []
    for script, result in done.items():
        out = (result.stdout + result.stderr).decode(errors="replace")
        codes = BAD_INPUT_CODES.get(script.name, {2})
        if result.returncode not in codes or "Traceback (most recent call last)" in out:
            problems.append(f"{script.relative_to(REPO)}: exit {result.returncode} (want {sorted(codes)}): "
                            f"{out.strip()[-300:]!r}")
    assert not problems, "\n".join(problems)


def test_the_media_servers_gateway_refuses_bad_arguments_in_one_line():
    """tt-media-server's other entry point with arguments (`python -m gateway`; the server itself takes only
    settings, which tests/tt_media_server/test_settings_every_variable.py fuzzes)."""
    from tests.tt_media_server.conftest import SERVER_DIR, media_python

    python = media_python()
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "JWT_SECRET": "fuzz-secret-0123456789"}
    for argv in (*[a for _, a in CASES], ["--port=-5"], ["--upstream=notaurl"], ["--port", "x"]):
        done = subprocess.run([str(python), "-m", "gateway", *argv], cwd=SERVER_DIR, env=env, capture_output=True,
                              timeout=60, stdin=subprocess.DEVNULL)
        out = (done.stdout + done.stderr).decode(errors="replace")
        assert done.returncode == 2 and "Traceback" not in out and out.strip(), (argv, done.returncode, out[-500:])
