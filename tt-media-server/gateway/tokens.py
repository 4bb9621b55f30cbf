"""JWT verification for the gateway: HS256 signature, time claims and required claims.

Why a module of its own: the rules (which algorithms, which claims, how much clock skew) are
the security contract of the gateway, kept in one small place that the tests exercise directly.
PyJWT does the cryptography; this module decides what a valid token is and says, in one line,
why a token is not (the 401 body carries that line; the token itself is never logged).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import jwt

ALGORITHMS = ("HS256",)


@dataclasses.dataclass(frozen=True)
class TokenPolicy:
    """What a token must satisfy.

    secret: the HS256 key.
    required_claims: claims that must be present (e.g. team_id).
    require_exp: refuse tokens without an expiry.
    leeway_s: clock skew allowed for exp / nbf / iat, in seconds.
    audience / issuer: checked when set.
    """

    secret: str
    required_claims: tuple[str, ...] = ("team_id",)
    require_exp: bool = False
    leeway_s: float = 0.0
    audience: str | None = None
    issuer: str | None = None


class TokenRejected(Exception):
    """A token that does not pass; str() is the reason shown to the client."""


def bearer_token(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header; TokenRejected otherwise."""
    if not authorization:
        raise TokenRejected("missing bearer token: send 'Authorization: Bearer <JWT>'")
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise TokenRejected("the Authorization header must be 'Bearer <JWT>'")
    return token.strip()


def verify(token: str, policy: TokenPolicy) -> dict[str, Any]:
    """The token's claims when it is valid under `policy`; TokenRejected with the reason otherwise."""
    required = list(policy.required_claims) + (["exp"] if policy.require_exp else [])
    options = {"require": required, "verify_signature": True, "verify_exp": True,
               "verify_nbf": True, "verify_iat": True, "verify_aud": policy.audience is not None,
               "verify_iss": policy.issuer is not None}
    try:
        return jwt.decode(token, policy.secret, algorithms=list(ALGORITHMS), options=options,
                          leeway=policy.leeway_s, audience=policy.audience, issuer=policy.issuer)
    except jwt.ExpiredSignatureError:
        raise TokenRejected("token expired") from None
    except jwt.ImmatureSignatureError:
        raise TokenRejected("token not yet valid (nbf/iat in the future)") from None
    except jwt.MissingRequiredClaimError as exc:
        raise TokenRejected(f"token lacks the required claim {exc.claim!r}") from None
    except jwt.InvalidSignatureError:
        raise TokenRejected("token signature is invalid") from None
    except jwt.InvalidAlgorithmError:
        raise TokenRejected("token algorithm is not allowed (HS256 only)") from None
    except jwt.InvalidAudienceError:
        raise TokenRejected("token audience is not accepted") from None
    except jwt.InvalidIssuerError:
        raise TokenRejected("token issuer is not accepted") from None
    except jwt.DecodeError as exc:
        raise TokenRejected(f"token is malformed: {exc}") from None
    except jwt.InvalidTokenError as exc:
        raise TokenRejected(f"token is invalid: {type(exc).__name__}") from None
