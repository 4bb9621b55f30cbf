"""run.py's argument parsing, validation errors (exact messages) and spec resolution."""

from __future__ import annotations

import dataclasses
import json

import pytest

from contracts.model_spec import DeviceType
from contracts.workflow_args import NOT_YET_AVAILABLE, WorkflowType
from workflows.catalog import load_catalog
from workflows.cli import RunOptions, ServerMode, UsageError, parse_args, resolve_spec

CATALOG = load_catalog()


def parse(*argv: str):
    return parse_args(list(argv), CATALOG)


def error_of(*argv: str) -> str:
    with pytest.raises(UsageError) as info:
        args = parse(*argv)
        resolve_spec(args, CATALOG)
    return str(info.value)


def test_defaults_are_typed_and_frozen() -> None:
    args = parse("--model", "SmolLM2-135M-Instruct", "--workflow", "benchmarks", "--device", "cpu")
    assert isinstance(args, RunOptions)
    assert args.workflow is WorkflowType.BENCHMARKS and args.device is DeviceType.CPU
    assert args.service_port == 8000
    assert args.server_mode is ServerMode.EXTERNAL and args.server_url is None
    assert args.device_ids is None and args.workflow_args == {}
    assert args.override_tt_config is None and args.vllm_override_args is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        args.service_port = 1  # type: ignore[misc]


def test_server_modes_and_flag_record() -> None:
    base = ("--model", "SmolLM2-135M-Instruct", "--workflow", "benchmarks", "--device", "cpu")
    assert parse(*base, "--local-server").server_mode is ServerMode.LOCAL
    assert parse(*base, "--docker-server").server_mode is ServerMode.DOCKER
    record = parse(*base, "--local-server", "--workflow-args", "mode=smoke").record()
    # cli_args.json holds the flags as typed, so a report can print the command back
    assert record["local_server"] is True and record["workflow_args"] == "mode=smoke"
    assert record["model"] == "SmolLM2-135M-Instruct" and "list" not in record


def test_ignore_verdict_from_workflow_args() -> None:
    base = ("--model", "SmolLM2-135M-Instruct", "--workflow", "release", "--device", "cpu")
    assert not parse(*base).ignore_verdict
    assert parse(*base, "--workflow-args", "ignore_verdict=true").ignore_verdict
    assert parse(*base, "--ignore-verdict").ignore_verdict


def test_fresh_server_is_for_a_local_server_only() -> None:
    base = ("--model", "SmolLM2-135M-Instruct", "--workflow", "release", "--device", "cpu")
    assert parse(*base, "--local-server", "--fresh-server").fresh_server
    assert not parse(*base, "--local-server").fresh_server
    with pytest.raises(UsageError, match="--fresh-server applies to --local-server only"):
        parse(*base, "--docker-server", "--fresh-server")


def test_list_options() -> None:
    assert parse("--list").list_catalog and parse("--list").list_format == "table"
    assert parse("--list", "--format", "json").list_format == "json"
    with pytest.raises(UsageError, match="unknown --format 'xml'; valid: table, json"):
        parse("--list", "--format", "xml")


def test_service_port_from_env(monkeypatch) -> None:
    monkeypatch.setenv("SERVICE_PORT", "8123")
    from workflows.cli import build_parser

    assert build_parser().parse_args([]).service_port == "8123"


def test_model_typo_suggests() -> None:
    assert error_of("--model", "SmolLM2-135M-Instruc", "--workflow", "benchmarks", "--device", "cpu") == \
        "unknown --model 'SmolLM2-135M-Instruc'; did you mean 'SmolLM2-135M-Instruct'?"


def test_workflow_and_device_typos() -> None:
    assert error_of("--model", "SmolLM2-135M-Instruct", "--workflow", "benchmark", "--device", "cpu") == \
        "unknown --workflow 'benchmark'; did you mean 'benchmarks'?"
    assert error_of("--model", "SmolLM2-135M-Instruct", "--workflow", "evals", "--device", "n15") == \
        "unknown --device 'n15'; did you mean 'n150'?"


