#!/usr/bin/env python3
"""Mint and inspect HS256 JWTs for the JWT gateway.

    python3 scripts/jwt_util.py encode '{"team_id": "tenstorrent"}' --secret-env JWT_SECRET --expires-in 3600
    python3 scripts/jwt_util.py encode '{"team_id": "t"}' --secret s3cret          # prints the token
    python3 scripts/jwt_util.py decode TOKEN --secret-env JWT_SECRET                # verifies, prints claims

``encode`` adds ``iat`` and, unless ``--expires-in 0``, ``exp`` (default one hour). The token is the
only line on stdout (so ``TOKEN=$(...)`` works); errors go to stderr with exit code 2.
``--secret`` is accepted for convenience, but ``--secret-env`` keeps the secret out of the
process list and shell history. Needs PyJWT (in the dev and media-server venvs).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings


def _secret(ns: argparse.Namespace) -> str:
    secret = ns.secret if ns.secret is not None else os.environ.get(ns.secret_env or "JWT_SECRET", "")
    if not secret:
        raise ValueError("no secret: pass --secret or set the variable named by --secret-env "
                         "(default JWT_SECRET)")
    return secret


def encode(ns: argparse.Namespace) -> str:
    import jwt

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
    with warnings.catch_warnings():  # PyJWT warns on short HMAC keys; the caller chose the key
        warnings.simplefilter("ignore")
        token = jwt.encode(claims, _secret(ns), algorithm="HS256")
    return token if isinstance(token, str) else token.decode()


def decode(ns: argparse.Namespace) -> str:
    import jwt

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            claims = jwt.decode(ns.token, _secret(ns), algorithms=["HS256"])
        except jwt.InvalidTokenError as exc:
            raise ValueError(f"token rejected: {type(exc).__name__}: {exc}") from None
    return json.dumps(claims, sort_keys=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Mint or verify HS256 JWTs for the JWT gateway")
    sub = parser.add_subparsers(dest="command", required=True)
    enc = sub.add_parser("encode", help="mint a token from JSON claims")
    enc.add_argument("claims", help="JSON object of claims, e.g. '{\"team_id\": \"tenstorrent\"}'")
    enc.add_argument("--expires-in", type=int, default=3600,
                     help="seconds until exp (default 3600; 0: no exp claim)")
    enc.add_argument("--not-before-in", type=int, default=0, help="seconds until nbf (default: none)")
    dec = sub.add_parser("decode", help="verify a token and print its claims")
    dec.add_argument("token")
    for sp in (enc, dec):
        sp.add_argument("--secret", default=None, help="the HS256 secret (prefer --secret-env)")
        sp.add_argument("--secret-env", default="JWT_SECRET", help="variable holding the secret")
    ns = parser.parse_args(argv)
    try:
        print(encode(ns) if ns.command == "encode" else decode(ns))
    except ValueError as exc:
        print(f"jwt_util: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError:
        print("jwt_util: PyJWT is not installed here; use .workflow_venvs/dev/bin/python", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
