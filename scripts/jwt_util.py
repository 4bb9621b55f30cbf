#!/usr/bin/env python3
"""Mint and inspect HS256 JWTs for the JWT gateway.

    ./scripts/jwt_util.py --secret ${JWT_SECRET} encode '{"team_id": "tenstorrent", "token_id": "debug-test"}'
    ./scripts/jwt_util.py encode '{"team_id": "tenstorrent"}' --secret-env JWT_SECRET --expires-in 3600
    ./scripts/jwt_util.py decode TOKEN --secret-env JWT_SECRET                # verifies, prints claims

``--secret``/``--secret-env`` go before or after the command (the documented form puts ``--secret``
first). ``encode`` adds ``iat`` and, unless ``--expires-in 0``, ``exp`` (default one hour). The token
is the only line on stdout (so ``TOKEN=$(...)`` works); errors go to stderr, one line, exit code 2.
``--secret-env`` (default ``JWT_SECRET``) keeps the secret out of the process list and shell history.
Stdlib only (HS256 is HMAC-SHA256 over base64url JSON), so any python3 runs it directly.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import sys
import time

HEADER = {"alg": "HS256", "typ": "JWT"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"jwt_util: {message}", file=sys.stderr)
        raise SystemExit(2)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _json(data: dict) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


def _secret(ns: argparse.Namespace) -> str:
    secret = ns.secret if ns.secret is not None else ns.top_secret
    name = ns.secret_env or ns.top_secret_env or "JWT_SECRET"
    secret = secret if secret is not None else os.environ.get(name, "")
    if not secret:
        raise ValueError(f"no secret: pass --secret or set {name} (the variable --secret-env names)")
    return secret


def _sign(signing_input: str, secret: str) -> str:
    return _b64(hmac.new(secret.encode(), signing_input.encode("ascii"), hashlib.sha256).digest())


def encode(ns: argparse.Namespace) -> str:
    try:
        claims = json.loads(ns.claims)
    except json.JSONDecodeError as exc:
        raise ValueError(f"claims are not valid JSON: {exc}") from None
    if not isinstance(claims, dict):
        raise ValueError("claims must be a JSON object, e.g. '{\"team_id\": \"tenstorrent\"}'")
    if ns.expires_in < 0:
        raise ValueError("--expires-in must be >= 0 (0: no expiry)")
    now = int(time.time())
    claims.setdefault("iat", now)
    if ns.expires_in and "exp" not in claims:  # an explicit exp in the claims wins
        claims["exp"] = now + int(ns.expires_in)
    if ns.not_before_in and "nbf" not in claims:
        claims["nbf"] = now + int(ns.not_before_in)
    signing_input = f"{_b64(_json(HEADER))}.{_b64(_json(claims))}"
    return f"{signing_input}.{_sign(signing_input, _secret(ns))}"


def decode(ns: argparse.Namespace) -> str:
    parts = ns.token.strip().split(".")
    if len(parts) != 3:
        raise ValueError("token rejected: not a JWT (three base64url parts separated by '.')")
    try:
        header, claims = json.loads(_unb64(parts[0])), json.loads(_unb64(parts[1]))
    except (ValueError, UnicodeDecodeError):
        raise ValueError("token rejected: its header or claims are not base64url JSON") from None
    if not isinstance(header, dict) or header.get("alg") != "HS256" or not isinstance(claims, dict):
        raise ValueError(f"token rejected: algorithm {header.get('alg') if isinstance(header, dict) else None!r} "
                         "is not HS256")
    if not hmac.compare_digest(_sign(f"{parts[0]}.{parts[1]}", _secret(ns)), parts[2]):
        raise ValueError("token rejected: the signature does not match this secret")
    now = time.time()
    if isinstance(claims.get("exp"), (int, float)) and claims["exp"] <= now:
        raise ValueError("token rejected: it expired")
    if isinstance(claims.get("nbf"), (int, float)) and claims["nbf"] > now:
        raise ValueError("token rejected: it is not valid yet (nbf)")
    return json.dumps(claims, sort_keys=True)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="jwt_util.py", description="Mint or verify HS256 JWTs for the JWT gateway")
    parser.add_argument("--secret", dest="top_secret", default=None, help="the HS256 secret (prefer --secret-env)")
    parser.add_argument("--secret-env", dest="top_secret_env", default=None,
                        help="variable holding the secret (default JWT_SECRET)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    enc = sub.add_parser("encode", help="mint a token from JSON claims")
    enc.add_argument("claims", help="JSON object of claims, e.g. '{\"team_id\": \"tenstorrent\"}'")
    enc.add_argument("--expires-in", type=int, default=3600,
                     help="seconds until exp (default 3600; 0: no exp claim)")
    enc.add_argument("--not-before-in", type=int, default=0, help="seconds until nbf (default: none)")
    dec = sub.add_parser("decode", help="verify a token and print its claims")
    dec.add_argument("token")
    for sp in (enc, dec):  # also after the command; these win over the ones before it
        sp.add_argument("--secret", default=None, help="the HS256 secret (prefer --secret-env)")
        sp.add_argument("--secret-env", default=None, help="variable holding the secret (default JWT_SECRET)")
    return parser


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    try:
        print(encode(ns) if ns.command == "encode" else decode(ns))
    except ValueError as exc:
        print(f"jwt_util: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
