"""One exception handler: every error is ``{"code", "message", "details"}`` with a stable code."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from overseer.errors import OverseerError

log = logging.getLogger("overseer.api")

_HTTP_CODES = {400: "bad_request", 401: "unauthenticated", 403: "forbidden", 404: "not_found",
               405: "method_not_allowed", 409: "conflict", 413: "payload_too_large",
               415: "unsupported_media_type", 422: "invalid_request", 429: "rate_limited"}


def error_body(code: str, message: str, details: dict | None = None) -> dict:
    """The one error shape."""
    return {"code": code, "message": message, "details": details or {}}


def install_error_handlers(app: FastAPI) -> None:
    """Render domain errors, validation errors, HTTP errors and crashes in the one shape."""

    @app.exception_handler(OverseerError)
    async def _domain(request: Request, exc: OverseerError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.http_status == 401 else None
        if exc.code in SECURITY_CODES:
            await record_security_event(request, exc.code, exc.http_status)
        return JSONResponse(error_body(exc.code, exc.message, exc.details),
                            status_code=exc.http_status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")}
                  for e in exc.errors()]
        return JSONResponse(error_body("invalid_request", "request does not match the schema",
                                       {"errors": errors}), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _crash(_: Request, exc: Exception) -> JSONResponse:
        if is_dependency_outage(exc):
            log.warning("dependency unavailable: %s", type(exc).__name__)
            return JSONResponse(error_body("dependency_unavailable",
                                           "a backing service (Postgres or Temporal) is unavailable; "
                                           "retry shortly"),
                                status_code=503, headers={"Retry-After": "5"})
        log.exception("unhandled error", exc_info=exc)
        return JSONResponse(error_body("internal_error", "internal error"), status_code=500)


SECURITY_CODES = frozenset({"unauthenticated", "token_expired", "forbidden", "claimed_by_other"})
"""Refusals written to the append-only ``security_events`` table."""


def is_dependency_outage(exc: BaseException) -> bool:
    """Postgres or Temporal unreachable (a 503 with Retry-After, not a 500)."""
    import asyncpg
    from temporalio.service import RPCError, RPCStatusCode

    if isinstance(exc, RPCError):
        return exc.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED)
    return isinstance(exc, (asyncpg.PostgresConnectionError, asyncpg.InterfaceError,
                            asyncpg.CannotConnectNowError, ConnectionError, OSError, TimeoutError))


async def record_security_event(request: Request, code: str, status: int) -> None:
    """Append a refused request to ``security_events`` (best effort: never fails the answer)."""
    from observability.tracing import current_trace_id

    pool = getattr(request.app.state, "pool", None)
    if pool is None:
        return
    auth = request.headers.get("authorization", "")
    grant = request.app.state.grants.get(auth.removeprefix("Bearer ").strip()) if auth else None
    try:
        await pool.execute(
            """INSERT INTO security_events (code, status, subject, method, path, client, trace_id)
               VALUES ($1, $2, $3, $4, $5, $6, $7)""",
            code, status, (grant or {}).get("subject"), request.method, request.url.path[:500],
            request.client.host if request.client else None, current_trace_id(),
        )
    except Exception:  # noqa: BLE001 — the refusal itself must still be answered
        log.warning("could not record security event", exc_info=True)
