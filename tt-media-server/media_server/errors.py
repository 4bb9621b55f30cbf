"""One error type per outcome, one status code each, one JSON body shape everywhere.

Routes and the scheduler raise these; ``install_handlers`` turns them (and FastAPI's own
validation errors) into ``{"error": {"message", "type", "code", "request_id"}}`` with the status below, so a
full queue is 429 on every endpoint and never a wrapped 500.
"""
from __future__ import annotations

import math

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from media_server.request_id import current_request_id


class MediaError(Exception):
    """Base: status code, error type and an optional Retry-After (seconds)."""

    status: int = 500
    type: str = "internal_error"

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after

    def response(self) -> JSONResponse:
        headers = {}
        if self.retry_after is not None:
            headers["Retry-After"] = str(max(1, math.ceil(self.retry_after)))
        if self.status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        return JSONResponse(status_code=self.status, headers=headers, content={"error": self.body()})

    def body(self) -> dict:
        """The error object: message, type, code and the request's id (to find it in the log)."""
        return {"message": self.message, "type": self.type, "code": self.status,
                "request_id": current_request_id()}


class BadInput(MediaError):
    status, type = 400, "invalid_request_error"


class Unauthorized(MediaError):
    status, type = 401, "authentication_error"


class UnknownModel(MediaError):
    status, type = 404, "model_not_found"


class PayloadTooLarge(MediaError):
    status, type = 413, "payload_too_large"


class QueueFull(MediaError):
    status, type = 429, "queue_full"


class NotReady(MediaError):
    status, type = 503, "model_not_ready"


class WorkerLost(MediaError):
    status, type = 503, "worker_lost"


class ShuttingDown(MediaError):
    status, type = 503, "shutting_down"


class DeadlineExceeded(MediaError):
    status, type = 504, "deadline_exceeded"


class RunnerFailed(MediaError):
    status, type = 500, "runner_error"


STATUS_TO_ERROR: dict[int, type[MediaError]] = {
    400: BadInput, 401: Unauthorized, 404: UnknownModel, 413: PayloadTooLarge,
    429: QueueFull, 503: WorkerLost, 504: DeadlineExceeded, 500: RunnerFailed,
}


def error_for_status(status: int, message: str) -> MediaError:
    """The error type for a status a worker reported (e.g. an ItemError)."""
    return STATUS_TO_ERROR.get(status, RunnerFailed)(message)


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for error in exc.errors():
        loc = ".".join(str(p) for p in error.get("loc", ()) if p not in ("body", "query", "form"))
        parts.append(f"{loc or 'body'}: {error.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(MediaError)
    async def _media_error(_: Request, exc: MediaError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        return BadInput(_validation_message(exc)).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        error = error_for_status(exc.status_code, str(exc.detail))
        error.status = exc.status_code
        error.type = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, error.type)
        return error.response()
