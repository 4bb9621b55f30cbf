"""tests workflow entry: the API conformance suite (server_tests/cases) with pytest against a live server.

    python server_tests/run_tests.py --run-dir RUN_DIR --model-spec-json PATH --server-url URL \
        --workflow-args-json '{"markers": "sampling and not stream", "test_name": "seed", "list_tests": "true"}'

Writes RUN_DIR/tests/junit.xml, RUN_DIR/tests/tests_record.json (``records.server_tests.TestsRecord``)
and RUN_DIR/tests/outputs.json. ``list_tests=true`` prints the selected cases and runs nothing.
Exit 0 when no case failed or errored, 1 when one did, 2 on bad input (an unknown marker, a
filter that selects nothing).

Its --workflow-args keys are declared in contracts.workflow_keys (TEST_ARGS).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from contracts.workflow_keys import TEST_ARGS  # noqa: E402

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


def suite_env(server_url: str, spec: dict) -> dict[str, str]:
    """The suite's settings (see cases/conftest.py); the bearer stays in OPENAI_API_KEY as given."""
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, TT_TEST_SERVER_URL=server_url, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["TT_SERVED_MODEL_NAME"] = (os.environ.get("TT_SERVED_MODEL_NAME") or spec.get("served_model_name")
                                   or spec.get("hf_model_repo") or "")
    env["TT_TEST_ENGINE"] = os.environ.get("TT_TEST_ENGINE") or str(spec.get("engine") or "")
    return env


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def main(argv: list[str] | None = None) -> int:
    from contracts.workflow_args import client_workflow_parser

    a = client_workflow_parser("tt-inference-server tests workflow (API conformance)",
                               server_required=True).parse_args(argv)
    try:
        spec = json.loads(Path(a.model_spec_json).read_text())
        args = json.loads(a.workflow_args_json or "{}")
        if not isinstance(args, dict):
            raise ValueError("--workflow-args-json must be a JSON object")
    except (OSError, ValueError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr, flush=True)
        return 2
    if not a.server_url:
        print("ERROR: --server-url is empty: the tests workflow needs a live server", file=sys.stderr)
        return 2
    markers, test_name = args.get("markers") or None, args.get("test_name") or None
    list_only = str(args.get("list_tests", "")).lower() in _TRUE
    out_dir = Path(a.run_dir) / "tests"
    out_dir.mkdir(parents=True, exist_ok=True)
    junit = out_dir / "junit.xml"
    env = suite_env(a.server_url, spec)
    cmd = pytest_command(None if list_only else junit, markers, test_name, list_only)
    _log(f"server {a.server_url}, model {env['TT_SERVED_MODEL_NAME']}, engine {env['TT_TEST_ENGINE'] or '?'}")
    _log("$ " + " ".join(cmd))
    started, t0 = _now(), time.monotonic()
    signals: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT):  # pytest (same process group) gets it too and winds down
        signal.signal(signum, lambda n, _f: signals.append(n))
    code = subprocess.call(cmd, env=env, cwd=str(CASES_DIR))
    if list_only:
        (out_dir / "outputs.json").write_text(json.dumps({"outputs": []}) + "\n")
        return 0 if code == 0 else 2
    if signals and junit.is_file():
        _write_record(a, spec, env, cmd, junit, out_dir, started, time.monotonic() - t0,
                      {"markers": markers, "test_name": test_name}, interrupted=True)
        _log(f"interrupted by {signal.Signals(signals[0]).name}: the record keeps the cases that ran")
        return 128 + signals[0]
    if signals:
        return 128 + signals[0]
    if code in (4, 5) or not junit.is_file():
        why = "no case matches the filters" if code == 5 else f"pytest could not run the suite (exit {code})"
        print(f"ERROR: {why} (markers={markers!r}, test_name={test_name!r})", file=sys.stderr, flush=True)
        return 2
    return _write_record(a, spec, env, cmd, junit, out_dir, started, time.monotonic() - t0,
                         {"markers": markers, "test_name": test_name})


def _write_record(a, spec: dict, env: dict, cmd: list[str], junit: Path, out_dir: Path, started: str,
                  duration: float, filters: dict, interrupted: bool = False) -> int:
    from server_tests.junit import read_cases
    from records.server_tests import TestsRecord

    record = TestsRecord(model_id=str(spec.get("model_id") or ""), served_model_name=env["TT_SERVED_MODEL_NAME"],
                         server_url=a.server_url, engine=env["TT_TEST_ENGINE"] or None,
                         filters={k: v for k, v in filters.items() if v}, started=started,
                         duration_s=round(duration, 3), junit_xml="tests/junit.xml",
                         pytest_command=" ".join(cmd[1:]), cases=read_cases(junit))
    record.summarise()
    if interrupted:
        record.passed, record.status = False, "failed"
        record.detail = "interrupted; " + record.detail
    path = record.write(out_dir / "tests_record.json")
    (out_dir / "outputs.json").write_text(json.dumps({"outputs": ["tests/junit.xml", "tests/tests_record.json"]}) + "\n")
    _log(f"{record.status.upper()}: {record.detail}")
    _log(f"record: {path}")
    return 0 if record.passed else 1


if __name__ == "__main__":
    sys.exit(main())
