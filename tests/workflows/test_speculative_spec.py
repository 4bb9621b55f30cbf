"""A spec that speculates: the catalog's n-gram SmolLM2 variant, its vLLM arguments on the command line, and
'{"speculative_config": null}' laid over it (--baseline-vllm-args, --vllm-override-args) removing speculation."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

from contracts import REPO_ROOT
from workflows.catalog import load_catalog
from workflows.cli import parse_args, resolve_spec

CATALOG = load_catalog()
SPEC_ID = "id_vllm-cpu-ngram_SmolLM2-135M-Instruct_cpu"
ARGV = ("--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--impl", "vllm-cpu-ngram", "--workflow",
        "benchmarks", "--local-server")


def _to_cli_args():
    path = REPO_ROOT / "vllm-tt-metal" / "src" / "run_vllm_api_server.py"
    spec = importlib.util.spec_from_file_location("run_vllm_api_server_for_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.to_cli_args


def test_the_catalog_has_an_ngram_variant_whose_config_reaches_vllm_as_json() -> None:
    spec = CATALOG.specs[SPEC_ID]
    args = spec.device_model_spec.vllm_args
    assert args["speculative_config"] == {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3,
                                          "prompt_lookup_min": 2}
    assert not spec.device_model_spec.default_impl  # the plain vllm-cpu spec stays the CPU default
    argv = _to_cli_args()(args)
    at = argv.index("--speculative-config")
    assert json.loads(argv[at + 1])["method"] == "ngram" and "--gpu-memory-utilization" in argv


def test_vllm_override_args_null_removes_speculation() -> None:
    options = parse_args([*ARGV, "--vllm-override-args", '{"speculative_config": null}'], CATALOG)
    spec = resolve_spec(options, CATALOG)
    assert "speculative_config" not in spec.device_model_spec.vllm_args
    plain = resolve_spec(parse_args(["--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow",
                                     "benchmarks", "--vllm-override-args",
                                     '{"speculative_config": {"method": "ngram", "num_speculative_tokens": 2}}'],
                                    CATALOG), CATALOG)
    assert plain.device_model_spec.vllm_args["speculative_config"]["num_speculative_tokens"] == 2


def test_the_baseline_server_is_the_same_spec_without_speculation(tmp_path: Path) -> None:
    from workflows.ab_servers import baseline_launch
    from workflows.servers.base import ServerLaunch

    options = parse_args([*ARGV, "--baseline-vllm-args", '{"speculative_config": null, "max_num_seqs": "2"}'],
                         CATALOG)
    spec = resolve_spec(options, CATALOG)
    ctx = SimpleNamespace(options=options, spec=spec, run_dir=SimpleNamespace(path=tmp_path))
    own = ServerLaunch(spec=spec, spec_json_path=tmp_path / "spec.json", run_dir=tmp_path, service_port=8000)
    launch = baseline_launch(ctx, own)
    args = launch.spec.device_model_spec.vllm_args
    assert "speculative_config" not in args and args["max_num_seqs"] == "2" and args["port"] != "8000"
    written = json.loads((tmp_path / "baseline_server" / "model_spec.json").read_text())
    assert "speculative_config" not in written["device_model_spec"]["vllm_args"]
    assert "speculative_config" in spec.device_model_spec.vllm_args  # the run's own spec keeps it
