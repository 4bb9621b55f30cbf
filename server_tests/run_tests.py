"""tests workflow entry: the API conformance suite (server_tests/cases) with pytest against a live server.

    python -m server_tests.run_tests --run-dir RUN_DIR --model-spec-json PATH --server-url URL \
        --workflow-args-json '{"markers": "sampling and not stream", "test_name": "seed", "list_tests": "true"}'

The cases that compare two answers of one request run first with nothing else in flight, then the rest
several at a time (``ALONE``, ``parallel_workers``); their JUnit files are merged into one.
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


#: Cases that compare two answers of one request (greedy alone and in a batch, streamed and not, one seed
#: twice): on an engine that is not batch invariant another case's request in flight could change one of the
#: answers, so they run first with nothing else in flight; every other case is independent of its neighbours
#: and the rest run ``parallel_workers`` at a time (pytest-xdist), as the server batches them.
ALONE = "invariance or alone"


def parallel_workers(spec: ModelSpec) -> int:
    """Cases in flight at once: the spec's max concurrency (its batch), at most 4. Measured on the 2-core CPU
    default (batch 4, where a decode step of 4 requests costs what one costs), smoke: the suite's pytest time
    18.2 s in one phase, 6.4 + 5.3 s in two (the invariance case at 4 prompts)."""
    return max(1, min(4, int(spec.device_model_spec.max_concurrency or 1)))


def phase_commands(out_dir: Path, markers: str | None, test_name: str | None,
                   workers: int) -> list[tuple[list[str], Path]]:
    """(pytest command, its JUnit file) of the two phases: the cases that must run alone, then the rest."""
    within = f"({markers}) and " if markers else ""
    alone = out_dir / "junit_alone.xml"
    rest = out_dir / "junit_parallel.xml"
    parallel = pytest_command(rest, f"{within}not ({ALONE})", test_name, False)
    if workers > 1:
        parallel += ["-p", "xdist", "-n", str(workers)]
    return [(pytest_command(alone, f"{within}({ALONE})", test_name, False), alone), (parallel, rest)]


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


#: Prompts of the batch-invariance case per size mode: a smoke run sends 4 (one batch of the CPU default;
#: the 8 sent one at a time were a third of the smoke suite's time), ci and full 8.
INVARIANCE_PROMPTS_PER_MODE = {"smoke": 4}


def suite_env(server_url: str, served_model_name: str, spec: ModelSpec, mode: str = "ci") -> dict[str, str]:
    """The suite's settings (see cases/conftest.py); the bearer stays in OPENAI_API_KEY as given."""
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, TT_TEST_SERVER_URL=server_url, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["TT_SERVED_MODEL_NAME"] = served_model_name
    env["TT_TEST_ENGINE"] = os.environ.get("TT_TEST_ENGINE") or spec.engine.value
    env["TT_TEST_MAX_BATCH_DIVERGENCE"] = str(spec.device_model_spec.max_batch_divergence)
    speculative = spec.device_model_spec.vllm_args.get("speculative_config")
    env["TT_TEST_SPECULATIVE"] = json.dumps(speculative) if speculative else ""  # the lossless case runs when set
    if mode in INVARIANCE_PROMPTS_PER_MODE:
        env["TT_TEST_INVARIANCE_PROMPTS"] = str(INVARIANCE_PROMPTS_PER_MODE[mode])
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
    env = suite_env(inv.server_url, inv.served_model_name, inv.spec, str(args.get("mode") or "ci"))
    _log(f"server {inv.server_url}, model {env['TT_SERVED_MODEL_NAME']}, engine {env['TT_TEST_ENGINE'] or '?'}")
    filters = {"markers": markers, "test_name": test_name}
    if list_only:
        cmd = pytest_command(None, markers, test_name, True)
        _log("$ " + " ".join(cmd))
        code = subprocess.call(cmd, env=env, cwd=str(CASES_DIR))
        inv.write_outputs([])
        if code != 0:
            raise BadInput(f"pytest could not list the cases (exit {code})")
        return EXIT_OK
    started, t0 = _now(), time.monotonic()
    phases = phase_commands(inv.out_dir, markers, test_name, parallel_workers(inv.spec))
    codes = []
    for cmd, part in phases:
        part.unlink(missing_ok=True)
        _log("$ " + " ".join(cmd))
        codes.append(subprocess.call(cmd, env=env, cwd=str(CASES_DIR)))
        if inv.stop.requested:
            break
    merged = merge_junit([part for _, part in phases], junit)
    commands = [cmd for cmd, _ in phases]
    if inv.stop.requested:
        if merged:
            _write_record(inv, env, commands, junit, started, time.monotonic() - t0, filters, interrupted=True)
            _log(f"interrupted by {inv.stop.name}: the record keeps the cases that ran")
        return inv.stop.exit_code
    broken = [code for code in codes if code not in (0, 1, 5)]
    if broken or not merged:
        why = f"pytest could not run the suite (exit {broken[0]})" if broken else "no case matches the filters"
        raise BadInput(f"{why} (markers={markers!r}, test_name={test_name!r})")
    return _write_record(inv, env, commands, junit, started, time.monotonic() - t0, filters)


def merge_junit(parts: list[Path], junit: Path) -> bool:
    """Write the phases' cases into one JUnit file (and remove the parts); False when no phase ran a case."""
    from server_tests.junit import merge

    present = [part for part in parts if part.is_file()]
    count = merge(present, junit, suite_name="api_conformance") if present else 0
    for part in present:
        part.unlink()
    return count > 0


def _write_record(inv: ClientInvocation, env: dict, commands: list[list[str]], junit: Path, started: str,
                  duration: float, filters: dict, interrupted: bool = False) -> int:
    from records.server_tests import TestsRecord
    from server_tests.junit import read_cases

    record = TestsRecord(model_id=inv.spec.model_id, served_model_name=env["TT_SERVED_MODEL_NAME"],
                         server_url=inv.server_url, engine=env["TT_TEST_ENGINE"] or None,
                         filters={k: v for k, v in filters.items() if v}, started=started,
                         duration_s=round(duration, 3), junit_xml=inv.rel(junit),
                         pytest_command=" ; ".join(" ".join(cmd[1:]) for cmd in commands),
                         cases=read_cases(junit))
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
