"""HTTP checks of a server that exists: which models it serves, and whether our bearer is accepted.

Why inside ``servers/``: attaching an external server needs them, and readiness (the layer above
the backends) needs them too. Keeping them here means the backends never import readiness, so
the two packages do not import each other.
"""

from __future__ import annotations

import requests

from contracts.openai_http import bearer_headers
from workflows.servers.base import ServerStartError


class AuthRejected(ServerStartError):
    """The server answered 401/403 to our bearer: waiting longer cannot help."""


def check_auth(status_code: int, url: str, bearer: str | None) -> None:
    if status_code in (401, 403):
        hint = "no bearer was sent (server needs API_KEY/JWT_SECRET, or start it with --no-auth)" if not bearer \
            else "the bearer does not match the server's key (check API_KEY/JWT_SECRET)"
        raise AuthRejected(f"{url} answered HTTP {status_code}: {hint}")


def _connection_failure(exc: requests.ConnectionError) -> str:
    """Why a connection failed, in words: an unknown host name reads differently from a closed port."""
    text = str(exc)
    if "NameResolution" in text or "Name or service not known" in text or "resolve" in text:
        return "the host name does not resolve"
    if "refused" in text.lower():
        return "connection refused"
    if "timed out" in text.lower():
        return "the connection timed out"
    return "connection refused or reset"


def list_models(base_url: str, bearer: str | None, timeout: float = 10.0) -> list[str]:
    url = f"{base_url.rstrip('/')}/v1/models"
    resp = requests.get(url, headers=bearer_headers(bearer), timeout=timeout)
    check_auth(resp.status_code, url, bearer)
    resp.raise_for_status()
    return [m.get("id") for m in resp.json().get("data", [])]


def check_served_model(base_url: str, expected_name: str, bearer: str | None, timeout: float = 10.0) -> list[str]:
    """Raise one clear ServerStartError unless ``base_url`` is reachable and serves ``expected_name``."""
    try:
        models = list_models(base_url, bearer, timeout)
    except requests.ConnectionError as exc:
        raise ServerStartError(f"cannot reach the server at {base_url}: {_connection_failure(exc)} "
                               f"(is it running? check --server-url/--service-port)") from None
    except requests.Timeout:
        raise ServerStartError(f"attach: {base_url}/v1/models sent nothing for {timeout:g} s "
                               f"(the server accepts connections but does not answer)") from None
    except requests.HTTPError as exc:
        raise ServerStartError(f"{base_url}/v1/models answered HTTP {exc.response.status_code}") from None
    except (requests.exceptions.JSONDecodeError, AttributeError, TypeError):
        raise ServerStartError(f"{base_url}/v1/models did not return a model list in JSON: is this an "
                               f"OpenAI-compatible server?") from None
    except requests.RequestException as exc:  # an invalid URL or a broken TLS handshake: still one line
        raise ServerStartError(f"cannot reach the server at {base_url}: {type(exc).__name__}") from None
    if expected_name not in models:
        raise ServerStartError(f"the server at {base_url} serves {models}, not {expected_name!r}: "
                               f"point --server-url at a server for this model")
    return models
