"""The JWT gateway: token rules (unit) and the real proxy process in front of a streaming upstream.

The upstream here is the benchmarks' delay-programmed stub server (a named test tool: chunk k
is written at ttft + k*itl), so a stream that the gateway buffered would be visible as chunks
arriving together at the end. The first-byte latency the gateway adds is measured by
``scripts/bench_gateway.py``, not asserted here.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import jwt
import pytest

from contracts.retry import wait_http_ok
from tests.helpers import free_port
from tests.tt_media_server.conftest import SERVER_DIR, media_python

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SERVER_DIR))

from gateway.tokens import TokenPolicy, TokenRejected, bearer_token, verify  # noqa: E402

SECRET = "gateway-test-secret-0123456789abcdef"
POLICY = TokenPolicy(secret=SECRET, required_claims=("team_id",))


def _token(claims: dict, secret: str = SECRET, algorithm: str = "HS256") -> str:
    return jwt.encode(claims, secret, algorithm=algorithm)


# ---- token rules ------------------------------------------------------------------------------
def test_valid_token_yields_its_claims():
    claims = verify(_token({"team_id": "t", "exp": int(time.time()) + 60}), POLICY)
    assert claims["team_id"] == "t"
    assert verify(_token({"team_id": "t"}), POLICY)["team_id"] == "t"  # no exp: allowed by default


# Tokens are minted when the test runs, not at collection: a suite that runs for more than ten
# minutes would otherwise see the "not yet valid" token become valid.
@pytest.mark.parametrize("mint, reason", [
    (lambda: _token({"team_id": "t"}, secret="another-secret-0123456789abcdef"), "signature is invalid"),
    (lambda: _token({"team_id": "t", "exp": int(time.time()) - 5}), "expired"),
    (lambda: _token({"token_id": "x"}), "required claim 'team_id'"),
    (lambda: _token({"team_id": "t", "nbf": int(time.time()) + 600}), "not yet valid"),
    (lambda: _token({"team_id": "t"}, algorithm="HS512"), "algorithm"),
    (lambda: "not.a.jwt", "malformed"),
])
def test_bad_tokens_are_rejected_with_the_reason(mint, reason):
    with pytest.raises(TokenRejected, match=reason):
        verify(mint(), POLICY)


def test_unsigned_token_is_rejected():
    header = jwt.utils.base64url_encode(json.dumps({"alg": "none", "typ": "JWT"}).encode()).decode()
    payload = jwt.utils.base64url_encode(json.dumps({"team_id": "t"}).encode()).decode()
    with pytest.raises(TokenRejected):
        verify(f"{header}.{payload}.", POLICY)


def test_require_exp_and_bearer_header_parsing():
    with pytest.raises(TokenRejected, match="'exp'"):
        verify(_token({"team_id": "t"}), TokenPolicy(secret=SECRET, require_exp=True))
    assert bearer_token("Bearer abc") == "abc"
    for header in (None, "", "Basic abc", "Bearer "):
        with pytest.raises(TokenRejected):
            bearer_token(header)


def test_jwt_util_mints_tokens_the_gateway_accepts():
    script = REPO_ROOT / "scripts" / "jwt_util.py"
    env = {**os.environ, "JWT_SECRET": SECRET}
    out = subprocess.run([sys.executable, str(script), "encode", '{"team_id": "tenstorrent"}',
                          "--expires-in", "60"], capture_output=True, text=True, env=env, check=True)
    token = out.stdout.strip()
    assert "\n" not in token
    claims = verify(token, POLICY)
    assert claims["team_id"] == "tenstorrent" and 0 < claims["exp"] - time.time() <= 60
    bad = subprocess.run([sys.executable, str(script), "encode", "[1]"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "JSON object" in bad.stderr


# ---- the proxy process -------------------------------------------------------------------------
def _wait_answering(process: subprocess.Popen, url: str, status: int, log: Path, timeout: float = 60) -> None:
    """Wait until ``url`` answers ``status``; fail with the process's log if it exits or the deadline passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        try:
            if httpx.get(url, timeout=2).status_code == status:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} did not answer {status} within {timeout:.0f} s: " + log.read_text())


@pytest.fixture(scope="module")
def stub_behind_gateway(tmp_path_factory):
    python = media_python()
    logs = tmp_path_factory.mktemp("gateway")
    stub_port, gateway_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "JWT_SECRET": SECRET, "UPSTREAM_KEY": "upstream-key"}
    stub = subprocess.Popen([sys.executable, "-m", "benchmarking.stub_server", "--port", str(stub_port),
                             "--ttft-ms", "30", "--itl-ms", "40"], cwd=REPO_ROOT, env=env,
                            stdout=open(logs / "stub.log", "wb"), stderr=subprocess.STDOUT)
    gateway = subprocess.Popen([str(python), "-m", "gateway", "--upstream", f"http://127.0.0.1:{stub_port}",
                                "--port", str(gateway_port), "--upstream-api-key-env", "UPSTREAM_KEY"],
                               cwd=SERVER_DIR, env=env, stdout=open(logs / "gateway.log", "wb"),
                               stderr=subprocess.STDOUT)
    base, upstream = f"http://127.0.0.1:{gateway_port}", f"http://127.0.0.1:{stub_port}"
    try:
        # Both must answer: the gateway is up before its upstream stub on a busy host (a 502 once in CI).
        _wait_answering(stub, upstream + "/health", 200, logs / "stub.log")
        _wait_answering(gateway, base + "/v1/models", 401, logs / "gateway.log")
        yield base, upstream
    finally:
        for process in (gateway, stub):
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


