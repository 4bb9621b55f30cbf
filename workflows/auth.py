"""Secrets and the bearer token shared by the server we launch and every client workflow.

Why this module exists: a workflow's measurements are only meaningful if the server it talked to
really enforces the same auth a production deployment would, and a secret must never leak into a
command line, a log or a saved JSON file.

Resolution order (first match wins; the process environment overrides `.env`):

1. ``--no-auth``: no bearer is sent and the servers we launch run without an API key.
2. ``API_KEY`` or ``VLLM_API_KEY``: used *as is* as the bearer; a server we launch enforces it.
3. ``JWT_SECRET``: the bearer is an HS256 JWT ``{"team_id": "tenstorrent", "token_id": "debug-test"}``
   signed with it (the claims the upstream images expect); the server we launch enforces that token.
4. Nothing configured:
   - a server we launch gets a random per-run key (``secrets.token_urlsafe``), so auth is still
     enforced and a stray process on the host cannot use the server; the key is printed only by
     ``--workflow server`` (which must tell the user how to reach the server);
   - an external server gets no bearer at all (``external=True``), because we cannot know its key.
"""

from __future__ import annotations

import functools
import io
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from dotenv import dotenv_values

JWT_CLAIMS = {"team_id": "tenstorrent", "token_id": "debug-test"}

# Variables whose values are secrets wherever they appear: the one list every module uses.
# The server itself needs these (gated weights and tokenizers): they reach it, never a command line.
SERVER_SECRET_NAMES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
# Client/server auth: the server we launch gets its key explicitly, never by inheritance.
CLIENT_AUTH_NAMES = ("API_KEY", "VLLM_API_KEY", "OPENAI_API_KEY", "JWT_SECRET", "AUTHORIZATION")
SECRET_ENV_NAMES = SERVER_SECRET_NAMES + CLIENT_AUTH_NAMES
_SECRET_NAME_RE = re.compile(r"(SECRET|TOKEN|PASSWORD|API_KEY)", re.IGNORECASE)
REDACTED = "***REDACTED***"


@dataclass(frozen=True)
class AuthConfig:
    """What the clients send (``bearer``) and what a server we launch enforces (``server_api_key``)."""

    bearer: str | None
    server_api_key: str | None
    source: str  # "no-auth", "API_KEY", "VLLM_API_KEY", "JWT_SECRET", "generated", "none"
    secrets: tuple[str, ...] = field(default=(), repr=False)
    jwt_secret: str | None = field(default=None, repr=False)  # --auth jwt-gateway: what the gateway verifies with

    def __repr__(self) -> str:  # never show the token itself
        return f"AuthConfig(source={self.source!r}, bearer={'set' if self.bearer else None})"


def make_jwt(secret: str) -> str:
    """HS256 JWT with the upstream claims (no exp/iat: the server compares the string, never decodes it)."""
    import warnings

    import jwt  # PyJWT, in the orchestrator venv

    with warnings.catch_warnings():  # PyJWT >= 2.10 warns on keys < 32 bytes; upstream secrets are often shorter
        warnings.simplefilter("ignore")
        token = jwt.encode(dict(JWT_CLAIMS), secret, algorithm="HS256")
    return token if isinstance(token, str) else token.decode()


class DotenvError(ValueError):
    """``.env`` exists but cannot be used (not UTF-8 text, unreadable): one line naming the file."""


def load_dotenv(path: Path) -> dict[str, str]:
    """``.env`` as python-dotenv reads it: the syntax the media server's settings (pydantic-settings)
    and docker compose accept too, so one file means the same to every reader.

    ``#`` comments (also after a value), blank lines, ``export`` prefixes, single or double quotes
    (escapes inside double quotes) are understood; interpolation is off, so a secret holding ``$``
    is taken as written. A name without ``=`` is ignored; a line python-dotenv cannot parse is
    skipped with its warning on stderr. A missing file is an empty mapping; one that cannot be read
    as text, or holds a NUL byte, raises ``DotenvError`` (a secret silently dropped would make the
    server refuse every request, far from the cause).
    """
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[:exc.start].count(b"\n") + 1
        raise DotenvError(f"{path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} on line {line})") from None
    except OSError as exc:
        raise DotenvError(f"{path} cannot be read: {exc.strerror or exc}") from None
    if "\0" in text:
        raise DotenvError(f"{path} line {text[:text.index(chr(0))].count(chr(10)) + 1} holds a NUL byte")
    return dict(_parse_dotenv(text))


