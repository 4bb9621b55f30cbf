"""Readiness of a media server: ``/tt-liveness`` alive and ready, the model listed, one real item served.

Why its own probes: the media server has no completions endpoint to send a token to; what proves
it can serve is one request of the model's kind (an image, a clip, a photo, a sentence). The wait
itself is the LLM wait's loop (``workflows.readiness.wait_for``): a deadline, the server's death
noticed at once, 401 final, and a timeout that names the URL, the stage and the last answer.
"""
from __future__ import annotations

from typing import Callable

from media_clients.probe import one_item
from media_clients.transport import MediaHttp
from media_clients.workloads import describe
from workflows.readiness import Probe, ProbeResult, ReadyInfo, models_probe, wait_for
from workflows.servers.base import ServerHandle, ServerStartError
from workflows.servers.probe import check_auth

STAGES = ("liveness", "models", "one_item")
#: A first image or a long clip may take minutes on a CPU: the one-item request may wait this long.
ONE_ITEM_CAP_S = 600.0


def media_probes(handle: ServerHandle, kind: str, bearer: str | None) -> list[Probe]:
    http = MediaHttp(handle.base_url, bearer)

    def liveness(per_request_s: float) -> ProbeResult:
        answer = http.get("/tt-liveness", timeout_s=per_request_s)
        ready = answer.ok and answer.json().get("model_ready", True)
        return ProbeResult(bool(ready), f"/tt-liveness {describe(answer)}", answered=answer.status is not None)

    def item(per_request_s: float) -> ProbeResult:
        answer = one_item(http, kind, handle.served_model_name, per_request_s)
        note = f"one {kind} request: {describe(answer)}"
        if answer.status is not None:
            check_auth(answer.status, answer.url, bearer)
            if 400 <= answer.status < 500 and answer.status not in (404, 408, 429):
                raise ServerStartError(f"the media server refused the one-{kind} readiness request: {note}")
        return ProbeResult(answer.ok, note, answered=answer.status is not None)

    return [Probe("liveness", liveness),
            models_probe(handle.base_url, bearer, handle.served_model_name, what="media server"),
            Probe("one_item", item, cap_s=ONE_ITEM_CAP_S)]


def wait_media_ready(handle: ServerHandle, kind: str, *, bearer: str | None, timeout_s: float,
                     poll_interval_s: float = 1.0, progress: Callable[[str], None] | None = None) -> ReadyInfo:
    """Poll /tt-liveness -> /v1/models -> one item of ``kind`` until all pass (or raise)."""
    return wait_for(handle, media_probes(handle, kind, bearer), timeout_s=timeout_s,
                    poll_interval_s=poll_interval_s, what="media server", progress=progress)
