"""Every JWT-gateway setting with a wrong type or range stops start-up with one line naming it (exit 2).

The flags come from the gateway's own parser (``gateway.__main__.build_parser``): a flag added
later without bad values listed here fails this test. Checks run before uvicorn is imported, so
each case is a call of ``main(argv)`` in this process.
"""
from __future__ import annotations

import contextlib
import io
import sys

import pytest

from tests.tt_media_server.conftest import SERVER_DIR

sys.path.insert(0, str(SERVER_DIR))

from gateway.__main__ import build_parser, main  # noqa: E402

VALID = ["--upstream", "http://127.0.0.1:1"]
# Bad values per flag; a flag maps to [] only when any text is a valid value, with the reason.
BAD_VALUES: dict[str, list[str]] = {
    "--upstream": ["file:///etc/passwd", "", "http://", "http://h:99999", "ftp://h", "127.0.0.1:1"],
    "--host": ["", " ", "a b", "\x1b[31m"],
    "--port": ["abc", "-1", "65536", "1.5", ""],
    "--secret-env": ["", "1BAD", "A-B", "UNSET_GATEWAY_SECRET_FOR_TEST"],
    "--leeway": ["abc", "-1", "nan", "inf", ""],
    "--open-paths": ["no-slash", "/ok,bad"],
    "--upstream-api-key-env": ["", "A B", "UNSET_GATEWAY_KEY_FOR_TEST"],
    "--read-timeout": ["abc", "0", "-5", "nan", "inf"],
    "--max-in-flight": ["abc", "0", "-1", "1.5", ""],
    "--log-level": ["LOUD", "", "trace"],
}
FREE_TEXT = {
    "--required-claims": "any comma list of claim names (empty: none required)",
    "--audience": "any string a token's aud claim must equal",
    "--issuer": "any string a token's iss claim must equal",
    "--require-exp": "a switch: takes no value",
    "--help": "prints the help",
}


def _flags() -> list[str]:
    return [max(a.option_strings, key=len) for a in build_parser()._actions if a.option_strings]


def test_every_flag_is_classified():
    unclassified = [f for f in _flags() if f not in BAD_VALUES and f not in FREE_TEXT]
    assert not unclassified, f"give these gateway flags bad values (or a reason they have none): {unclassified}"


@pytest.mark.parametrize("flag, value", [(f, v) for f, values in BAD_VALUES.items() for v in values])
def test_a_bad_value_is_one_line_naming_the_flag(flag, value, monkeypatch):
    monkeypatch.setenv("JWT_SECRET", "gateway-settings-test-secret")
    argv = (VALID if flag != "--upstream" else []) + [f"{flag}={value}"]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own exit would be a second kind of answer
            code = f"SystemExit({exc.code!r})"
    lines = err.getvalue().strip().splitlines()
    assert code == 2, (flag, value, code, err.getvalue())
    assert len(lines) == 1 and lines[0].startswith("gateway: ") and flag in lines[0], (flag, value, lines)
    assert "Traceback" not in err.getvalue()


def test_defaults_run_beside_a_media_server_started_with_its_defaults(monkeypatch):
    """``JWT_SECRET=... python -m gateway`` with no flags: 8080 in front of the server's default 127.0.0.1:8000."""
    from gateway.__main__ import build

    monkeypatch.setenv("JWT_SECRET", "gateway-settings-test-secret")
    ns = build_parser().parse_args([])
    assert (ns.upstream, ns.host, ns.port) == ("http://127.0.0.1:8000", "127.0.0.1", 8080)
    assert build(ns).upstream.rstrip("/") == "http://127.0.0.1:8000"


def test_an_upstream_at_the_gateways_own_address_is_refused(monkeypatch):
    monkeypatch.setenv("JWT_SECRET", "gateway-settings-test-secret")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["--port", "8000"])
    assert code == 2
    assert err.getvalue().strip() == ("gateway: --upstream http://127.0.0.1:8000 is the gateway's own address "
                                      "(--port 8000); give the server and the gateway different ports")


def test_the_upstream_key_is_the_flag_s_variable_else_api_key_else_the_client_s_header(monkeypatch):
    """API_KEY is the media server's key: the documented gateway beside a keyed server needs no flag."""
    from gateway.__main__ import build, upstream_auth_line, upstream_key_env

    monkeypatch.setenv("JWT_SECRET", "gateway-settings-test-secret")
    monkeypatch.delenv("API_KEY", raising=False)
    plain = build_parser().parse_args([])
    assert upstream_key_env(plain) is None and build(plain).upstream_authorization is None
    assert "forwarded upstream as it is" in upstream_auth_line(None)
    monkeypatch.setenv("API_KEY", "server-key")
    assert upstream_key_env(plain) == "API_KEY" and build(plain).upstream_authorization == "Bearer server-key"
    assert "server-key" not in upstream_auth_line("API_KEY")
    monkeypatch.setenv("OTHER_KEY", "other-key")
    flagged = build_parser().parse_args(["--upstream-api-key-env", "OTHER_KEY"])
    assert build(flagged).upstream_authorization == "Bearer other-key"
