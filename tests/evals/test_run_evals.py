"""run_evals.py without a server: the lm-eval worker is replaced by a fake that writes real result files.

Covers the skip-finished behaviour, the up-front loglikelihood refusal, error isolation (one
task's failure does not stop the others), no task started once the server is gone, outputs.json,
exit codes and bad input. Real lm-eval runs in test_worker_faults.py and test_integration.py.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from evals import run_evals
from evals.eval_config import EVAL_CONFIGS, EvalConfig
from evals.lm_eval_command import TokenizerChoice
from evals.diagnosis import summarize_failure
from evals.lm_eval_session import TaskOutcome
from records.evals import EvalRecord

FIXTURES = Path(__file__).resolve().parent / "fixtures"


class FakeLmEval:
    """FAKE lm-eval worker (LmEvalSessions' interface): copies the committed results fixture for the task."""

    def __init__(self, fail: dict[str, str] | None = None):
        self.calls: list[list[str]] = []
        self.fail = fail or {}
        self.import_s: list[float] = []
        self.closed = 0
        self.after_task = None  # called with the task name once it has run
        self.items_differ: dict[str, int] = {}  # task -> how many first items the "server" scores unlike in-process

    def run(self, task, args, cwd, env, log_path, deadline_s, builtin_tasks=True):
        self.calls.append(args)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            if task in self.fail:
                log_path.write_text(self.fail[task])
                return TaskOutcome(1, 0.1)
            out = Path(args[args.index("--output_path") + 1]) / "SmolLM2-135M-Instruct"
            out.mkdir(parents=True, exist_ok=True)
            shutil.copy(FIXTURES / f"results_{task}.json", out / "results_2026-11-22T00-00-00.json")
            (out / f"samples_{task}_2026-11-22T00-00-00.jsonl").write_text(self.samples(task, args))
            log_path.write_text("ok\n")
            return TaskOutcome(0, 0.1)
        finally:
            if self.after_task:
                self.after_task(task)

    def samples(self, task: str, args: list[str]) -> str:
        """lm-eval's per-item log for the first ``--limit`` items: each item scored as the in-process
        reference scored it (``items_differ`` flips the first n), in lm-eval's layout."""
        score = EVAL_CONFIGS["SmolLM2-135M-Instruct"].task(task).score
        metric, _, flt = score.metric_keys[0].partition(",")
        items = list(score.in_process_scores["full"].items)
        limit = int(args[args.index("--limit") + 1]) if "--limit" in args else len(items)
        flip = self.items_differ.get(task, 0)
        rows = [{"doc_id": i, "filter": flt, metric: (1.0 - v) if i < flip else v}
                for i, v in enumerate(items[:limit])]
        return "".join(json.dumps(r) + "\n" for r in rows)

    def close(self):
        self.closed += 1

    def tasks_run(self):
        return [a[a.index("--tasks") + 1] for a in self.calls]


@pytest.fixture
def fake(monkeypatch):
    fake = FakeLmEval()
    monkeypatch.setattr(run_evals, "LmEvalSessions", lambda *a, **k: fake)
    monkeypatch.setattr(run_evals, "preflight", lambda *a, **k: None)
    monkeypatch.setattr(run_evals, "choose_tokenizer", lambda *a, **k: TokenizerChoice("remote", "fake"))
    monkeypatch.setenv("OPENAI_API_KEY", "bearer-xyz")
    return fake


def _main(tmp_path, spec_path, wf=None):
    return run_evals.main(
        [
            "--run-dir",
            str(tmp_path),
            "--model-spec-json",
            str(spec_path),
            "--server-url",
            "http://127.0.0.1:9",
            "--workflow-args-json",
            json.dumps(wf or {"mode": "smoke"}),
        ]
    )


def _record(tmp_path, task) -> EvalRecord:
    return EvalRecord.read(tmp_path / "evals" / task / "eval_record.json")


def test_smoke_run_writes_records_and_outputs(tmp_path, fake, smollm_spec, write_spec, capsys):
    assert _main(tmp_path, write_spec(smollm_spec)) == 0
    assert fake.tasks_run() == ["tt_offline_mc", "tt_offline_qa", "tt_offline_chat"]
    rec = _record(tmp_path, "tt_offline_mc")
    # The fake scores 0.68 on 25 items: the interval holds the target, so the samples cannot decide.
    assert (rec.status, rec.value, rec.samples, rec.mode, rec.passed) == ("inconclusive", 0.68, 25, "smoke", None)
    assert rec.decision == "inconclusive" and rec.ci95[0] < rec.target < rec.ci95[1]
    assert rec.lm_eval_command.startswith(run_evals.sys.executable + " -m lm_eval run --model local-completions")
    assert fake.calls[0][:2] == ["run", "--model"]  # the worker gets the same command, minus `python -m lm_eval`
    assert fake.closed == 1  # the worker is stopped at the end
    assert "bearer-xyz" not in rec.lm_eval_command
    assert rec.results_file.startswith("evals/tt_offline_mc/lm_eval/")
    outputs = json.loads((tmp_path / "evals" / "outputs.json").read_text())["outputs"]
    assert "evals/tt_offline_chat/eval_record.json" in outputs and any("samples_" in o for o in outputs)
    assert all(not o.startswith("/") for o in outputs)
    table = capsys.readouterr().out
    assert "tt_offline_qa" in table and "INCONCLUSIVE" in table and "no task failed" in table


def test_rerun_skips_finished_tasks_and_retries_errors(tmp_path, fake, smollm_spec, write_spec, capsys):
    spec = write_spec(smollm_spec)
    fake.fail = {"tt_offline_qa": "Traceback ...\nRuntimeError: server went away\n"}
    assert _main(tmp_path, spec) == 1
    assert _record(tmp_path, "tt_offline_qa").status == "error"
    assert "RuntimeError: server went away" in _record(tmp_path, "tt_offline_qa").error
    assert _record(tmp_path, "tt_offline_chat").status == "inconclusive"  # the failure did not stop the run
    assert (tmp_path / "evals" / "tt_offline_qa" / "lm_eval.log").exists()  # what it logged is kept

    fake.calls.clear()
    fake.fail = {}
    assert _main(tmp_path, spec) == 0
    assert fake.tasks_run() == ["tt_offline_qa"]  # only the errored one runs again
    assert "already finished" in capsys.readouterr().out

    fake.calls.clear()
    _main(tmp_path, spec, {"mode": "ci"})  # another mode is another sample set: everything reruns
    assert sorted(set(fake.tasks_run())) == ["tt_offline_chat", "tt_offline_mc", "tt_offline_qa"]
    mc = _record(tmp_path, "tt_offline_mc")
    assert mc.mode == "ci" and mc.stopped == "decided" and mc.looks == fake.tasks_run().count("tt_offline_mc")
    limits = [int(a[a.index("--limit") + 1]) for a in fake.calls if a[a.index("--tasks") + 1] == "tt_offline_mc"]
    assert limits == [24 * (i + 1) for i in range(mc.looks)] and limits[-1] < 120  # decided before the last item


def test_failed_accuracy_counts_as_finished_and_exits_1(tmp_path, fake, smollm_spec, write_spec, monkeypatch):
    cfg = EVAL_CONFIGS["SmolLM2-135M-Instruct"]
    task = cfg.task("tt_offline_mc")
    strict = replace(task.score, reference_score=0.99, mode_reference_scores={"smoke": 0.99}, tolerance=0.0)
    monkeypatch.setitem(
        EVAL_CONFIGS, cfg.model_name, EvalConfig(cfg.model_name, cfg.hf_model_repo, (replace(task, score=strict),))
    )
    spec = write_spec(smollm_spec)
    assert _main(tmp_path, spec, {"mode": "ci"}) == 1
    rec = _record(tmp_path, "tt_offline_mc")
    assert (rec.status, rec.passed, rec.reference_score) == ("failed", False, 0.99)
    assert rec.stopped == "decided" and rec.ci95[1] < 0.99 and rec.items_total == 120
    fake.calls.clear()
    assert _main(tmp_path, spec, {"mode": "ci"}) == 1 and fake.calls == []  # finished (failed) is not rerun


def test_served_items_unlike_in_process_fail_the_paired_serving_check(tmp_path, fake, smollm_spec, write_spec):
    fake.items_differ = {"tt_offline_chat": 40}  # a chat-template bug: the first 40 items score otherwise
    assert _main(tmp_path, write_spec(smollm_spec), {"mode": "ci", "tasks": "tt_offline_chat"}) == 1
    rec = _record(tmp_path, "tt_offline_chat")
    assert (rec.status, rec.serving_decision, rec.stopped) == ("failed", "fail", "decided")
    assert rec.looks == 1 and rec.disagreements == 24 and rec.disagreement_ci95[0] > rec.max_disagreement
    assert "chat template" in rec.serving_detail


@pytest.mark.parametrize("override", [{"engine": "media"}])
def test_loglikelihood_refused_up_front(tmp_path, fake, smollm_spec, write_spec, override):
    assert _main(tmp_path, write_spec({**smollm_spec, **override})) == 1
    assert "tt_offline_mc" not in fake.tasks_run()  # lm-eval never started for it
    assert fake.tasks_run() == ["tt_offline_qa", "tt_offline_chat"]  # generation still runs
    rec = _record(tmp_path, "tt_offline_mc")
    assert rec.status == "error" and rec.value is None
    assert rec.error.startswith("refused: tt_offline_mc needs loglikelihood")


def test_preflight_failure_errors_every_task_quickly(tmp_path, fake, smollm_spec, write_spec, monkeypatch):
    monkeypatch.setattr(run_evals, "preflight", lambda *a, **k: "cannot connect to http://x: refused")
    assert _main(tmp_path, write_spec(smollm_spec)) == 1
    assert fake.calls == []
    for task in ("tt_offline_mc", "tt_offline_qa", "tt_offline_chat"):
        rec = _record(tmp_path, task)
        assert rec.status == "error" and rec.error == "not run: cannot connect to http://x: refused"


def test_server_gone_during_a_task_stops_the_run(tmp_path, fake, smollm_spec, write_spec, monkeypatch, capsys):
    """The server dies during the first task: its summary says it cannot connect, no further task starts."""
    checks = []
    server_up = [True]

    def check(*_a, **_k):
        checks.append(server_up[0])
        return None if server_up[0] else "cannot connect to http://127.0.0.1:9: [Errno 111] Connection refused"

    monkeypatch.setattr(run_evals, "preflight", check)
    fake.fail = {"tt_offline_mc": "Traceback ...\nRuntimeError: Session is closed\n"}
    fake.after_task = lambda task: server_up.__setitem__(0, False)
    assert _main(tmp_path, write_spec(smollm_spec)) == 1
    assert fake.tasks_run() == ["tt_offline_mc"]  # nothing launched against the dead server
    mc = _record(tmp_path, "tt_offline_mc")
    assert mc.error.startswith("cannot connect to http://127.0.0.1:9") and "Session is closed" not in mc.error
    assert "during task tt_offline_mc" in mc.error
    for task in ("tt_offline_qa", "tt_offline_chat"):
        assert _record(tmp_path, task).error.startswith("not run: cannot connect to http://127.0.0.1:9")
    out = capsys.readouterr().out
    assert "Traceback" not in out and "Session is closed" not in out  # lm-eval's output stays in its log
    assert checks == [True, False]  # checked before the task and once after it failed, then never again


def test_server_still_up_after_a_failure_keeps_going(tmp_path, fake, smollm_spec, write_spec):
    fake.fail = {"tt_offline_mc": "API request failed! Status code: 500, Response text: boom\n"
                                  "aiohttp.client_exceptions.ClientResponseError: 500, "
                                  "message='Internal Server Error'\n"}
    assert _main(tmp_path, write_spec(smollm_spec)) == 1
    assert fake.tasks_run() == ["tt_offline_mc", "tt_offline_qa", "tt_offline_chat"]
    assert _record(tmp_path, "tt_offline_mc").error == (
        "server answered HTTP 500 to lm-eval's /v1/completions requests; "
        "task tt_offline_mc gave up after 3 attempts per request")


def test_sigint_keeps_finished_records_and_exits_130(tmp_path, fake, smollm_spec, write_spec):
    def interrupt(task):
        if task == "tt_offline_qa":
            raise KeyboardInterrupt

    fake.after_task = interrupt
    assert _main(tmp_path, write_spec(smollm_spec)) == 130
    assert _record(tmp_path, "tt_offline_mc").status == "inconclusive"  # scored: kept
    assert _record(tmp_path, "tt_offline_qa").error.startswith("interrupted by SIGINT")
    assert not (tmp_path / "evals" / "tt_offline_chat" / "eval_record.json").exists()
    assert fake.closed == 1


def test_missing_dataset_is_one_line_naming_it():
    task = EVAL_CONFIGS["Llama-3.1-8B-Instruct"].task("gsm8k_cot_llama")
    text = (FIXTURES / "lm_eval_gsm8k_offline.log").read_text()  # real lm-eval 0.4.13 output
    msg = summarize_failure(task, text, 1, offline=True, endpoint="http://127.0.0.1:8000/v1/completions")
    assert (
        msg
        == "dataset openai/gsm8k cannot be reached (HF hub offline: HF_DATASETS_OFFLINE=1); "
           "task gsm8k_cot_llama not run"
    )
    assert "\n" not in msg


@pytest.mark.parametrize(
    "wf, spec_patch",
    [({"mode": "turbo"}, {}), ({"mdoe": "smoke"}, {}), ({"batch_size": "four"}, {}), ({"tasks": "nope"}, {}),
         ({}, {"model_name": "NoSuchModel"})],
)
def test_bad_input_exits_2(tmp_path, fake, smollm_spec, write_spec, wf, spec_patch):
    assert _main(tmp_path, write_spec({**smollm_spec, **spec_patch}), wf) == 2
    assert fake.calls == []


def test_tasks_and_limit_args(tmp_path, fake, smollm_spec, write_spec):
    assert _main(tmp_path, write_spec(smollm_spec), {"mode": "smoke", "tasks": "tt_offline_qa", "limit": "5"}) == 0
    argv = fake.calls[0]
    assert fake.tasks_run() == ["tt_offline_qa"] and argv[argv.index("--limit") + 1] == "5"


def test_earlier_logs_are_kept(tmp_path):
    log_path = tmp_path / "t" / "lm_eval.log"
    run_evals.fresh_log(log_path).write_text("first attempt\n")
    run_evals.fresh_log(log_path).write_text("second\n")
    assert log_path.read_text() == "second\n"
    assert (tmp_path / "t" / "lm_eval.1.log").read_text() == "first attempt\n"  # first attempt kept


def test_scrub_secret(tmp_path):
    (tmp_path / "m").mkdir()
    f = tmp_path / "m" / "results_x.json"
    f.write_text('{"config": {"model_args": "auth_token=tok-123"}}')
    log_file = tmp_path / "lm_eval.log"
    log_file.write_text("model_args auth_token=tok-123\n")
    run_evals.scrub_secret(tmp_path, "tok-123")
    assert "tok-123" not in f.read_text() and "auth_token=***" in log_file.read_text()


def test_a_task_past_its_deadline_says_so(tmp_path, fake, smollm_spec, write_spec, monkeypatch):
    def hung(task, args, cwd, env, log_path, deadline_s, builtin_tasks=True):
        fake.calls.append(args)
        log_path.write_text("API request failed! Status code: 500\n")  # an earlier hiccup must not be blamed
        return TaskOutcome(-9, deadline_s, timed_out=True)

    monkeypatch.setattr(fake, "run", hung)
    assert _main(tmp_path, write_spec(smollm_spec), {"mode": "smoke", "tasks": "tt_offline_qa"}) == 1
    assert _record(tmp_path, "tt_offline_qa").error == (
        "lm-eval did not finish task tt_offline_qa within its 900 s deadline (mode smoke); stopped")


def test_known_issues_waive_a_task_for_the_exit_code_only():
    from evals.run_evals import waived_tasks

    from tests.helpers import model_spec

    spec = model_spec(known_issues=[{"workflow": "evals", "task": "tt_offline_mc", "reason": "no loglikelihood"},
                                    {"workflow": "evals", "task": "gsm8k", "reason": ""},
                                    {"workflow": "benchmarks", "task": "x", "reason": "other workflow"}])
    assert waived_tasks(spec) == {"tt_offline_mc": "no loglikelihood"}
    assert waived_tasks(model_spec(known_issues=[])) == {}


def test_keys_evals_does_not_own_reach_lm_eval(tmp_path, fake, smollm_spec, write_spec):
    """The documented ``batch_size=4 max_tokens=512``: lm-eval's batch size and a generation kwarg."""
    wf = {"mode": "smoke", "tasks": "tt_offline_qa", "batch_size": "4", "max_tokens": "512", "num_concurrent": "2"}
    assert _main(tmp_path, write_spec(smollm_spec), wf) == 0
    argv = fake.calls[0]
    assert argv[argv.index("--batch_size") + 1] == "4"
    assert "max_tokens=512" in argv[argv.index("--gen_kwargs") + 1].split(",")
    assert "num_concurrent=2" in argv[argv.index("--model_args") + 1].split(",")
    assert "--batch_size 4" in _record(tmp_path, "tt_offline_qa").lm_eval_command
    # a re-run with other lm-eval settings measures again instead of reusing the finished task
    fake.calls.clear()
    assert _main(tmp_path, write_spec(smollm_spec), {**wf, "max_tokens": "64"}) == 0
    assert fake.tasks_run() == ["tt_offline_qa"]
    fake.calls.clear()
    assert _main(tmp_path, write_spec(smollm_spec), {**wf, "max_tokens": "64"}) == 0
    assert fake.calls == []
