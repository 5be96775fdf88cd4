"""One exception handler: every error is ``{"code", "message", "details"}`` with a stable code."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from overseer.errors import OverseerError

log = logging.getLogger("overseer.api")

_HTTP_CODES = {400: "bad_request", 401: "unauthenticated", 403: "forbidden", 404: "not_found",
               405: "method_not_allowed", 409: "conflict", 413: "payload_too_large",
               415: "unsupported_media_type", 422: "invalid_request", 429: "rate_limited"}


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The one error shape."""
    return {"code": code, "message": message, "details": details or {}}


ERROR_STATUSES: dict[str, str] = {
    "400": "Malformed request",
    "401": "Missing, invalid or expired bearer token (`unauthenticated`, `token_expired`)",
    "403": "The token's role may not do this (`forbidden`)",
    "404": "Unknown run, approval or pipeline (`not_found`)",
    "409": "Not in a state that allows this (`not_awaiting_approval`, `claimed_by_other`, `conflict`)",
    "413": "Body over the size limit (`payload_too_large`)",
    "415": "Unsupported document type (`unsupported_media_type`)",
    "422": "Invalid request, unreadable document or invalid field edits",
    "503": "Postgres or Temporal unavailable (`dependency_unavailable`); retry",
}

ERROR_BODY_SCHEMA: dict[str, Any] = {
    "title": "ErrorBody",
    "type": "object",
    "required": ["code", "message", "details"],
    "properties": {"code": {"type": "string", "description": "stable machine-readable code"},
                   "message": {"type": "string"},
                   "details": {"type": "object", "additionalProperties": True}},
}


def install_openapi_errors(app: FastAPI) -> None:
    """Document the one error shape for every operation, so clients (and fuzzers) know it."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = generate()
        schema.setdefault("components", {}).setdefault("schemas", {})["ErrorBody"] = (
            ERROR_BODY_SCHEMA)
        ref = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                for status, description in ERROR_STATUSES.items():
                    if status == "422" or status not in responses:
                        responses[status] = {"description": description, "content": ref}
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented schema override


def install_error_handlers(app: FastAPI) -> None:
    """Render domain errors, validation errors, HTTP errors and crashes in the one shape."""
    install_openapi_errors(app)

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
        import asyncpg

        if isinstance(exc, asyncpg.DataError):
            # SQLSTATE class 22: a caller's value Postgres cannot store or compare (a NUL
            # byte in a query string, an interval out of range) — the request is invalid.
            return JSONResponse(error_body("invalid_request", "a parameter is not a valid value",
                                           {"sqlstate": exc.sqlstate}), status_code=422)
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
