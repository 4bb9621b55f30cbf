"""run.py's options are declared once (workflows/options.py): the parser and the README's option list agree."""
from __future__ import annotations

import argparse

from contracts import REPO_ROOT
from workflows.cli import build_parser
from contracts.workflow_args import WORKFLOW_ARGS
from workflows.options import RUN_OPTIONS, Option, add_options, rewrite_readme, workflow_args_markdown


def test_the_readme_lists_every_option_and_key_as_declared():
    """Regenerate with `python3 -m workflows.options` (from the repository root): it rewrites both blocks."""
    readme = (REPO_ROOT / "README.md").read_text()
    assert readme == rewrite_readme(readme)


def test_every_workflow_args_key_is_documented():
    text = workflow_args_markdown()
    missing = [key for keys in WORKFLOW_ARGS.values() for key in keys if f"| `{key}` |" not in text
               and f"`{key}`" not in text.split("\n")[0]]
    assert missing == []


def test_the_parser_has_exactly_the_declared_options():
    declared = {flag for option in RUN_OPTIONS for flag in option.flags}
    parsed = {flag for action in build_parser()._actions for flag in action.option_strings} - {"-h", "--help"}
    assert parsed == declared
    assert len({option.dest for option in RUN_OPTIONS}) == len(RUN_OPTIONS)


def test_an_option_becomes_a_flag_with_its_kind_default_and_choices(monkeypatch):
    options = (Option(("--colour",), "paint it", "output", default="red", choices=("red", "blue")),
               Option(("--loud",), "shout", "output", switch=True),
               Option(("--port",), "where", "server", default="1", default_env="TEST_OPTIONS_PORT"))
    monkeypatch.setenv("TEST_OPTIONS_PORT", "9")
    parser = argparse.ArgumentParser()
    add_options(parser, options)
    ns = parser.parse_args([])
    assert (ns.colour, ns.loud, ns.port) == ("red", False, "9")
    assert parser.parse_args(["--loud", "--colour", "blue"]).loud is True
    assert options[2].shown_default() == "$TEST_OPTIONS_PORT or 1" and options[1].shown_default() == "off"
