"""One tiny point against a real vLLM CPU server (started once for this module)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from conftest import REPO, wait_http

VLLM_PY = os.environ.get("TT_TEST_VLLM_PYTHON", "/tmp/exp/eng/bin/python")
MODEL_DIR = os.environ.get("TT_TEST_MODEL_DIR", "/tmp/exp/smollm2")
pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(not (os.path.exists(VLLM_PY) and os.path.exists(os.path.join(MODEL_DIR, "config.json"))),
                                 reason="no vLLM CPU engine / model on this machine")]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(tmp_path_factory.mktemp("srv") / "server.log", "w")
    env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1")
    proc = subprocess.Popen([VLLM_PY, "-m", "vllm.entrypoints.openai.api_server", "--model", MODEL_DIR,
                             "--served-model-name", "SmolLM2-135M-Instruct", "--host", "127.0.0.1", "--port", str(port),
                             "--dtype", "float32", "--enforce-eager", "--max-model-len", "2048"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        if not wait_http(f"http://127.0.0.1:{port}/health", 300):
            pytest.skip("vLLM CPU server did not become healthy")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_tiny_point_on_real_server(server, tmp_path):
    spec = {"model_id": "smollm2", "hf_model_repo": "HuggingFaceTB/SmolLM2-135M-Instruct",
            "device_model_spec": {"max_context": 2048, "max_concurrency": 2, "perf_reference": []}}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    env = dict(os.environ, PYTHONPATH=REPO, TT_SERVED_MODEL_NAME="SmolLM2-135M-Instruct", TT_TOKENIZER_DIR=MODEL_DIR)
    env.pop("OPENAI_API_KEY", None)
    p = subprocess.run([sys.executable, os.path.join(REPO, "benchmarking", "run_benchmarks.py"), "--run-dir",
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
