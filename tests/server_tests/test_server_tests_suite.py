"""The API conformance suite tested on a fake server: it passes on a conforming one, and every case
fails against the defect it exists to catch (a case that cannot fail is a defect)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from records.server_tests import TestsRecord
from tests.helpers import CPU_SPEC_ID, MEDIA_SPEC_ID, model_spec, write_model_spec
from tests.server_tests.fake_openai import DEFECTS, FakeOpenAI

REPO = Path(__file__).resolve().parents[2]
MODEL = "fake-model"
KEY = "fake-key-0123456789"

# case (function name) -> the one defect that case must catch
DEFECT_FOR_CASE = {
    "test_models_lists_served_model": "models_wrong_id",
    "test_completion_answer_shape": "empty_text",
    "test_chat_answer_shape": "chat_role_user",
    "test_completion_stream_equals_nonstream": "stream_drops_first_token",
    "test_chat_stream_equals_nonstream": "stream_drops_first_token",
    "test_n_choices": "ignore_n",
    "test_n_choices_stream": "ignore_n",
    "test_max_tokens": "ignore_max_tokens",
    "test_stop_honoured": "ignore_stop",
    "test_same_seed_same_text": "ignore_seed",
    "test_different_seeds_different_text": "seed_means_greedy",
    "test_ignore_eos": "ignore_ignore_eos",
    "test_min_tokens": "ignore_min_tokens",
    "test_completion_logprobs_shape": "logprobs_missing_last",
    "test_chat_logprobs_shape": "logprobs_missing_last",
    "test_echo_prefixes_prompt": "ignore_echo",
    "test_echo_logprobs_cover_prompt": "ignore_echo",
    "test_usage_totals": "usage_total_wrong",
    "test_usage_matches_text": "usage_off_by_one",
    "test_stream_usage_equals_nonstream": "stream_usage_missing",
    "test_unknown_model_is_404": "any_model_accepted",
    "test_bad_parameter_is_400": "bad_params_500",
    "test_malformed_json_is_400": "bad_params_500",
    "test_missing_bearer_is_401": "no_auth",
    "test_invalid_bearer_is_401": "no_auth",
    "test_greedy_text_is_the_same_alone_and_in_a_batch": "batch_variant",
}
#: Cases that run only when the spec speculates (this spec does not: skipped with the reason); their own test
#: on a speculating fake: tests/server_tests/test_lossless_case.py
SPECULATING_ONLY = {"test_greedy_output_is_the_same_with_and_without_speculation"}


def run_suite(tmp_path: Path, base_url: str, workflow_args: dict | None = None, engine: str = "vllm",
              api_key: str | None = KEY, model: str = MODEL, timeout: int = 600,
              batch: int | None = None) -> subprocess.CompletedProcess:
    """The tests workflow as run.py starts it. ``batch``: the spec's max_concurrency (the side-by-side phase's
    workers; 1 runs it without pytest-xdist, whose 4 workers each start this dev interpreter again)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = model_spec(MEDIA_SPEC_ID if engine == "media" else CPU_SPEC_ID, model_id="fake", served_model_name=model)
    if batch is not None:
        spec.device_model_spec.max_concurrency = batch
    spec.write(tmp_path / "spec.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TT_TEST_") and k != "OPENAI_API_KEY"}
    env.update(PYTHONPATH=str(REPO), TT_SERVED_MODEL_NAME=model)
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    return subprocess.run([sys.executable, "-m", "server_tests.run_tests", "--run-dir", str(tmp_path),
                           "--model-spec-json", str(tmp_path / "spec.json"), "--server-url", base_url,
                           "--workflow-args-json", json.dumps(workflow_args or {})],
                          capture_output=True, text=True, env=env, timeout=timeout)


def _base(name: str) -> str:
    return name.split("::")[-1].split("[")[0]


@pytest.mark.slow
def test_suite_passes_on_a_conforming_server(tmp_path):
    with FakeOpenAI(MODEL, KEY) as fake:
        proc = run_suite(tmp_path, fake.base_url)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    record = TestsRecord.read(tmp_path / "tests" / "tests_record.json")
    assert record.passed and record.status == "passed"
    assert {c.outcome for c in record.cases if _base(c.name) not in SPECULATING_ONLY} == {"passed"}, [
        (c.name, c.message) for c in record.cases]
    assert all(c.outcome == "skipped" and "does not speculate" in c.message
               for c in record.cases if _base(c.name) in SPECULATING_ONLY)
    assert (tmp_path / "tests" / "junit.xml").is_file()
    assert json.loads((tmp_path / "tests" / "outputs.json").read_text())["outputs"] == [
        "tests/junit.xml", "tests/tests_record.json"]
    # every case of the suite has a defect that must make it fail (checked in the next test)
    assert {_base(c.name) for c in record.cases} == set(DEFECT_FOR_CASE) | SPECULATING_ONLY
    assert any("feature:logprobs" in c.markers for c in record.cases)
    # the invariance case's counts travel through the JUnit properties into the judged rate
    assert (record.batch_divergent, record.batch_compared, record.batch_divergence_rate) == (0, 8, 0.0)


