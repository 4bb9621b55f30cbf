"""Operations routes: liveness, readiness, served models, Prometheus metrics."""
from __future__ import annotations


from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from media_server import metrics
from media_server.api.common import scheduler_of
from media_server.auth import require_api_key
from media_server.errors import MediaError, NotReady

router = APIRouter()


@router.get("/tt-liveness", tags=["operations"])
async def liveness(request: Request) -> JSONResponse:
    """Always 200 while the process lives; says whether a model is ready and how full the queue is."""
    return JSONResponse(scheduler_of(request).liveness())


@router.get("/health", tags=["operations"])
async def health(request: Request) -> JSONResponse:
    """200 once every served model has a warm worker; 503 before (and while none is alive)."""
    scheduler = scheduler_of(request)
    if not scheduler.is_ready:
        waiting = [p.model_id for p in scheduler.pools.values() if not p.is_ready]
        raise NotReady("no warm worker yet for: " + ", ".join(waiting))
    return JSONResponse({"status": "ok"})


@router.get("/v1/models", tags=["models"], dependencies=[Depends(require_api_key)])
async def list_models(request: Request) -> JSONResponse:
    """The served models with their kind (image, cnn, audio, embedding, rerank, text), device and readiness."""
    created = int(request.app.state.started_at)
    data = [{"id": pool.model_id, "object": "model", "created": created, "owned_by": "tt-media-server",
             "kind": pool.kind, "runner": pool.runner_name, "ready": pool.is_ready,
             "device": _device_of(pool), **pool.runner_cls.model_card(pool.model_id)}
            for pool in scheduler_of(request).pools.values()]
    return JSONResponse({"object": "list", "data": data})


def _device_of(pool) -> str:
    """What serves the model, for runners whose card does not say: a Tenstorrent device group for
    the tt-*/forge runners (their worker's devices), the CPU for the rest (the device-aware runners'
    cards say cuda/mps/cpu themselves, from MODEL_DEVICE)."""
    if pool.runner_name.startswith(("tt-", "forge")):
        return "tenstorrent " + ",".join(worker.group.label for worker in pool.workers)
    return "cpu"


class MetricsDisabled(MediaError):
    status, type = 404, "not_found"


@router.get("/metrics", tags=["operations"])
async def prometheus_metrics(request: Request) -> Response:
    """Prometheus text format, merged across the server and its worker processes (404 with
    ENABLE_METRICS=0, the small-model server's switch)."""
    if not request.app.state.settings.enable_metrics:
        raise MetricsDisabled("metrics are off (ENABLE_METRICS=0)")
    body, content_type = metrics.render()
    return Response(body, media_type=content_type)
