"""Readiness of a media server: ``/tt-liveness`` alive and ready, the model listed, one real item served.

Why its own wait: the media server has no completions endpoint to send a token to; what proves
it can serve is one request of the model's kind (an image, a clip, a photo, a sentence). The
wait keeps the LLM wait's rules: a deadline, the server's death noticed at once, 401 is final,
and a timeout names the URL, the stage and the last answer.
"""
from __future__ import annotations

import time
from typing import Callable

from media_clients.transport import MediaHttp
from media_clients.probe import one_item
from media_clients.workloads import describe
from workflows.readiness import ReadinessTimeout, ReadyInfo
from workflows.servers.base import ServerHandle, ServerStartError
from workflows.servers.probe import check_auth

STAGES = ("liveness", "models", "one_item")


def wait_media_ready(handle: ServerHandle, kind: str, *, bearer: str | None, timeout_s: float,
                     poll_interval_s: float = 1.0, progress: Callable[[str], None] | None = None) -> ReadyInfo:
    """Poll /tt-liveness -> /v1/models -> one item of ``kind`` until all pass (or raise)."""
    http = MediaHttp(handle.base_url, bearer)
    start = time.monotonic()
    stages: dict[str, float] = {}
    models: list[str] = []
    last_note, next_progress = "", start
    while True:
        if not handle.is_alive():
            raise handle.died(f"the {handle.kind} media server")
        elapsed = time.monotonic() - start
        if elapsed > timeout_s:
            stage = next(s for s in STAGES if s not in stages)
            raise ReadinessTimeout(f"wait_ready: {handle.base_url} not ready after {timeout_s:g} s "
                                   f"(stage {stage}: {last_note or 'no answer'}); log: {handle.log_path}")
        per_request = max(1.0, min(600.0, timeout_s - elapsed))
        if "liveness" not in stages:
            answer = http.get("/tt-liveness", timeout_s=min(30.0, per_request))
            last_note = f"/tt-liveness {describe(answer)}"
            if answer.ok and answer.json().get("model_ready", True):
                stages["liveness"] = time.monotonic() - start
                continue
        elif "models" not in stages:
            answer = http.get("/v1/models", timeout_s=min(30.0, per_request))
            last_note = f"/v1/models {describe(answer)}"
            if answer.status is not None:
                check_auth(answer.status, answer.url, bearer)
            if answer.ok:
                models = [m.get("id") for m in answer.json().get("data", [])]
                if handle.served_model_name not in models:
                    raise ServerStartError(f"the media server at {handle.base_url} serves {models}, "
                                           f"not {handle.served_model_name!r}")
                stages["models"] = time.monotonic() - start
                continue
        else:
            answer = one_item(http, kind, handle.served_model_name, per_request)
            last_note = f"one {kind} request: {describe(answer)}"
            if answer.status is not None:
                check_auth(answer.status, answer.url, bearer)
            if answer.ok:
                stages["one_item"] = time.monotonic() - start
                return ReadyInfo(elapsed_s=stages["one_item"], models=models, stages_s=stages)
            if answer.status is not None and 400 <= answer.status < 500 and answer.status not in (404, 408, 429):
                raise ServerStartError(f"the media server refused the one-{kind} readiness request: {last_note}")
        if progress and time.monotonic() >= next_progress:
            progress(f"waiting for {handle.base_url} ({time.monotonic() - start:.0f}s; {last_note or 'starting'})")
            next_progress = time.monotonic() + 10.0
        time.sleep(poll_interval_s)
