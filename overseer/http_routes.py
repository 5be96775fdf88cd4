"""What an HTTP route of Overseer needs, the API's and a pipeline's own alike (``Pipeline.api.router``).

FastAPI dependencies for the app's settings, Postgres pool and Temporal client, and the
caller (:class:`~overseer.access.Principal` from the bearer token; ``SubmitterDep`` /
``ReviewerDep`` admit a role, admins always); bounded reading of an upload and its
``metadata`` form field; and the ``202`` answer to a submission (:class:`RunAccepted`).
Part of the plug-in API (:mod:`overseer.plugin`).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, Any

import asyncpg
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from temporalio.client import Client

from overseer.access import Principal
from overseer.errors import (
    AuthenticationError,
    InvalidRequestError,
    PayloadTooLargeError,
    PermissionDeniedError,
    TokenExpiredError,
    UnreadableDocumentError,
)
from overseer.settings import Settings

_bearer = HTTPBearer(auto_error=False)

# The dependencies are ``async def`` though none awaits: FastAPI runs a plain ``def``
# dependency in its thread pool, a thread hop per dependency per request.


async def get_settings_dep(request: Request) -> Settings:
    """The app's settings."""
    settings: Settings = request.app.state.settings
    return settings


async def get_pool(request: Request) -> asyncpg.Pool:
    """The app's Postgres pool."""
    pool: asyncpg.Pool = request.app.state.pool
    return pool


async def get_temporal(request: Request) -> Client:
    """The app's Temporal client (made once in the lifespan)."""
    client: Client = request.app.state.temporal
    return client


async def get_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The caller, from the bearer token (:func:`principal_from`).

    Raises:
        AuthenticationError: no token, or a token that is not granted (401).
        TokenExpiredError: a granted token past its ``expires_at`` (401).
    """
    return principal_from(request, credentials)


def principal_from(request: Request, credentials: HTTPAuthorizationCredentials | None) -> Principal:
    """Resolve a bearer token against the app's grants.

    Raises:
        AuthenticationError: no token, or a token that is not granted (401).
        TokenExpiredError: a granted token past its ``expires_at`` (401).
    """
    if credentials is None or not credentials.credentials:
        raise AuthenticationError("missing bearer token")
    grants: dict[str, dict[str, str]] = request.app.state.grants
    token = credentials.credentials
    for known, grant in grants.items():
        if hmac.compare_digest(known.encode(), token.encode()):
            expires = grant.get("expires_at")
            if expires and datetime.fromisoformat(expires) <= datetime.now(UTC):
                raise TokenExpiredError("bearer token expired", details={"expired_at": expires})
            return Principal(subject=grant["subject"], role=grant["role"])
    raise AuthenticationError("invalid bearer token")


def require_roles(*roles: str) -> Callable[[Principal], Awaitable[Principal]]:
    """A dependency admitting ``roles`` (admin always)."""

    async def dependency(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
        if principal.role not in roles and not principal.is_admin:
            raise PermissionDeniedError(
                f"role {principal.role!r} may not do this", details={"needs": list(roles)}
            )
        return principal

    return dependency


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
PoolDep = Annotated[asyncpg.Pool, Depends(get_pool)]
TemporalDep = Annotated[Client, Depends(get_temporal)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
SubmitterDep = Annotated[Principal, Depends(require_roles("submitter"))]
ReviewerDep = Annotated[Principal, Depends(require_roles("reviewer"))]


class RunAccepted(BaseModel):
    """``202`` answer to a submission."""

    run_id: str
    pipeline: str
    status: str
    links: dict[str, str]


_CHUNK_BYTES = 1024 * 1024


async def read_bounded(file: Any, max_bytes: int) -> bytes:
    """Read an upload in chunks, refusing it as soon as it passes ``max_bytes``.

    Raises:
        PayloadTooLargeError: over ``max_bytes`` (413).
        UnreadableDocumentError: an empty file (422).
    """
    chunks: list[bytes] = []
    total = 0
    while chunk := await file.read(_CHUNK_BYTES):
        total += len(chunk)
        if total > max_bytes:
            raise PayloadTooLargeError(f"upload larger than {max_bytes} bytes",
                                       details={"max_upload_bytes": max_bytes})
        chunks.append(chunk)
    data = b"".join(chunks)
    if not data:
        raise UnreadableDocumentError("the uploaded file is empty", details={"reason": "empty"})
    return data


def parse_metadata(raw: str | None) -> dict[str, Any]:
    """The ``metadata`` form field as a dict (``{}`` when absent).

    Raises:
        InvalidRequestError: not JSON, or not a JSON object.
    """
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise InvalidRequestError("metadata is not valid JSON") from None
    if not isinstance(value, dict):
        raise InvalidRequestError("metadata must be a JSON object")
    return value


def sse_frame(data: str, *, event: str | None = None, event_id: str | None = None) -> str:
    """One Server-Sent Events message: ``event:`` and ``id:`` lines when given, then ``data:``.

    Every stream Overseer serves frames its events here (the Agent Server's, Protocol v2's,
    a pipeline's own); what differs between them is the event and id each protocol names.

    Args:
        data: the event's data, already serialised (JSON), on one line.
        event: the SSE event name, if the protocol names one.
        event_id: the SSE id a client resumes from (``Last-Event-ID``), if any.
    """
    head = (f"event: {event}\n" if event else "") + (f"id: {event_id}\n" if event_id else "")
    return f"{head}data: {data}\n\n"