def test_unsupported_device_names_supported_ones() -> None:
    assert error_of("--model", "SmolLM2-135M-Instruct", "--workflow", "evals", "--device", "n150") == \
        "model 'SmolLM2-135M-Instruct' does not support device 'n150'; supported devices: cpu"
    message = error_of("--model", "Llama-3.1-8B-Instruct", "--workflow", "evals", "--device", "p100x")
    assert message.startswith("unknown --device 'p100x'")


def test_no_default_impl_names_impls() -> None:
    # Llama-3.1-70B-Instruct on t3k has two impls; only tt-transformers is default. Pretend neither is.
    spec = CATALOG.specs["id_tt-transformers_Llama-3.1-70B-Instruct_t3k"]
    spec.device_model_spec.default_impl = False
    try:
        assert error_of("--model", "Llama-3.1-70B-Instruct", "--workflow", "benchmarks", "--device", "t3k") == \
            "model 'Llama-3.1-70B-Instruct' has no default impl on 't3k'; pass --impl with one of: llama2-70b, " \
            "tt-transformers"
    finally:
        spec.device_model_spec.default_impl = True


def test_explicit_impl_must_exist_on_device() -> None:
    assert error_of("--model", "Llama-3.1-8B-Instruct", "--workflow", "benchmarks", "--device", "n150",
                    "--impl", "llama2-70b") == \
        "model 'Llama-3.1-8B-Instruct' has no impl 'llama2-70b' on 'n150'; impls: tt-transformers"


def test_server_flag_rules() -> None:
    base = ("--model", "SmolLM2-135M-Instruct", "--device", "cpu")
    assert error_of(*base, "--workflow", "benchmarks", "--local-server", "--docker-server") == \
        "--local-server and --docker-server cannot be used together; pick one"
    assert error_of(*base, "--workflow", "server") == \
        "--workflow server starts a server: add --local-server or --docker-server"
    assert "cannot be combined" in error_of(*base, "--workflow", "evals", "--local-server",
                                            "--server-url", "http://x:1")