@functools.lru_cache(maxsize=8)
def _parse_dotenv(text: str) -> tuple[tuple[str, str], ...]:
    """One parse per file content: a run reads ``.env`` in several places, its warnings print once."""
    values = dotenv_values(stream=io.StringIO(text), interpolate=False)
    return tuple((key, value) for key, value in values.items() if key and value is not None)


def _lookup(name: str, env: Mapping[str, str], dotenv: Mapping[str, str]) -> str | None:
    value = env.get(name) or dotenv.get(name)
    return value or None


def resolve_auth(no_auth: bool, env: Mapping[str, str], dotenv_path: Path, *,
                 external: bool = False) -> AuthConfig:
    """Decide the bearer for this run (see the module docstring for the order).

    ``external=True``: the server is not ours, so with nothing configured no bearer is sent.
    """
    if no_auth:
        return AuthConfig(bearer=None, server_api_key=None, source="no-auth")
    dotenv = load_dotenv(dotenv_path)
    for name in ("API_KEY", "VLLM_API_KEY"):
        key = _lookup(name, env, dotenv)
        if key:
            return AuthConfig(bearer=key, server_api_key=key, source=name, secrets=(key,))
    jwt_secret = _lookup("JWT_SECRET", env, dotenv)
    if jwt_secret:
        token = make_jwt(jwt_secret)
        return AuthConfig(bearer=token, server_api_key=token, source="JWT_SECRET", secrets=(token, jwt_secret))
    if external:
        return AuthConfig(bearer=None, server_api_key=None, source="none")
    key = secrets.token_urlsafe(32)
    return AuthConfig(bearer=key, server_api_key=key, source="generated", secrets=(key,))


class Redactor:
    """Replaces every known secret value with ``***REDACTED***`` in text and JSON-like data.

    Values shorter than ``min_len`` are ignored: redacting "1" or "yes" would corrupt every log.
    """

    def __init__(self, values: Iterable[str] = (), min_len: int = 6):
        self.min_len = min_len
        self._values: set[str] = set()
        for value in values:
            self.add(value)

    @classmethod
    def from_env(cls, env: Mapping[str, str], auth: AuthConfig | None = None,
                 dotenv_path: Path | None = None) -> "Redactor":
        """Collect secrets from well-known names, names that look secret, ``.env`` and the auth config."""
        red = cls()
        sources = [env] + ([load_dotenv(dotenv_path)] if dotenv_path else [])
        for source in sources:
            for name, value in source.items():
                if name in SECRET_ENV_NAMES or _SECRET_NAME_RE.search(name):
                    red.add(value)
        if auth is not None:
            for value in auth.secrets:
                red.add(value)
            if auth.bearer:
                red.add(auth.bearer)
        return red

    def add(self, value: str | None) -> None:
        if value and isinstance(value, str) and len(value.strip()) >= self.min_len:
            self._values.add(value.strip())

    def __len__(self) -> int:
        return len(self._values)

    def redact(self, text: str) -> str:
        if not text or not self._values:
            return text
        for value in sorted(self._values, key=len, reverse=True):  # longest first: a JWT before its parts
            if value in text:
                text = text.replace(value, REDACTED)
        return text

    def redact_obj(self, obj: Any) -> Any:
        """Deep copy of a JSON-like structure with every string redacted (for saved JSON)."""
        if isinstance(obj, str):
            return self.redact(obj)
        if isinstance(obj, dict):
            return {self.redact(k) if isinstance(k, str) else k: self.redact_obj(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.redact_obj(v) for v in obj)
        return obj
