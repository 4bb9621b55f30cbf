"""``--auth jwt-gateway``: the server we launch sits behind the JWT gateway (its own process).

Layout: the server (vLLM or the media server, local or docker) listens on an internal port and
enforces a per-run API key that no client is given; the gateway (``tt-media-server/gateway``)
listens on ``--service-port``, verifies each client's HS256 JWT (signature, exp, nbf, team_id)
and forwards the request with the server's key, streaming the answer through unbuffered. So the
clients of the run (readiness, benchmarks, evals) all hold a real, expiring JWT, and the only
way in is through the check.

Secrets: the JWT secret is ``JWT_SECRET`` (environment or ``.env``) or, when unset, generated
for this run; the gateway gets it and the server key through its environment, never argv. The
gateway runs in the ``media-server`` venv (uvicorn, httpx, PyJWT) and dies with run.py like the
server does; ``stop`` stops the gateway first, then the server.
"""
from __future__ import annotations

import dataclasses
import os
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from contracts.retry import GaveUp, NotYet, retry
from workflows.servers.base import ServerHandle, ServerLaunch, ServerStartError

if TYPE_CHECKING:
    from workflows.auth import AuthConfig

REPO_ROOT = Path(__file__).resolve().parents[2]
GATEWAY_DIR = REPO_ROOT / "tt-media-server"
GATEWAY_VENV = "media-server"
TOKEN_LIFETIME_S = 7 * 24 * 3600
JWT_CLAIMS = {"team_id": "tenstorrent", "token_id": "tt-inference-server-run"}


def gateway_auth(env: Mapping[str, str], dotenv: Mapping[str, str]) -> "AuthConfig":
    """The run's secrets behind the gateway: clients send a JWT, the server enforces a hidden key.

    bearer: an HS256 JWT (team_id claim, expires in TOKEN_LIFETIME_S) signed with JWT_SECRET, or
    with a secret generated for this run when JWT_SECRET is unset; server_api_key: a fresh
    random key only the gateway holds; jwt_secret: what the gateway verifies with.
    """
    import warnings

    import jwt

    from workflows.auth import AuthConfig

    secret = env.get("JWT_SECRET") or dotenv.get("JWT_SECRET") or ""
    source = "jwt-gateway (JWT_SECRET)" if secret else "jwt-gateway (generated secret)"
    secret = secret or secrets.token_urlsafe(48)
    now = int(time.time())
    with warnings.catch_warnings():  # short user secrets make PyJWT warn; they are the user's choice
        warnings.simplefilter("ignore")
        token = jwt.encode({**JWT_CLAIMS, "iat": now, "exp": now + TOKEN_LIFETIME_S}, secret, algorithm="HS256")
    token = token if isinstance(token, str) else token.decode()
    key = secrets.token_urlsafe(32)
    return AuthConfig(bearer=token, server_api_key=key, source=source, secrets=(token, secret, key),
                      jwt_secret=secret)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class GatewayedServerHandle(ServerHandle):
    """The server plus its gateway; ``base_url`` is the gateway's, everything else the server's."""

    kind = "jwt-gateway"

    def __init__(self, server: ServerHandle, gateway: subprocess.Popen, base_url: str, log_path: Path):
        super().__init__(base_url, server.served_model_name, server.log_path)
        self.server = server
        self.gateway = gateway
        self.gateway_log_path = log_path

    def is_alive(self) -> bool:
        return self.gateway.poll() is None and self.server.is_alive()

    def exit_code(self) -> int | None:
        return self.server.exit_code()

    def log_tail(self, n: int = 40) -> str:
        return self.server.log_tail(n)

    def stop(self, timeout: float = 15) -> None:
        if self.detached:
            return
        if self.gateway.poll() is None:
            self.gateway.send_signal(signal.SIGTERM)
            try:
                self.gateway.wait(min(timeout, 10))
            except subprocess.TimeoutExpired:
                self.gateway.kill()
                self.gateway.wait(5)
        self.server.stop(timeout)

    def detach(self) -> "ServerHandle":
        self.server.detach()
        return super().detach()

    def describe_how_to_reach(self, bearer: str | None = None) -> str:
        text = self.server.describe_how_to_reach(bearer).replace(self.server.base_url, self.base_url)
        return (f"{text}\nJWT gateway at {self.base_url} (pid {self.gateway.pid}) in front of "
                f"{self.server.base_url}; send 'Authorization: Bearer <JWT>' (mint one with "
                "scripts/jwt_util.py encode '{\"team_id\": ...}' --secret-env JWT_SECRET)")


def start_behind_gateway(start: Callable[[ServerLaunch], ServerHandle], launch: ServerLaunch,
                         auth: "AuthConfig", public_port: int,
                         gateway_python: Path | None = None) -> GatewayedServerHandle:
    """Start the server on an internal port with the run's hidden key, then the gateway on `public_port`."""
    if not auth or not auth.jwt_secret or not auth.server_api_key:
        raise ServerStartError("jwt-gateway: the run has no gateway secrets (resolve auth with gateway_auth)")
    if gateway_python is None:
        from workflows.venvs import VenvError, ensure_venv

        try:
            gateway_python = Path(ensure_venv(GATEWAY_VENV).python)
        except VenvError as exc:
            raise ServerStartError(f"jwt-gateway: venv {GATEWAY_VENV}: {exc}") from None
    internal = dataclasses.replace(launch, service_port=_free_port(), api_key=auth.server_api_key)
    server = start(internal)
    upstream = f"http://127.0.0.1:{internal.service_port}"
    log_path = launch.run_dir / "gateway.log"
    env = {**os.environ, "JWT_SECRET": auth.jwt_secret, "TT_GATEWAY_UPSTREAM_KEY": auth.server_api_key,
           "PYTHONUNBUFFERED": "1"}
    command = [str(gateway_python), "-m", "gateway", "--upstream", upstream, "--host", launch.bind_host,
               "--port", str(public_port), "--upstream-api-key-env", "TT_GATEWAY_UPSTREAM_KEY",
               "--required-claims", "team_id", "--log-level", "warning"]
    from workflows.processes import die_with_parent

    try:
        with open(log_path, "ab") as log:
            gateway = subprocess.Popen(command, cwd=str(GATEWAY_DIR), env=env, stdout=log,
                                       stderr=subprocess.STDOUT, close_fds=True, start_new_session=True,
                                       preexec_fn=None if launch.outlive_orchestrator
                                       else die_with_parent(signal.SIGTERM))
    except OSError as exc:
        server.stop()
        raise ServerStartError(f"jwt-gateway: cannot start {gateway_python}: {exc}") from None

    def listening(_remaining_s: float) -> None:
        if gateway.poll() is not None:
            server.stop()
            tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            raise ServerStartError(f"jwt-gateway exited with {gateway.returncode}: {tail[0]}")
        try:
            socket.create_connection(("127.0.0.1", public_port), timeout=1).close()
        except OSError as exc:
            raise NotYet(str(exc)) from None

    try:
        retry(f"the jwt-gateway to listen on port {public_port}", listening, deadline_s=60)
    except GaveUp:
        gateway.kill()
        server.stop()
        raise ServerStartError(f"jwt-gateway did not listen on port {public_port} within 60 s (log: {log_path})")
    host = "127.0.0.1" if launch.bind_host in ("0.0.0.0", "") else launch.bind_host
    return GatewayedServerHandle(server, gateway, f"http://{host}:{public_port}", log_path)
