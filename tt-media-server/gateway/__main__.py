"""``python -m gateway``: run the JWT gateway in front of an upstream HTTP server.

The HS256 secret is read from an environment variable (``--secret-env``, default ``JWT_SECRET``),
never from the command line (which any local user can read). Exit code 2 on bad input (no
secret, a bad upstream URL), with one line saying why.

Beside a media server started with its defaults (``uvicorn main:app --port 8000``), the defaults
are enough: the gateway listens on 8080 and forwards to ``http://127.0.0.1:8000`` (``DEFAULT_UPSTREAM``).
From ``tt-media-server/``:

    JWT_SECRET=... python -m gateway      # with API_KEY set (the server's key), it is sent upstream
    JWT_SECRET=... python -m gateway --upstream http://127.0.0.1:8001 --port 8000 \\
        --required-claims team_id --upstream-api-key-env UPSTREAM_API_KEY
"""
from __future__ import annotations

import argparse
import logging
import math
import os
import re
import sys
from urllib.parse import urlsplit

from gateway.app import DEFAULT_OPEN_PATHS, Gateway
from gateway.tokens import TokenPolicy

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
# The media server's own default address (uvicorn main:app --port 8000), so the gateway runs beside it
# with no flags; the gateway's default port is another one, so the two defaults never collide.
DEFAULT_UPSTREAM = "http://127.0.0.1:8000"
DEFAULT_PORT = 8080


class _Parser(argparse.ArgumentParser):
    """argparse's errors as one line (``gateway: error: ...``) and exit 2, like every other check here."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise SystemExit(f"gateway: error: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m gateway", description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", default=DEFAULT_UPSTREAM,
                        help=f"base URL of the server behind the gateway (default {DEFAULT_UPSTREAM}: the "
                             "media server's default address)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT})")
    parser.add_argument("--secret-env", default="JWT_SECRET",
                        help="environment variable holding the HS256 secret (default JWT_SECRET)")
    parser.add_argument("--required-claims", default="team_id",
                        help="comma list of claims every token must carry (default team_id)")
    parser.add_argument("--require-exp", action="store_true", help="refuse tokens without an expiry")
    parser.add_argument("--leeway", type=float, default=0.0, help="clock skew allowed, seconds")
    parser.add_argument("--audience", default=None)
    parser.add_argument("--issuer", default=None)
    parser.add_argument("--open-paths", default=",".join(DEFAULT_OPEN_PATHS),
                        help="comma list of paths that need no token (probes)")
    parser.add_argument("--upstream-api-key-env", default=None,
                        help="environment variable holding the upstream's own bearer key, which replaces "
                             "the client's Authorization (default: API_KEY when it is set, the media "
                             "server's key; else the client's header is forwarded)")
    parser.add_argument("--read-timeout", type=float, default=600.0,
                        help="seconds the upstream may stay silent mid-response")
    parser.add_argument("--max-in-flight", type=int, default=512,
                        help="requests forwarded at once; one more is answered 503 'overloaded' with "
                             "Retry-After: 1 (default 512)")
    parser.add_argument("--log-level", default="warning", help="one of: " + ", ".join(LOG_LEVELS))
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def check_settings(ns: argparse.Namespace) -> None:
    """Ranges argparse's types do not check: each bad value stops start-up with one line naming its flag."""
    if not 0 <= ns.port <= 65535:
        raise SystemExit(f"gateway: --port {ns.port}: must be in 0..65535 (0: any free port)")
    if not ns.host.strip() or any(c.isspace() or not c.isprintable() for c in ns.host):
        raise SystemExit(f"gateway: --host {ns.host!r}: must be an address or host name")
    if not math.isfinite(ns.leeway) or ns.leeway < 0:
        raise SystemExit(f"gateway: --leeway {ns.leeway}: must be a finite number of seconds >= 0")
    if not math.isfinite(ns.read_timeout) or ns.read_timeout <= 0:
        raise SystemExit(f"gateway: --read-timeout {ns.read_timeout}: must be a finite number of seconds > 0")
    if ns.max_in_flight < 1:
        raise SystemExit(f"gateway: --max-in-flight {ns.max_in_flight}: must be at least 1")
    if ns.log_level.lower() not in LOG_LEVELS:
        raise SystemExit(f"gateway: --log-level {ns.log_level!r}: must be one of {', '.join(LOG_LEVELS)}")
    bad_paths = [p for p in ns.open_paths.split(",") if p.strip() and not p.strip().startswith("/")]
    if bad_paths:
        raise SystemExit(f"gateway: --open-paths {bad_paths[0]!r}: each path starts with '/'")
    for flag, name in (("--secret-env", ns.secret_env), ("--upstream-api-key-env", ns.upstream_api_key_env)):
        if name is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise SystemExit(f"gateway: {flag} {name!r}: must be an environment variable name")