@pytest.mark.parametrize("headers, reason", [
    ({}, "missing bearer token"),
    ({"Authorization": "Bearer " + _token({"team_id": "t"}, secret="wrong-secret-0123456789abcdef")},
     "signature is invalid"),
    ({"Authorization": "Bearer " + _token({"team_id": "t", "exp": int(time.time()) - 1})}, "expired"),
    ({"Authorization": "Bearer " + _token({"token_id": "only"})}, "required claim 'team_id'"),
])
def test_gateway_answers_401_json_without_a_valid_token(stub_behind_gateway, headers, reason):
    base, _ = stub_behind_gateway
    response = httpx.post(base + "/v1/completions", headers=headers, timeout=10,
                          json={"model": "stub-model", "prompt": "x", "max_tokens": 3, "stream": True})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    body = response.json()
    assert body["error"]["type"] == "authentication_error" and reason in body["error"]["message"]


def test_gateway_passes_a_stream_through_chunk_by_chunk(stub_behind_gateway):
    base, _ = stub_behind_gateway
    headers = {"Authorization": "Bearer " + _token({"team_id": "t", "exp": int(time.time()) + 60})}
    body = {"model": "stub-model", "prompt": "x", "max_tokens": 8, "stream": True}
    arrivals, raw = [], b""
    with httpx.Client(timeout=30) as client:
        with client.stream("POST", base + "/v1/completions", json=body, headers=headers) as response:
            assert response.status_code == 200, (response.read(), response.headers)
            assert response.headers["content-type"].startswith("text/event-stream")
            for chunk in response.iter_raw():
                arrivals.append(time.monotonic())
                raw += chunk
    events = re.findall(rb"^data: (.*)$", raw, re.M)
    assert events[-1] == b"[DONE]" and len(events) >= 9
    # The stub writes a token every 40 ms: an unbuffered proxy delivers them spread over ~280 ms.
    assert len(arrivals) >= 6, f"{len(arrivals)} reads: the stream was buffered"
    assert arrivals[-1] - arrivals[0] > 0.15


def test_gateway_leaves_probes_open(stub_behind_gateway):
    base, stub = stub_behind_gateway
    direct = httpx.get(stub + "/health", timeout=5)
    through = httpx.get(base + "/health", timeout=5)
    assert through.status_code == direct.status_code


# ---- run.py --auth jwt-gateway ------------------------------------------------------------------
def test_run_py_gateway_auth_gives_clients_a_jwt_and_hides_the_server_key():
    from workflows.servers.jwt_gateway import gateway_auth

    auth = gateway_auth({"JWT_SECRET": SECRET}, {})
    claims = verify(auth.bearer, TokenPolicy(secret=SECRET, required_claims=("team_id",), require_exp=True))
    assert claims["exp"] > time.time() + 3600
    assert auth.jwt_secret == SECRET and auth.server_api_key not in (auth.bearer, SECRET)
    assert {auth.bearer, SECRET, auth.server_api_key} <= set(auth.secrets)  # all redacted from logs
    generated = gateway_auth({}, {})
    assert generated.jwt_secret and verify(generated.bearer, TokenPolicy(secret=generated.jwt_secret))


def test_run_py_refuses_jwt_gateway_without_a_server_it_launches():
    from workflows.cli import UsageError, parse_args

    for extra in (["--auth", "jwt-gateway"], ["--auth", "jwt-gateway", "--local-server", "--no-auth"]):
        with pytest.raises(UsageError, match="jwt-gateway"):
            parse_args(["--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "benchmarks",
                        *extra], None)
    options = parse_args(["--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--workflow", "benchmarks",
                          "--local-server", "--auth", "jwt-gateway"], None)
    assert options.auth_mode == "jwt-gateway"


# ---- the documented pairing: JWT_SECRET=... python -m gateway beside a server started with API_KEY ------------
def test_gateway_beside_a_server_with_api_key_sends_that_key_upstream(media_server, tmp_path):
    """No --upstream-api-key-env: the gateway takes the server's key from API_KEY (and says so), so a valid
    JWT reaches the model routes; before, the client's JWT went upstream and the server answered 401."""
    server = media_server({"MODELS": "openai/whisper-tiny.en"})
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k.upper() != "UPSTREAM_KEY"}
    env.update(JWT_SECRET=SECRET, API_KEY=server.api_key)
    log_path = tmp_path / "gateway.log"
    with open(log_path, "wb") as log:
        gateway = subprocess.Popen([str(media_python()), "-m", "gateway", "--upstream", server.base_url,
                                    "--port", str(port)], cwd=SERVER_DIR, env=env, stdout=log,
                                   stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http_ok("the gateway", base + "/health", deadline_s=60,
                     alive_check=lambda: None if gateway.poll() is None else pytest.fail(log_path.read_text()))
        token = _token({"team_id": "tenstorrent", "exp": int(time.time()) + 60})
        models = httpx.get(base + "/v1/models", headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert models.status_code == 200, models.text
        assert [m["id"] for m in models.json()["data"]] == ["openai/whisper-tiny.en"]
        assert httpx.get(base + "/v1/models", timeout=10).status_code == 401
    finally:
        gateway.terminate()
        gateway.wait(10)
    assert "the upstream is sent the key in API_KEY" in log_path.read_text()
    assert server.api_key not in log_path.read_text()
