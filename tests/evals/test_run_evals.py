"""run_evals.py without a server: lm-eval is replaced by a fake that writes real result files.

Covers the skip-finished behaviour, the up-front loglikelihood refusal, error isolation (one
task's failure does not stop the others), outputs.json, exit codes and bad input.
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
from evals.records import EvalRecord

FIXTURES = Path(__file__).resolve().parent / "fixtures"


class FakeLmEval:
    """Stands in for `python -m lm_eval`: copies the committed results fixture for the task."""

    def __init__(self, fail: dict[str, str] | None = None):
        self.calls: list[list[str]] = []
        self.fail = fail or {}

    def __call__(self, argv, cwd, env, log_path, secret=None):
        self.calls.append(argv)
        task = argv[argv.index("--tasks") + 1]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        if task in self.fail:
            log_path.write_text(self.fail[task])
            return 1, self.fail[task]
        out = Path(argv[argv.index("--output_path") + 1]) / "SmolLM2-135M-Instruct"
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / f"results_{task}.json", out / "results_2026-11-22T00-00-00.json")
        (out / f"samples_{task}_2026-11-22T00-00-00.jsonl").write_text("{}\n")
        log_path.write_text("ok\n")
        return 0, "ok\n"

    def tasks_run(self):
        return [a[a.index("--tasks") + 1] for a in self.calls]


@pytest.fixture
def fake(monkeypatch):
    fake = FakeLmEval()
    monkeypatch.setattr(run_evals, "run_logged", fake)
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
    assert (rec.status, rec.value, rec.samples, rec.mode, rec.passed) == ("passed", 0.68, 25, "smoke", True)
    assert rec.lm_eval_command.startswith(run_evals.sys.executable + " -m lm_eval run --model local-completions")
    assert "bearer-xyz" not in rec.lm_eval_command
    assert rec.results_file.startswith("evals/tt_offline_mc/lm_eval/")
    outputs = json.loads((tmp_path / "evals" / "outputs.json").read_text())["outputs"]
    assert "evals/tt_offline_chat/eval_record.json" in outputs and any("samples_" in o for o in outputs)
    assert all(not o.startswith("/") for o in outputs)
    table = capsys.readouterr().out
    assert "tt_offline_qa" in table and "PASSED" in table


def test_rerun_skips_finished_tasks_and_retries_errors(tmp_path, fake, smollm_spec, write_spec, capsys):
    spec = write_spec(smollm_spec)
    fake.fail = {"tt_offline_qa": "Traceback ...\nRuntimeError: server went away\n"}
    assert _main(tmp_path, spec) == 1
    assert _record(tmp_path, "tt_offline_qa").status == "error"
    assert "RuntimeError: server went away" in _record(tmp_path, "tt_offline_qa").error
    assert _record(tmp_path, "tt_offline_chat").status == "passed"  # the failure did not stop the run
    assert (tmp_path / "evals" / "tt_offline_qa" / "lm_eval.log").exists()  # what it logged is kept

    fake.calls.clear()
    fake.fail = {}
    assert _main(tmp_path, spec) == 0
    assert fake.tasks_run() == ["tt_offline_qa"]  # only the errored one runs again
    assert "already finished" in capsys.readouterr().out

    fake.calls.clear()
    _main(tmp_path, spec, {"mode": "ci"})  # another mode is another sample set: everything reruns
    assert len(fake.calls) == 3
    assert _record(tmp_path, "tt_offline_mc").mode == "ci"


def test_failed_accuracy_counts_as_finished_and_exits_1(tmp_path, fake, smollm_spec, write_spec, monkeypatch):
    cfg = EVAL_CONFIGS["SmolLM2-135M-Instruct"]
    task = cfg.task("tt_offline_mc")
    strict = replace(task.score, mode_reference_scores={"smoke": 0.99})
    monkeypatch.setitem(
        EVAL_CONFIGS, cfg.model_name, EvalConfig(cfg.model_name, cfg.hf_model_repo, (replace(task, score=strict),))
    )
    spec = write_spec(smollm_spec)
    assert _main(tmp_path, spec) == 1
    rec = _record(tmp_path, "tt_offline_mc")
    assert (rec.status, rec.passed, rec.reference_score) == ("failed", False, 0.99)
    fake.calls.clear()
    assert _main(tmp_path, spec) == 1 and fake.calls == []  # finished (failed) is not rerun


@pytest.mark.parametrize("override", [{"engine": "llamacpp"}, {"engine": "vllm", "supports_loglikelihood": False}])
def test_loglikelihood_refused_up_front(tmp_path, fake, smollm_spec, write_spec, override):
    assert _main(tmp_path, write_spec({**smollm_spec, **override})) == 1
    assert "tt_offline_mc" not in fake.tasks_run()  # lm-eval never started for it
    assert fake.tasks_run() == ["tt_offline_qa", "tt_offline_chat"]  # generation still runs
    rec = _record(tmp_path, "tt_offline_mc")
    assert rec.status == "error" and rec.value is None
    assert rec.error.startswith("refused: tt_offline_mc needs loglikelihood")


def test_preflight_failure_errors_every_task_quickly(tmp_path, fake, smollm_spec, write_spec, monkeypatch):
    monkeypatch.setattr(run_evals, "preflight", lambda *a, **k: "server not answering at http://x: refused")
    assert _main(tmp_path, write_spec(smollm_spec)) == 1
    assert fake.calls == []
    assert all(_record(tmp_path, t).status == "error" for t in ("tt_offline_mc", "tt_offline_qa"))


def test_missing_dataset_is_one_line_naming_it():
    task = EVAL_CONFIGS["Llama-3.1-8B-Instruct"].task("gsm8k_cot_llama")
    text = (FIXTURES / "lm_eval_gsm8k_offline.log").read_text()  # real lm-eval 0.4.13 output
    msg = run_evals.one_line_error(task, text, 1, offline=True)
    assert (
        msg
        == "dataset openai/gsm8k cannot be reached (HF hub offline: HF_DATASETS_OFFLINE=1); task gsm8k_cot_llama not run"
    )
    assert "\n" not in msg


@pytest.mark.parametrize(
    "wf, spec_patch",
    [({"mode": "turbo"}, {}), ({"bogus": "1"}, {}), ({"tasks": "nope"}, {}), ({}, {"model_name": "NoSuchModel"})],
)
def test_bad_input_exits_2(tmp_path, fake, smollm_spec, write_spec, wf, spec_patch):
    assert _main(tmp_path, write_spec({**smollm_spec, **spec_patch}), wf) == 2
    assert fake.calls == []


def test_tasks_and_limit_args(tmp_path, fake, smollm_spec, write_spec):
    assert _main(tmp_path, write_spec(smollm_spec), {"mode": "smoke", "tasks": "tt_offline_qa", "limit": "5"}) == 0
    argv = fake.calls[0]
    assert fake.tasks_run() == ["tt_offline_qa"] and argv[argv.index("--limit") + 1] == "5"


def test_run_logged_keeps_earlier_logs_and_redacts(tmp_path):
    log_path = tmp_path / "t" / "lm_eval.log"
    code = "import sys; print('model_args auth_token=tok-123'); sys.exit(3)"
    rc, text = run_evals.run_logged([run_evals.sys.executable, "-c", code], tmp_path, {}, log_path, "tok-123")
    assert rc == 3 and "tok-123" not in text and "auth_token=***" in text
    run_evals.run_logged([run_evals.sys.executable, "-c", "print('second')"], tmp_path, {}, log_path)
    assert "second" in log_path.read_text()
    assert "auth_token=***" in (tmp_path / "t" / "lm_eval.1.log").read_text()  # first attempt kept


def test_scrub_secret(tmp_path):
    (tmp_path / "m").mkdir()
    f = tmp_path / "m" / "results_x.json"
    f.write_text('{"config": {"model_args": "auth_token=tok-123"}}')
    run_evals.scrub_secret(tmp_path, "tok-123")
    assert "tok-123" not in f.read_text()