def upstream_key_env(ns: argparse.Namespace) -> str | None:
    """The variable holding the key the gateway sends upstream in place of the client's JWT, or None.

    ``--upstream-api-key-env`` when given; else ``API_KEY`` when set, since that is the media server's own
    key: the documented ``JWT_SECRET=... python -m gateway`` beside a server started with ``API_KEY`` then
    works with no flag (forwarding the client's JWT, which the server cannot verify, would answer 401)."""
    if ns.upstream_api_key_env:
        if not os.environ.get(ns.upstream_api_key_env, ""):
            raise SystemExit(f"gateway: {ns.upstream_api_key_env} (--upstream-api-key-env) is empty")
        return ns.upstream_api_key_env
    return "API_KEY" if os.environ.get("API_KEY", "") else None


def upstream_auth_line(key_env: str | None) -> str:
    """The start-up line saying what the upstream is sent as Authorization (never the key itself)."""
    if key_env is None:
        return ("gateway: no API_KEY (or --upstream-api-key-env): each client's Authorization is forwarded "
                "upstream as it is")
    return f"gateway: the upstream is sent the key in {key_env} in place of each client's token"


def build(ns: argparse.Namespace) -> Gateway:
    check_settings(ns)
    secret = os.environ.get(ns.secret_env, "")
    if not secret:
        raise SystemExit(f"gateway: {ns.secret_env} (--secret-env) is empty; set the HS256 secret there")
    try:
        parts = urlsplit(ns.upstream)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        raise SystemExit(f"gateway: --upstream {ns.upstream!r} is not an http(s) URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SystemExit(f"gateway: --upstream {ns.upstream!r} is not an http(s) URL")
    upstream_port = parts.port or (443 if parts.scheme == "https" else 80)
    if upstream_port == ns.port and parts.hostname in (ns.host, "127.0.0.1", "localhost", "0.0.0.0"):
        raise SystemExit(f"gateway: --upstream {ns.upstream} is the gateway's own address (--port {ns.port}); "
                         "give the server and the gateway different ports")
    key_env = upstream_key_env(ns)
    upstream_auth = f"Bearer {os.environ[key_env]}" if key_env else None
    claims = tuple(c.strip() for c in ns.required_claims.split(",") if c.strip())
    policy = TokenPolicy(secret=secret, required_claims=claims, require_exp=ns.require_exp,
                         leeway_s=ns.leeway, audience=ns.audience, issuer=ns.issuer)
    open_paths = tuple(p.strip() for p in ns.open_paths.split(",") if p.strip())
    return Gateway(ns.upstream, policy, open_paths=open_paths, upstream_authorization=upstream_auth,
                   read_timeout_s=ns.read_timeout, max_in_flight=ns.max_in_flight)


def main(argv: list[str] | None = None) -> int:
    try:
        ns = parse_args(argv)
        app = build(ns)
    except SystemExit as exc:
        if not isinstance(exc.code, str):  # --help: argparse printed it and exits 0
            return exc.code or 0
        print(exc, file=sys.stderr)
        return 2
    import uvicorn

    logging.basicConfig(level=ns.log_level.upper(), format="%(asctime)s gateway %(levelname)s %(message)s")
    print(f"gateway: listening on http://{ns.host}:{ns.port} -> {ns.upstream} "
          f"(HS256, required claims: {', '.join(app.policy.required_claims) or 'none'})", flush=True)
    print(upstream_auth_line(upstream_key_env(ns)), flush=True)
    uvicorn.run(app, host=ns.host, port=ns.port, log_level=ns.log_level.lower(), access_log=False,
                lifespan="on", timeout_graceful_shutdown=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
