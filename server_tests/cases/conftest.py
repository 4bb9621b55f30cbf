"""Fixtures of the API conformance suite.

The server under test comes from the environment the ``tests`` workflow sets (the client workflow
contract): ``TT_TEST_SERVER_URL``, ``OPENAI_API_KEY`` (absent when the server runs without auth),
``TT_SERVED_MODEL_NAME``, ``TT_TEST_ENGINE`` (decides skips, see ``server_tests/capabilities.py``).

Every request carries ``x-request-id: tt-tests/<case>/<k>`` so a server log line can be joined to
the case that sent it.
"""
from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass, field

import httpx
import pytest

from server_tests.capabilities import unsupported

REQUEST_TIMEOUT_S = float(os.environ.get("TT_TEST_REQUEST_TIMEOUT_S", "120"))


class ApiError(AssertionError):
    """The server answered a request that should have succeeded with a non-200 status."""


@dataclass
class Stream:
    """A parsed server-sent-event response: the JSON events and whether it ended with [DONE]."""

    events: list[dict] = field(default_factory=list)
    done: bool = False

    def texts(self, chat: bool) -> dict[int, str]:
        """choice index -> concatenated text of its deltas."""
        out: dict[int, str] = {}
        for ev in self.events:
            for choice in ev.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content") if chat else choice.get("text")
                out[choice.get("index", 0)] = out.get(choice.get("index", 0), "") + (piece or "")
        return out

    def finish_reasons(self) -> dict[int, str]:
        return {c.get("index", 0): c["finish_reason"] for ev in self.events for c in ev.get("choices") or []
                if c.get("finish_reason")}

    @property
    def usage(self) -> dict | None:
        found = [ev["usage"] for ev in self.events if ev.get("usage")]
        return found[-1] if found else None


@dataclass
class Api:
    """A thin OpenAI client for one case: names its requests after the case, asserts nothing itself."""

    base_url: str
    model: str
    api_key: str | None
    case: str
    client: httpx.Client
    _seq: itertools.count = field(default_factory=itertools.count)

    def headers(self, bearer: str | None | bool = True) -> dict[str, str]:
        h = {"x-request-id": f"tt-tests/{self.case}/{next(self._seq)}"}
        token = self.api_key if bearer is True else (bearer or None)
        if token:
            h["Authorization"] = f"Bearer {token}"
        return h

    def post(self, path: str, body: dict | None = None, *, raw: bytes | None = None,
             bearer: str | None | bool = True) -> httpx.Response:
        headers = self.headers(bearer)
        if raw is not None:
            headers["Content-Type"] = "application/json"
            return self.client.post(self.base_url + path, content=raw, headers=headers)
        return self.client.post(self.base_url + path, json=body, headers=headers)

    def get(self, path: str, *, bearer: str | None | bool = True) -> httpx.Response:
        return self.client.get(self.base_url + path, headers=self.headers(bearer))

    def ok(self, path: str, **body) -> dict:
        """POST with the served model; the parsed JSON of a 200 answer, else ApiError with the body."""
        resp = self.post(path, {"model": self.model, **body})
        if resp.status_code != 200:
            raise ApiError(f"POST {path} -> HTTP {resp.status_code}: {resp.text[:300]}")
        return resp.json()

    def completion(self, **body) -> dict:
        return self.ok("/v1/completions", **body)

    def chat(self, **body) -> dict:
        return self.ok("/v1/chat/completions", **body)

    def stream(self, path: str, **body) -> Stream:
        out = Stream()
        with self.client.stream("POST", self.base_url + path, json={"model": self.model, **body, "stream": True},
                                headers=self.headers()) as resp:
            if resp.status_code != 200:
                resp.read()
                raise ApiError(f"POST {path} (stream) -> HTTP {resp.status_code}: {resp.text[:300]}")
            for line in resp.iter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    out.done = True
                    continue
                assert not out.done, "event after [DONE]"
                out.events.append(json.loads(data))
        return out


def _setting(name: str, required: bool = True) -> str | None:
    value = os.environ.get(name) or None
    if required and not value:
        pytest.exit(f"{name} is not set: run the suite through server_tests/run_tests.py", returncode=4)
    return value


@pytest.fixture(scope="session")
def http_client():
    with httpx.Client(timeout=REQUEST_TIMEOUT_S) as client:
        yield client


@pytest.fixture
def api(request, http_client) -> Api:
    return Api(base_url=_setting("TT_TEST_SERVER_URL").rstrip("/"), model=_setting("TT_SERVED_MODEL_NAME"),
               api_key=_setting("OPENAI_API_KEY", required=False), case=request.node.name, client=http_client)


def pytest_configure(config):
    """SIGTERM (run.py stopping the workflow) ends the session like Ctrl-C: pytest then still
    writes the JUnit XML of the cases that ran."""
    import signal

    def _as_keyboard_interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, _as_keyboard_interrupt)


def pytest_collection_modifyitems(config, items):
    """Attach each case's markers as a JUnit property (the typed record lists them)."""
    for item in items:
        names = sorted({m.name for m in item.iter_markers()} - {"parametrize", "feature"})
        feats = [m.args[0] for m in item.iter_markers("feature")]
        item.user_properties.append(("markers", ",".join(names + [f"feature:{f}" for f in feats])))


def pytest_runtest_setup(item):
    """A case needing a feature the engine does not offer is skipped with the reason."""
    lacking = unsupported(os.environ.get("TT_TEST_ENGINE"), os.environ.get("TT_TEST_UNSUPPORTED"))
    for mark in item.iter_markers("feature"):
        if mark.args[0] in lacking:
            pytest.skip(f"engine {os.environ.get('TT_TEST_ENGINE') or '?'} does not support "
                        f"{mark.args[0]}: {lacking[mark.args[0]]}")
