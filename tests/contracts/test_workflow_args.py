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
