"""scripts/jwt_util.py as documented: ``./scripts/jwt_util.py --secret S encode '{...}'``."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time

import jwt
import pytest

from contracts import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "jwt_util.py"
SECRET = "jwt-util-test-secret-of-32-bytes!"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The script run directly (its shebang), as the documented command does."""
    environ = {k: v for k, v in os.environ.items() if k != "JWT_SECRET"}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env={**environ, **(env or {})},
                          timeout=30)


def test_the_script_is_executable_with_a_python3_shebang() -> None:
    assert SCRIPT.stat().st_mode & stat.S_IXUSR
    assert SCRIPT.read_text().splitlines()[0] == "#!/usr/bin/env python3"


def test_documented_order_secret_before_the_command() -> None:
    out = run("--secret", SECRET, "encode", '{"team_id": "tenstorrent", "token_id":"debug-test"}')
    assert out.returncode == 0, out.stderr
    token = out.stdout.strip()
    claims = jwt.decode(token, SECRET, algorithms=["HS256"])  # PyJWT (what the gateway uses) accepts it
    assert claims["team_id"] == "tenstorrent" and claims["token_id"] == "debug-test"
    assert 0 < claims["exp"] - time.time() <= 3600
    assert json.loads(run("decode", token, "--secret", SECRET).stdout)["token_id"] == "debug-test"


def test_secret_after_the_command_and_from_the_environment() -> None:
    token = run("encode", '{"team_id": "t"}', "--secret", SECRET, "--expires-in", "0").stdout.strip()
    assert "exp" not in jwt.decode(token, SECRET, algorithms=["HS256"])
    token = run("encode", '{"team_id": "t"}', env={"JWT_SECRET": SECRET}).stdout.strip()
    assert jwt.decode(token, SECRET, algorithms=["HS256"])["team_id"] == "t"


@pytest.mark.parametrize("args, message", [
    (("encode", '{"team_id": "t"}'), "jwt_util: no secret: pass --secret or set JWT_SECRET"),
    (("--secret", SECRET, "encode", "[1]"), "jwt_util: claims must be a JSON object"),
    (("--secret", SECRET, "decode", "a.b.c"), "jwt_util: token rejected: its header or claims are not base64url JSON"),
    (("--secret", SECRET, "encode"), "jwt_util: the following arguments are required: claims"),
])
def test_bad_input_is_one_line_and_exit_2(args, message) -> None:
    out = run(*args)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().startswith(message) and len(out.stderr.strip().splitlines()) == 1


def test_decode_refuses_another_secret_and_an_expired_token() -> None:
    token = jwt.encode({"team_id": "t", "exp": int(time.time()) - 5}, SECRET, algorithm="HS256")
    assert run("--secret", SECRET, "decode", token).stderr.strip() == "jwt_util: token rejected: it expired"
    good = jwt.encode({"team_id": "t"}, SECRET, algorithm="HS256")
    assert run("--secret", "another-secret", "decode", good).stderr.strip() == \
        "jwt_util: token rejected: the signature does not match this secret"
    assert sys.executable  # the script needs no venv: it ran on the shebang's python3 above
