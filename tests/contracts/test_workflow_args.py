"""--workflow-args parsing and the client workflow argument contract."""

from __future__ import annotations

import pytest

from contracts.workflow_args import WorkflowArgsError, client_workflow_parser, parse_workflow_args


def test_parse_workflow_args_quoting_and_errors() -> None:
    assert parse_workflow_args("mode=smoke note='a b'") == {"mode": "smoke", "note": "a b"}
    assert parse_workflow_args("") == {}
    with pytest.raises(WorkflowArgsError, match="'novalue' is not key=value"):
        parse_workflow_args("novalue")


def test_client_workflow_parser_is_the_orchestrator_contract() -> None:
    """What workflows.clients passes to every child parses with the shared parser."""
    args = client_workflow_parser("x").parse_args(
        ["--run-dir", "R", "--model-spec-json", "R/model_spec.json", "--server-url", "http://h:1",
         "--workflow-args-json", '{"mode": "smoke"}', "--disable-trace-capture"])
    assert (args.run_dir, args.server_url, args.workflow_args_json, args.disable_trace_capture) == \
        ("R", "http://h:1", '{"mode": "smoke"}', True)
    with pytest.raises(SystemExit):
        client_workflow_parser("x").parse_args(["--server-url", "u"])  # --run-dir is required


def test_overlap_is_the_orchestrators_key_and_reaches_no_client() -> None:
    """``overlap=0`` turns a release's side-by-side stage off; it is checked up front and is never a
    generation kwarg (evals) or request body field (benchmarks) passed through."""
    from contracts.workflow_args import WorkflowType, passthrough_targets, validate_workflow_args
    from contracts.workflow_keys import RELEASE_ARGS

    assert "overlap" in RELEASE_ARGS and "0" in RELEASE_ARGS["overlap"]
    for workflow in (WorkflowType.RELEASE, WorkflowType.EVALS, WorkflowType.BENCHMARKS):
        validate_workflow_args(workflow, {"overlap": "0"})
        assert passthrough_targets(workflow, {"overlap": "0"}) == {}
    with pytest.raises(WorkflowArgsError, match="overlap='2' is not one of: 1, 0, true, false"):
        validate_workflow_args(WorkflowType.RELEASE, {"overlap": "2"})
    with pytest.raises(WorkflowArgsError, match="did you mean 'overlap'"):
        validate_workflow_args(WorkflowType.RELEASE, {"overlapp": "0"})


def test_a_key_given_twice_is_refused_naming_both_values() -> None:
    """``mode=smoke mode=ci`` kept the last value without a word; which one was meant cannot be known."""
    with pytest.raises(WorkflowArgsError, match=r"key 'mode' is given twice \('smoke', then 'ci'\)"):
        parse_workflow_args("mode=smoke mode=ci")
    assert parse_workflow_args("mode=smoke modes=ci") == {"mode": "smoke", "modes": "ci"}