def test_invalid_json_names_position() -> None:
    base = ("--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "benchmarks")
    assert error_of(*base, "--vllm-override-args", '{"max_num_seqs": 4,}') == \
        "--vllm-override-args is not valid JSON: Expecting property name enclosed in double quotes " \
        "(line 1, column 20, char 19)"
    assert error_of(*base, "--override-tt-config", "[1]") == "--override-tt-config must be a JSON object, got list"


@pytest.mark.parametrize("value", ["a", "0,,1", "-1", "1.5", "0,0"])
def test_bad_device_id(value: str) -> None:
    message = error_of("--model", "Llama-3.1-8B-Instruct", "--device", "t3k", "--workflow", "benchmarks",
                       "--device-id", value)
    assert message.startswith(f"invalid --device-id {value!r}")


def test_good_device_ids() -> None:
    args = parse("--model", "Llama-3.1-8B-Instruct", "--device", "t3k", "--workflow", "benchmarks",
                 "--device-id", "0,1,3")
    assert args.device_ids == (0, 1, 3)


def test_unknown_workflow_args_keys() -> None:
    message = error_of("--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "tests",
                       "--workflow-args", "mode=smoke colour=blue")
    assert message == ("unknown --workflow-args key(s) for tests: colour; valid keys: compare_hosts, currency, "
                       "hourly_cost, list_tests, markers, mode, on_regression, overlap, perf_tiers, "
                       "regression_tolerance, test_name")
    assert error_of("--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "evals",
                    "--workflow-args", "mode=huge") == "--workflow-args mode='huge' is not one of: smoke, ci, full"
    assert error_of("--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "evals",
                    "--workflow-args", "novalue") == "--workflow-args entry 'novalue' is not key=value"
    assert error_of("--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "release",
                    "--workflow-args", "perf_tiers=fast") == \
        "--workflow-args perf_tiers='fast' is not one of: functional, complete, target"
    # a verdict key, never a request body field the benchmarks would pass through
    assert parse("--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "benchmarks",
                 "--workflow-args", "perf_tiers=functional").workflow_args == {"perf_tiers": "functional"}


def test_a_workflow_marked_not_yet_available_is_refused_with_its_reason(monkeypatch) -> None:
    """The gate itself (no workflow is marked today, so one is marked for the test)."""
    workflow = WorkflowType.STRESS_TESTS
    monkeypatch.setitem(NOT_YET_AVAILABLE, workflow, "needs a device")
    message = error_of("--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", workflow.value)
    assert message.startswith(f"--workflow {workflow.value} is not available yet: needs a device")


def test_resolution_infers_default_impl_and_applies_overrides() -> None:
    args = parse("--model", "Llama-3.1-8B-Instruct", "--device", "n150", "--workflow", "benchmarks",
                 "--vllm-override-args", '{"max_num_seqs": "16"}', "--override-tt-config", '{"trace_region_size": 1}',
                 "--service-port", "8111", "--dev-mode")
    spec = resolve_spec(args, CATALOG)
    assert spec.model_id == "id_tt-transformers_Llama-3.1-8B-Instruct_n150"
    assert spec.device_model_spec.vllm_args["max_num_seqs"] == "16"
    assert spec.device_model_spec.vllm_args["override_tt_config"] == '{"trace_region_size": 1}'
    assert spec.device_model_spec.vllm_args["port"] == "8111"
    assert "-dev-" in spec.docker_image and "-release-" not in spec.docker_image
    assert spec.cli_args["model"] == "Llama-3.1-8B-Instruct"
    # the catalog itself is untouched by runtime overrides
    assert CATALOG.specs[spec.model_id].device_model_spec.vllm_args["max_num_seqs"] == "32"


def test_model_spec_json_replay(tmp_path) -> None:
    args = parse("--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "benchmarks")
    spec = resolve_spec(args, CATALOG)
    path = spec.write(tmp_path / "spec.json")
    replay = parse("--model-spec-json", str(path), "--workflow", "benchmarks")
    assert resolve_spec(replay, CATALOG).model_id == spec.model_id
    (tmp_path / "bad.json").write_text('{"model_id": 1}')
    assert "is not a valid model spec" in error_of("--model-spec-json", str(tmp_path / "bad.json"),
                                                   "--workflow", "benchmarks")


@pytest.mark.parametrize("typed, device", [("N150", DeviceType.N150), ("T3K", DeviceType.T3K),
                                            ("Galaxy", DeviceType.GALAXY), ("CPU", DeviceType.CPU)])
def test_device_names_are_accepted_in_any_case(typed: str, device: DeviceType) -> None:
    """The documented examples write ``--device N150``/``T3K``; the catalog names them in lower case."""
    args = parse("--model", "Llama-3.3-70B-Instruct", "--workflow", "benchmarks", "--device", typed)
    assert args.device is device
    assert args.record()["device"] == typed  # cli_args.json keeps the flag as typed


def test_device_typo_in_upper_case_suggests_the_device() -> None:
    assert error_of("--model", "SmolLM2-135M-Instruct", "--workflow", "evals", "--device", "N15") == \
        "unknown --device 'N15'; did you mean 'n150'?"


def test_model_on_other_devices_names_them_whatever_the_case() -> None:
    """The documented ``Qwen2.5-72B-Instruct --device N150``: the catalog has it on t3k only."""
    assert error_of("--model", "Qwen2.5-72B-Instruct", "--workflow", "benchmarks", "--device", "N150",
                    "--disable-trace-capture") == \
        "model 'Qwen2.5-72B-Instruct' does not support device 'n150'; supported devices: t3k"


def test_override_tt_config_merges_key_by_key() -> None:
    """``{"data_parallel": 16}`` adds one key; the galaxy spec's fabric and trace settings stay."""
    args = parse("--model", "Llama-3.3-70B-Instruct", "--workflow", "benchmarks", "--device", "galaxy",
                 "--override-tt-config", '{"data_parallel": 16, "trace_region_size": 1, "worker_l1_size": null}')
    spec = resolve_spec(args, CATALOG)
    config = spec.device_model_spec.override_tt_config
    assert config["data_parallel"] == 16 and config["trace_region_size"] == 1
    assert config["fabric_config"] == "FABRIC_1D" and config["dispatch_core_axis"] == "col"
    assert "worker_l1_size" not in config  # null removes a key
    assert json.loads(spec.device_model_spec.vllm_args["override_tt_config"]) == config
    assert "data_parallel" not in CATALOG.specs[spec.model_id].device_model_spec.override_tt_config


def test_interactive_is_for_a_docker_server_workflow_only() -> None:
    """``-it``/``--interactive`` opens a shell in the container; anything else would ignore it silently."""
    base = ("--model", "SmolLM2-135M-Instruct", "--device", "cpu")
    assert parse(*base, "--workflow", "server", "--docker-server", "-it").interactive
    assert parse(*base, "--workflow", "server", "--docker-server", "--interactive").interactive
    assert error_of(*base, "--workflow", "server", "--local-server", "--interactive") == \
        "--interactive opens a shell in the server's Docker container: add --docker-server"
    assert error_of(*base, "--workflow", "benchmarks", "-it") == \
        "--interactive opens a shell in the server's Docker container: add --docker-server"
    assert error_of(*base, "--workflow", "benchmarks", "--docker-server", "-it") == \
        "--interactive leaves starting the server to you in the container's shell: use it with --workflow server"
    assert error_of(*base, "--workflow", "server", "--docker-server", "-it", "--auth", "jwt-gateway") == \
        "--interactive starts no server for the JWT gateway to front; drop --auth jwt-gateway"


def test_workflow_args_evals_does_not_own_pass_through_and_are_recorded() -> None:
    """``--workflow-args "batch_size=4 max_tokens=512"`` for evals, as documented."""
    args = parse("--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "evals",
                 "--workflow-args", "batch_size=4 max_tokens=512")
    assert args.workflow_args == {"batch_size": "4", "max_tokens": "512"}
    assert args.record()["workflow_args_passthrough"] == {"batch_size": ["evals"], "max_tokens": ["evals"]}
    release = parse("--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "release",
                    "--workflow-args", "mode=smoke max_tokens=512 temperature=0.5")
    # max_tokens is each benchmark point's OSL: in a release it reaches evals only
    assert release.record()["workflow_args_passthrough"] == {"max_tokens": ["evals"],
                                                             "temperature": ["evals", "benchmarks"]}
    assert "workflow_args_passthrough" not in parse("--model", "SmolLM2-135M-Instruct", "--device", "cpu",
                                                    "--workflow", "evals", "--workflow-args", "mode=smoke").record()


@pytest.mark.parametrize("workflow, text, message", [
    ("evals", "mdoe=smoke", "unknown --workflow-args key 'mdoe' for evals; did you mean 'mode'?"),
    ("benchmarks", "point=1x1x1", "unknown --workflow-args key 'point' for benchmarks; did you mean 'points'?"),
    ("evals", "batch_size=four", "--workflow-args batch_size='four' must be an integer >= 1 (lm-eval's batch_size)"),
    ("benchmarks", "max_tokens=512", ("--workflow-args max_tokens is set by the benchmark itself (each point's "
                                      "output length: choose it with points=ISLxOSLxCON)")),
    ("evals", "max-tokens=5", "--workflow-args key 'max-tokens' is not a setting name (letters, digits, _)"),
])
def test_workflow_args_typos_and_bad_pass_through_values(workflow: str, text: str, message: str) -> None:
    assert error_of("--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", workflow,
                    "--workflow-args", text) == message


def test_a_flag_given_double_dash_as_its_value_is_one_line_not_a_traceback():
    """argparse reads `--device=--` as the "--" separator and hands back [] (a fuzz case found it)."""
    with pytest.raises(UsageError, match="--device needs a value, not '--'"):
        parse_args(["--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "benchmarks",
                    "--device=--"], None)
