"""run.py's options are declared once (workflows/options.py): the parser and the README's option list agree."""
from __future__ import annotations

import argparse

from contracts import REPO_ROOT
from workflows.cli import build_parser
from workflows.options import README_END, README_START, RUN_OPTIONS, Option, add_options, readme_block


def test_the_readme_lists_every_option_as_declared():
    """Regenerate with: python3 -c 'from workflows.options import readme_block; print(readme_block())'
    (from the repository root), pasted over the block between the two markers in README.md."""
    readme = (REPO_ROOT / "README.md").read_text()
    start, end = readme.index(README_START), readme.index(README_END) + len(README_END)
    assert readme[start:end] == readme_block()


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