@pytest.mark.slow
def test_every_case_fails_against_its_defect(tmp_path):
    assert set(DEFECT_FOR_CASE.values()) == set(DEFECTS)  # no defect of the fake goes untested
    with FakeOpenAI(MODEL, KEY, defects=DEFECT_FOR_CASE) as fake:
        proc = run_suite(tmp_path, fake.base_url)
        asked = dict(fake.requests_by_case)
    assert proc.returncode == 1, proc.stdout[-3000:]
    record = TestsRecord.read(tmp_path / "tests" / "tests_record.json")
    assert not record.passed and record.status == "failed"
    not_failed = [(c.name, c.outcome) for c in record.cases
                  if c.outcome != "failed" and _base(c.name) not in SPECULATING_ONLY]
    assert not not_failed, f"cases that did not fail against their defect: {not_failed}"
    assert {_base(c.name) for c in record.cases} == set(DEFECT_FOR_CASE) | SPECULATING_ONLY
    assert all(asked.get(case) for case in DEFECT_FOR_CASE), asked
    assert "failing:" in record.detail
    assert record.batch_compared == 8 and record.batch_divergent >= 1  # counted even when the case fails


@pytest.mark.slow
def test_filters_and_listing(tmp_path):
    with FakeOpenAI(MODEL, KEY) as fake:
        auth = run_suite(tmp_path / "a", fake.base_url, {"markers": "auth"}, batch=1)
        run_suite(tmp_path / "b", fake.base_url, {"test_name": "seed"}, batch=1)  # judged below by its record
        listed = run_suite(tmp_path / "c", fake.base_url, {"list_tests": "true", "markers": "errors"})
        nothing = run_suite(tmp_path / "d", fake.base_url, {"test_name": "no_such_case_anywhere"}, batch=1)
        bad_marker = run_suite(tmp_path / "e", fake.base_url, {"markers": "no_such_marker("}, batch=1)
    assert auth.returncode == 0, auth.stdout[-2000:]
    names = {_base(c.name) for c in TestsRecord.read(tmp_path / "a" / "tests" / "tests_record.json").cases}
    assert names == {"test_missing_bearer_is_401", "test_invalid_bearer_is_401"}
    names = {_base(c.name) for c in TestsRecord.read(tmp_path / "b" / "tests" / "tests_record.json").cases}
    assert names == {"test_same_seed_same_text", "test_different_seeds_different_text"}
    assert listed.returncode == 0 and "test_unknown_model_is_404" in listed.stdout
    assert "test_seed" not in listed.stdout and not (tmp_path / "c" / "tests" / "tests_record.json").exists()
    assert nothing.returncode == 2 and "no case matches" in nothing.stderr
    assert bad_marker.returncode == 2


@pytest.mark.slow
def test_unsupported_features_are_skipped_with_reason(tmp_path):
    with FakeOpenAI(MODEL, api_key=None) as fake:
        proc = run_suite(tmp_path, fake.base_url, {"markers": "logprobs or auth or sampling"}, engine="media",
                         api_key=None, batch=1)
    assert proc.returncode == 0, proc.stdout[-3000:]
    cases = {_base(c.name): c for c in TestsRecord.read(tmp_path / "tests" / "tests_record.json").cases}
    assert cases["test_echo_prefixes_prompt"].outcome == "skipped"
    assert "does not support echo" in cases["test_echo_prefixes_prompt"].message
    assert cases["test_n_choices"].outcome == "skipped"
    assert cases["test_missing_bearer_is_401"].outcome == "skipped"
    assert "without auth" in cases["test_missing_bearer_is_401"].message
    assert cases["test_completion_logprobs_shape"].outcome == "skipped"
    assert cases["test_max_tokens"].outcome == "passed" and cases["test_stop_honoured"].outcome == "passed"


def test_record_round_trip_and_legend():
    rec = TestsRecord(model_id="m", cases=[])
    rec.summarise()
    assert rec.status == "failed" and rec.detail == "no cases ran"  # nothing ran is never a pass
    again = TestsRecord.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert again.to_dict() == rec.to_dict()
    assert "cases" in TestsRecord.legend()


def test_bad_input_exit_2(tmp_path):
    proc = run_suite(tmp_path, "")
    assert proc.returncode == 2


