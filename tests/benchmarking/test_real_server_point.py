"""One tiny point against the real vLLM CPU server (the session's shared server, auth enforced).

Named to sort after test_bench_timing.py: the timing certification must run before the shared
server starts and takes CPU time on this 2-core class.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from contracts import REPO_ROOT
from tests.helpers import model_spec

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_tiny_point_on_real_server(real_cpu_server, tmp_path):
    server, MODEL_DIR = real_cpu_server.base_url, str(real_cpu_server.model_dir)
    spec = model_spec(model_id="smollm2", device_model_spec={"max_context": 2048, "max_concurrency": 2,
                                                              "perf_reference": []}).to_dict()
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TT_SERVED_MODEL_NAME="SmolLM2-135M-Instruct",
               TT_TOKENIZER_DIR=MODEL_DIR)
    env["OPENAI_API_KEY"] = real_cpu_server.api_key
    p = subprocess.run([sys.executable, "-m", "benchmarking.run_benchmarks", "--run-dir",
                        str(tmp_path), "--model-spec-json", str(tmp_path / "spec.json"), "--server-url", server,
                        "--workflow-args-json", json.dumps({"points": "64x8x2x4"})],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    rec = json.loads((tmp_path / "benchmarks" / "point_isl-64_osl-8_con-2_n-4.json").read_text())
    m = rec["metrics"]
    assert m["completed"] == 4 and m["output_token_source"] == "usage"
    assert m["total_output_tokens"] == 32 and m["output_length_mismatches"] == 0    # ignore_eos + min_tokens
    assert m["input_token_drift"] == 0 and rec["prompt_check"]["exact"] == 4       # prompts survived tokenization
    assert rec["server_metrics"] and any("generation_tokens" in k for k in rec["server_metrics"]["delta"])
