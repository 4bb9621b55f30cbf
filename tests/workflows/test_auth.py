"""Auth resolution, JWT, .env handling and redaction (no server needed)."""

from __future__ import annotations

import importlib.util

import jwt
import pytest

from contracts import REPO_ROOT
from workflows.auth import (REDACTED, SECRET_ENV_NAMES, DotenvError, Redactor, load_dotenv, make_jwt,
                            resolve_auth)

LAUNCHER = REPO_ROOT / "vllm-tt-metal" / "src" / "run_vllm_api_server.py"


def _launcher():
    spec = importlib.util.spec_from_file_location("launcher_under_test", LAUNCHER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_jwt_has_upstream_claims_and_matches_launcher(tmp_path):
    token = make_jwt("s3cret-value")
    assert jwt.decode(token, "s3cret-value", algorithms=["HS256"]) == {"team_id": "tenstorrent",
                                                                       "token_id": "debug-test"}
    # The launcher derives the same key from JWT_SECRET with the stdlib only.
    assert _launcher().jwt_hs256("s3cret-value") == token


def test_precedence_api_key_over_jwt(tmp_path):
    env = {"API_KEY": "plain-key-1234", "JWT_SECRET": "s3cret-value"}
    auth = resolve_auth(False, env, tmp_path / ".env")
    assert (auth.bearer, auth.server_api_key, auth.source) == ("plain-key-1234", "plain-key-1234", "API_KEY")
    auth = resolve_auth(False, {"VLLM_API_KEY": "vk-123456"}, tmp_path / ".env")
    assert auth.bearer == "vk-123456" and auth.source == "VLLM_API_KEY"


def test_jwt_secret_from_dotenv_env_wins(tmp_path):
    dotenv = tmp_path / ".env"
    dotenv.write_text("JWT_SECRET=from-dotenv-xyz\n")
    auth = resolve_auth(False, {}, dotenv)
    assert auth.source == "JWT_SECRET" and auth.bearer == make_jwt("from-dotenv-xyz")
    auth = resolve_auth(False, {"JWT_SECRET": "from-env-abc"}, dotenv)
    assert auth.bearer == make_jwt("from-env-abc")


def test_default_generates_key_for_launched_servers_only(tmp_path):
    a = resolve_auth(False, {}, tmp_path / ".env")
    b = resolve_auth(False, {}, tmp_path / ".env")
    assert a.source == "generated" and a.bearer == a.server_api_key and len(a.bearer) >= 40
    assert a.bearer != b.bearer  # per run
    ext = resolve_auth(False, {}, tmp_path / ".env", external=True)
    assert ext.bearer is None and ext.server_api_key is None and ext.source == "none"


def test_no_auth(tmp_path):
    auth = resolve_auth(True, {"API_KEY": "plain-key-1234"}, tmp_path / ".env")
    assert auth.bearer is None and auth.server_api_key is None and auth.source == "no-auth"


def test_repr_never_shows_token(tmp_path):
    auth = resolve_auth(False, {"API_KEY": "plain-key-1234"}, tmp_path / ".env")
    assert "plain-key-1234" not in repr(auth) and "plain-key-1234" not in str(auth)


def test_dotenv_parsing(tmp_path):
    path = tmp_path / ".env"
    path.write_text("# c\nexport A=1\nB='quoted'\nC=\"dq\"\n\nnot a line\nD=\nE=x=y\n")
    assert load_dotenv(path) == {"A": "1", "B": "quoted", "C": "dq", "D": "", "E": "x=y"}
    assert load_dotenv(tmp_path / "missing") == {}


def test_dotenv_is_read_as_python_dotenv_reads_it_with_no_interpolation(tmp_path):
    path = tmp_path / ".env"
    path.write_text('F=a # note\nG=$F${F}\nH="a\\nb"\n')
    assert load_dotenv(path) == {"F": "a", "G": "$F${F}", "H": "a\nb"}  # a secret with "$" is kept as written
    path.write_bytes(b"A=1\nB=x\x00y\n")
    with pytest.raises(DotenvError, match="line 2 holds a NUL byte"):
        load_dotenv(path)


def test_one_secret_name_list_reaches_every_backend():
    """The server backends scrub and route secrets by the list in workflows.auth, not their own copies."""
    from workflows.servers import docker_server, local

    assert set(local._SCRUB) >= set(SECRET_ENV_NAMES) - {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"}
    assert "HF_TOKEN" not in local._SCRUB  # gated tokenizers: the server itself needs it
    assert docker_server.SECRET_ENV_NAMES is SECRET_ENV_NAMES


def test_redactor_text_and_json(tmp_path):
    env = {"HF_TOKEN": "hf_supersecret", "MY_DB_PASSWORD": "pw-123456", "PATH": "/usr/bin", "SHORT_TOKEN": "1"}
    auth = resolve_auth(False, {"JWT_SECRET": "jwt-secret-value"}, tmp_path / ".env")
    red = Redactor.from_env(env, auth)
    text = f"token hf_supersecret pw-123456 bearer {auth.bearer} secret jwt-secret-value path /usr/bin 1"
    out = red.redact(text)
    for secret in ("hf_supersecret", "pw-123456", auth.bearer, "jwt-secret-value"):
        assert secret not in out
    assert out.count(REDACTED) == 4 and "/usr/bin" in out and out.endswith(" 1")
    data = {"cmd": ["--api-key", auth.bearer], "n": 3, "nested": {"k": "x hf_supersecret y"}}
    assert red.redact_obj(data) == {"cmd": ["--api-key", REDACTED], "n": 3, "nested": {"k": f"x {REDACTED} y"}}