@pytest.mark.integration
@pytest.mark.slow
def test_suite_passes_on_the_real_cpu_server(real_cpu_server, tmp_path):
    """The whole suite against vLLM's CPU build serving SmolLM2 (auth enforced).

    Slow: 34 API cases against the real engine (about 35 s alone; the lossless one skips: no speculation); as
    the first test of the shared server's group it may also pay that server's start."""
    proc = run_suite(tmp_path, real_cpu_server.base_url, api_key=real_cpu_server.api_key,
                     model=real_cpu_server.served_model_name, timeout=1500)
    record_path = tmp_path / "tests" / "tests_record.json"
    assert record_path.is_file(), proc.stdout[-3000:] + proc.stderr[-2000:]
    record = TestsRecord.read(record_path)
    bad = [(c.name, c.outcome, c.message) for c in record.cases
           if c.outcome != "passed" and not (_base(c.name) in SPECULATING_ONLY and c.outcome == "skipped")]
    assert proc.returncode == 0 and not bad, bad


@pytest.mark.slow
def test_sigterm_keeps_the_cases_that_ran(tmp_path):
    """run.py stops a workflow with SIGTERM to its process group: the record keeps what ran."""
    import signal
    import time

    write_model_spec(tmp_path / "spec.json", model_id="fake", served_model_name=MODEL)
    env = dict(os.environ, PYTHONPATH=str(REPO), TT_SERVED_MODEL_NAME=MODEL, OPENAI_API_KEY=KEY)
    with FakeOpenAI(MODEL, KEY, delay_s=0.3) as fake:
        proc = subprocess.Popen([sys.executable, "-m", "server_tests.run_tests", "--run-dir",
                                 str(tmp_path), "--model-spec-json", str(tmp_path / "spec.json"),
                                 "--server-url", fake.base_url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env, start_new_session=True)
        deadline = time.monotonic() + 120
        while sum(fake.requests_by_case.values()) < 6 and time.monotonic() < deadline:
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, out[-3000:]
    record = TestsRecord.read(tmp_path / "tests" / "tests_record.json")
    assert not record.passed and record.detail.startswith("interrupted")
    assert 0 < record.counts["passed"] < len(DEFECT_FOR_CASE)


def test_the_cases_that_compare_two_answers_run_alone_then_the_rest_side_by_side(tmp_path):
    """Two phases: ``-m (filters) and (invariance or alone)`` one at a time, then the rest with pytest-xdist at the
    spec's batch (at most 4); their JUnit files merge into one with its totals; a smoke run's invariance case
    sends 4 prompts."""
    from server_tests.junit import merge, read_cases
    from server_tests.run_tests import ALONE, parallel_workers, phase_commands, suite_env

    def value(cmd: list[str], flag: str) -> str:   # the last occurrence: `python -m pytest` comes first
        return cmd[len(cmd) - cmd[::-1].index(flag)]

    (alone, alone_junit), (rest, rest_junit) = phase_commands(tmp_path, "sampling", "seed", 4)
    assert value(alone, "-m") == f"(sampling) and ({ALONE})" and "-n" not in alone
    assert value(rest, "-m") == f"(sampling) and not ({ALONE})" and rest[-2:] == ["-n", "4"]
    assert value(alone, "-k") == value(rest, "-k") == "seed"
    assert "-n" not in phase_commands(tmp_path, None, None, 1)[1][0]
    spec = model_spec(CPU_SPEC_ID)
    assert parallel_workers(spec) == min(4, spec.device_model_spec.max_concurrency)
    assert suite_env("http://h:1", "m", spec, "smoke")["TT_TEST_INVARIANCE_PROMPTS"] == "4"
    assert "TT_TEST_INVARIANCE_PROMPTS" not in suite_env("http://h:1", "m", spec, "ci")
    alone_junit.write_text('<testsuites><testsuite name="pytest"><testcase classname="test_a" name="test_x" '
                           'time="1.5"><failure message="boom"/></testcase></testsuite></testsuites>')
    rest_junit.write_text('<testsuites><testsuite name="pytest"><testcase classname="test_b" name="test_y" '
                          'time="0.5"/><testcase classname="test_b" name="test_z" time="0.25"><skipped message="no"/>'
                          '</testcase></testsuite></testsuites>')
    assert merge([alone_junit, rest_junit], tmp_path / "junit.xml", suite_name="api_conformance") == 3
    cases = read_cases(tmp_path / "junit.xml")
    assert [(c.name, c.outcome) for c in cases] == [("test_a.py::test_x", "failed"), ("test_b.py::test_y", "passed"),
                                                    ("test_b.py::test_z", "skipped")]
    suite = (tmp_path / "junit.xml").read_text()
    assert 'tests="3" failures="1" errors="0" skipped="1" time="2.250"' in suite
