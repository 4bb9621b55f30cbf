"""tests workflow entry: the API conformance suite (server_tests/cases) with pytest against a live server.

    python -m server_tests.run_tests --run-dir RUN_DIR --model-spec-json PATH --server-url URL \
        --workflow-args-json '{"markers": "sampling and not stream", "test_name": "seed", "list_tests": "true"}'

Writes RUN_DIR/tests/junit.xml, RUN_DIR/tests/tests_record.json (``records.server_tests.TestsRecord``)
and RUN_DIR/tests/outputs.json. ``list_tests=true`` prints the selected cases and runs nothing.
Exit 0 when no case failed or errored, 1 when one did, 2 on bad input (an unknown marker, a
filter that selects nothing).

Its --workflow-args keys are declared in contracts.workflow_keys (TEST_ARGS).
"""
from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
from pathlib import Path

from contracts.client_main import EXIT_FAILED, EXIT_OK, BadInput, ClientInvocation, run_client
from contracts.model_spec import ModelSpec
from contracts.workflow_keys import TEST_ARGS

CASES_DIR = Path(__file__).resolve().parent / "cases"
# markers: a pytest -m expression; test_name: a pytest -k expression; list_tests: print, run nothing
WORKFLOW_ARG_KEYS = frozenset(TEST_ARGS)
_TRUE = ("1", "true", "yes", "on")


def _log(msg: str) -> None:
    print(f"[tests] {msg}", flush=True)


def pytest_command(junit: Path | None, markers: str | None, test_name: str | None, list_only: bool) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", str(CASES_DIR), "-c", str(CASES_DIR / "pytest.ini"),
           "--rootdir", str(CASES_DIR), "-v"]
    if markers:
        cmd += ["-m", markers]
    if test_name:
        cmd += ["-k", test_name]
    if list_only:
        cmd += ["--collect-only", "-q"]
    elif junit is not None:
        cmd += [f"--junitxml={junit}", "-o", "junit_family=xunit2", "-o", "junit_suite_name=api_conformance"]
    return cmd


def suite_env(server_url: str, served_model_name: str, spec: ModelSpec) -> dict[str, str]:
    """The suite's settings (see cases/conftest.py); the bearer stays in OPENAI_API_KEY as given."""
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, TT_TEST_SERVER_URL=server_url, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["TT_SERVED_MODEL_NAME"] = served_model_name
    env["TT_TEST_ENGINE"] = os.environ.get("TT_TEST_ENGINE") or spec.engine.value
    env["TT_TEST_MAX_BATCH_DIVERGENCE"] = str(spec.device_model_spec.max_batch_divergence)
    return env


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def main(argv: list[str] | None = None) -> int:
    return run_client("tests", "tt-inference-server tests workflow (API conformance)", run, argv,
                      server_required=True)


def run(inv: ClientInvocation) -> int:
    """Run the selected cases with pytest (same process group: a signal reaches it too and it winds down)."""
    if not inv.server_url:
        raise BadInput("--server-url is empty: the tests workflow needs a live server")
    args = inv.workflow_args
    markers, test_name = args.get("markers") or None, args.get("test_name") or None
    list_only = str(args.get("list_tests", "")).lower() in _TRUE
    junit = inv.out_dir / "junit.xml"
    env = suite_env(inv.server_url, inv.served_model_name, inv.spec)
    cmd = pytest_command(None if list_only else junit, markers, test_name, list_only)
    _log(f"server {inv.server_url}, model {env['TT_SERVED_MODEL_NAME']}, engine {env['TT_TEST_ENGINE'] or '?'}")
    _log("$ " + " ".join(cmd))
    started, t0 = _now(), time.monotonic()
    code = subprocess.call(cmd, env=env, cwd=str(CASES_DIR))
    filters = {"markers": markers, "test_name": test_name}
    if list_only:
        inv.write_outputs([])
        if code != 0:
            raise BadInput(f"pytest could not list the cases (exit {code})")
        return EXIT_OK
    if inv.stop.requested:
        if junit.is_file():
            _write_record(inv, env, cmd, junit, started, time.monotonic() - t0, filters, interrupted=True)
            _log(f"interrupted by {inv.stop.name}: the record keeps the cases that ran")
        return inv.stop.exit_code
    if code in (4, 5) or not junit.is_file():
        why = "no case matches the filters" if code == 5 else f"pytest could not run the suite (exit {code})"
        raise BadInput(f"{why} (markers={markers!r}, test_name={test_name!r})")
    return _write_record(inv, env, cmd, junit, started, time.monotonic() - t0, filters)


def _write_record(inv: ClientInvocation, env: dict, cmd: list[str], junit: Path, started: str,
                  duration: float, filters: dict, interrupted: bool = False) -> int:
    from records.server_tests import TestsRecord
    from server_tests.junit import read_cases

    record = TestsRecord(model_id=inv.spec.model_id, served_model_name=env["TT_SERVED_MODEL_NAME"],
                         server_url=inv.server_url, engine=env["TT_TEST_ENGINE"] or None,
                         filters={k: v for k, v in filters.items() if v}, started=started,
                         duration_s=round(duration, 3), junit_xml=inv.rel(junit),
                         pytest_command=" ".join(cmd[1:]), cases=read_cases(junit))
    record.summarise()
    if interrupted:
        record.passed, record.status = False, "failed"
        record.detail = "interrupted; " + record.detail
    path = record.write(inv.out_dir / "tests_record.json")
    inv.write_outputs([junit, path])
    _log(f"{record.status.upper()}: {record.detail}")
    _log(f"record: {path}")
    return EXIT_OK if record.passed else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
