"""``--server-url``: the rules that turn what the user typed into the base URL every client appends to.

Why one module: the URL reaches the attach probe, readiness, the warm-up, every client workflow and
the report. If each of them parsed it, a ``file://`` URL or a gateway's base path would be mangled
differently in each place. Here it is checked once, before anything starts (exit 2 when malformed),
and normalised once.

The rules (also in the README):

- scheme ``http`` or ``https`` (none given: ``http``); every other scheme is refused;
- a host is required; no port in the URL: ``http`` takes ``--service-port`` (default 8000),
  ``https`` its default port 443;
- a base path is kept (a server behind a gateway at ``/llm``); one trailing ``/v1`` is dropped,
  because clients append ``/v1/...`` themselves; ``.``/``..`` segments are refused;
- credentials (``user:password@``) are refused, so they can never reach run.log, cli_args.json,
  the manifest or the report: the key goes in ``API_KEY`` (environment or ``.env``);
- a query string, a fragment, whitespace or control characters are refused.

Standard library only.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

SCHEMES = ("http", "https")
_HOSTNAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62}))*\.?")
_PATH = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@%/-]*")
_CREDENTIALS = re.compile(r"(://)[^/@\s]*@")
_SCHEME_PREFIX = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")


class ServerUrlError(ValueError):
    """The URL cannot name a server: one line saying which rule it breaks (never echoing a password)."""


@dataclass(frozen=True)
class ServerUrl:
    """A checked base URL: ``base`` has scheme, host and port, and the base path without ``/v1``."""

    scheme: str
    host: str
    port: int | None  # None: the scheme's default port (https without a port)
    path: str

    @property
    def base(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = f":{self.port}" if self.port is not None else ""
        return f"{self.scheme}://{host}{port}{self.path}"


def mask_credentials(text: str) -> str:
    """``scheme://user:password@host`` -> ``scheme://***@host`` anywhere in ``text`` (for error lines)."""
    return _CREDENTIALS.sub(r"\1***@", text)


def _shown(text: str) -> str:
    """The URL as it may appear in an error line: credentials masked, at most 200 characters."""
    masked = mask_credentials(text)
    return ascii(masked if len(masked) <= 200 else masked[:200] + "...")


def _split(text: str) -> SplitResult:
    if "://" not in text:
        prefix = _SCHEME_PREFIX.match(text)
        if prefix and not text[prefix.end():].split("/", 1)[0].isdigit():
            raise ServerUrlError(f"--server-url {_shown(text)}: scheme {prefix.group(1)!r} is not supported; "
                                 f"use http:// or https://")
        text = "http://" + text
    try:
        return urlsplit(text)
    except ValueError as exc:
        raise ServerUrlError(f"--server-url {_shown(text)} is malformed: {exc}") from None


def _check_host(parts: SplitResult, shown: str) -> str:
    host = parts.hostname or ""
    if not host:
        raise ServerUrlError(f"--server-url {shown} names no host (e.g. http://127.0.0.1:8000)")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if "[" in parts.netloc:
        raise ServerUrlError(f"--server-url {shown}: {host!r} is not an IPv6 address")
    if len(host) > 253 or not _HOSTNAME.fullmatch(host):
        raise ServerUrlError(f"--server-url {shown}: {ascii(host)} is not a host name or IP address")
    return host


def _check_path(path: str, shown: str) -> str:
    if not _PATH.fullmatch(path):
        raise ServerUrlError(f"--server-url {shown}: the path may hold only URL characters "
                             f"(letters, digits, -._~ and percent-escapes)")
    segments = path.split("/")
    if any(s in (".", "..") for s in segments):
        raise ServerUrlError(f"--server-url {shown}: the path must not contain '.' or '..' segments")
    path = "/".join(s for s in segments if s)
    path = f"/{path}" if path else ""
    return path[: -len("/v1")] if path.endswith("/v1") else path


def parse_server_url(text: str, service_port: int | None, flag: str = "--server-url") -> ServerUrl:
    """Check ``text`` against the rules in the module docstring; ``ServerUrlError`` names the broken one,
    and the flag it came in (``--baseline-url`` takes the same rules)."""
    try:
        return _parse(text, service_port)
    except ServerUrlError as exc:
        if flag == "--server-url":
            raise
        raise ServerUrlError(str(exc).replace("--server-url", flag)) from None


def _parse(text: str, service_port: int | None) -> ServerUrl:
    raw = text.strip()
    if not raw:
        raise ServerUrlError("--server-url is empty; give the server's base URL, e.g. http://127.0.0.1:8000")
    if any(c.isspace() or not c.isprintable() for c in raw):
        raise ServerUrlError(f"--server-url {_shown(raw)} contains whitespace or control characters")
    parts = _split(raw)
    shown = _shown(raw)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise ServerUrlError(f"--server-url {shown}: scheme {parts.scheme!r} is not supported; "
                             f"use http:// or https://")
    if "@" in parts.netloc:
        raise ServerUrlError(f"--server-url {shown} carries credentials; they would be written to the run's "
                             f"files: drop them and put the key in API_KEY (environment or .env)")
    if parts.query or parts.fragment or raw.endswith(("?", "#")):
        raise ServerUrlError(f"--server-url {shown}: a base URL takes no query string or fragment")
    host = _check_host(parts, shown)
    try:
        port = parts.port
    except ValueError:
        raise ServerUrlError(f"--server-url {shown}: the port must be an integer in 1..65535") from None
    if port == 0:
        raise ServerUrlError(f"--server-url {shown}: the port must be an integer in 1..65535")
    if port is None and scheme == "http":
        port = service_port
    return ServerUrl(scheme=scheme, host=host, port=port, path=_check_path(parts.path, shown))
