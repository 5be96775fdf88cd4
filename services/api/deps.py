"""Dependencies as ``Annotated`` aliases: ``SettingsDep``, ``PoolDep``, ``TemporalDep``, ``PrincipalDep``.

:class:`~overseer.access.Principal` is re-exported here for the routes.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated

import asyncpg
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from temporalio.client import Client

from overseer.access import Principal
from overseer.errors import AuthenticationError, PermissionDeniedError, TokenExpiredError
from overseer.settings import Settings

_bearer = HTTPBearer(auto_error=False)

__all__ = ["Principal", "PoolDep", "PrincipalDep", "ReviewerDep", "SettingsDep", "SubmitterDep",
           "TemporalDep", "get_principal", "require_roles"]


def get_settings_dep(request: Request) -> Settings:
    """The app's settings."""
    settings: Settings = request.app.state.settings
    return settings


def get_pool(request: Request) -> asyncpg.Pool:
    """The app's Postgres pool."""
    pool: asyncpg.Pool = request.app.state.pool
    return pool


def get_temporal(request: Request) -> Client:
    """The app's Temporal client (made once in the lifespan)."""
    client: Client = request.app.state.temporal
    return client


def get_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Resolve the bearer token.

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


def require_roles(*roles: str) -> Callable[[Principal], Principal]:
    """A dependency admitting ``roles`` (admin always)."""

    def dependency(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
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
