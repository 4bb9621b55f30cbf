"""The report's metadata echoes the --workflow-args keys a workflow passed through to its tool."""

from __future__ import annotations

from reports.builder import build_report
from reports.views import metadata_rows


def test_passed_through_keys_are_in_the_metadata_not_in_the_command(make_run):
    run = make_run()
    run.edit("cli_args.json", lambda a: a.update(workflow_args="batch_size=4 max_tokens=512",
                                                 workflow_args_passthrough={"batch_size": ["evals"],
                                                                            "max_tokens": ["evals"]}))
    metadata = build_report(run.path).metadata
    assert metadata.workflow_args_passthrough == {"batch_size": ["evals"], "max_tokens": ["evals"]}
    assert "--workflow-args batch_size=4 max_tokens=512" in metadata.run_command
    assert "passthrough" not in metadata.run_command  # derived by run.py: not a flag to type back
    rows = dict(metadata_rows(build_report(run.path)))
    assert rows["Passed through"] == "batch_size -> evals; max_tokens -> evals"
