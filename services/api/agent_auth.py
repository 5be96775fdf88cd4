"""Authentication and object-level authorization of the Agent Server API.

Two ways, one entry point each:

- :func:`authenticate` — who is calling. By default the SDK's ``x-api-key`` (or a bearer
  token) is looked up in ``OVERSEER_API_TOKENS``, as ``/v1`` does. A deployment whose
  ``langgraph.json`` names ``"auth": {"path": "./auth.py:auth"}`` (a ``langgraph_sdk.Auth``)
  is authenticated by its ``@auth.authenticate`` handler instead, called with the
  parameters it names, as LangGraph's Agent Server calls it.
- :func:`authorize` — what the caller may reach. An ``Auth`` with an ``@auth.on`` handler
  for the resource and action decides (its most specific handler, as LangGraph resolves
  them); its filters become :attr:`~overseer.access.Scope.metadata`. Otherwise Overseer's
  owner rule applies (:func:`overseer.access.scope`). Either way the answer is a
  :class:`~overseer.access.Scope` that the store applies in SQL.

:func:`gate_thread` is the check every ``/threads/{thread_id}/…`` route makes before it
touches the thread; the route test ``tests/unit/test_access.py`` fails if a route skips it.
A route that starts a run hands the run service (:func:`overseer.run_service.start_run`)
the caller as :func:`run_caller`, which makes the same checks.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg
from fastapi import Request
from fastapi.security import HTTPAuthorizationCredentials

from overseer import access
from overseer.access import Principal, Scope
from overseer.errors import (
    AuthenticationError,
    NotFoundError,
    OverseerError,
    PermissionDeniedError,
)
from overseer.http_routes import principal_from
from overseer.registry import get_registry
from overseer.threads import parse_uuid

READS = frozenset({"read", "search"})
"""Agent Server actions that only look; every other action (create, update, delete,
create_run) changes something."""


class AuthHandlerError(OverseerError):
    """An ``Auth`` handler raised ``Auth.exceptions.HTTPException`` with a status of its own."""

    code = "auth_handler_refused"

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message, details={"status": status})
        self.http_status = status  # type: ignore[misc]  # per instance: the handler's status


class AuthUser:
    """The user an ``@auth.authenticate`` handler returned, as ``ctx.user`` (LangGraph's ``BaseUser``).

    Args:
        data: ``{"identity": str, "display_name"?, "is_authenticated"?, "permissions"?, ...}``.
    """

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = dict(data)

    @property
    def identity(self) -> str:
        """The user's unique id (a thread's owner)."""
        return str(self._data["identity"])

    @property
    def display_name(self) -> str:
        """A display name (the identity when none was given)."""
        return str(self._data.get("display_name") or self.identity)

    @property
    def is_authenticated(self) -> bool:
        """Whether the user is authenticated (True unless the handler said otherwise)."""
        return bool(self._data.get("is_authenticated", True))

    @property
    def permissions(self) -> list[str]:
        """The user's permissions."""
        return [str(p) for p in self._data.get("permissions") or []]

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Any:
        return iter(self._data)

    def __repr__(self) -> str:
        return f"AuthUser(identity={self.identity!r})"


def role_of(permissions: list[str]) -> str:
    """Overseer's role for a custom-auth user.

    Returns:
        ``admin`` or ``reviewer`` when ``permissions`` names it, else ``submitter``.
    """
    for role in ("admin", "reviewer"):
        if role in permissions:
            return role
    return "submitter"


def _token_principal(request: Request) -> Principal:
    key = request.headers.get("x-api-key")
    if not key:
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            key = ""
    if not key:
        raise AuthenticationError("missing x-api-key")
    return principal_from(request, HTTPAuthorizationCredentials(scheme="Bearer", credentials=key))


async def authenticate(request: Request) -> Principal:
    """The caller of an Agent Server route.

    Returns:
        A :class:`Principal`; with a custom ``Auth``, ``subject`` is the handler's identity,
        ``permissions`` its permissions and ``user`` its user.

    Raises:
        AuthenticationError: no key, an unknown or expired one, or a handler that refused
            with 401 or returned no identity (401).
        AuthHandlerError: a handler that refused with another status.
    """
    auth = get_registry().auth()
    handler = getattr(auth, "_authenticate_handler", None) if auth is not None else None
    if handler is None:
        return _token_principal(request)
    from langgraph_sdk import Auth

    try:
        result = await handler(**await _authenticate_arguments(handler, request))
    except Auth.exceptions.HTTPException as err:
        raise _handler_error(err) from None
    user = _user_of(result)
    if not user.is_authenticated:
        raise AuthenticationError("the auth handler did not authenticate the caller")
    return Principal(subject=user.identity, role=role_of(user.permissions),
                     permissions=tuple(user.permissions), user=user)


async def authorize(principal: Principal, resource: str, action: str,
                    value: dict[str, Any], *, owner_action: access.Action | None = None) -> Scope:
    """The rows of ``resource`` that ``principal`` may ``action``.

    Args:
        principal: the caller.
        resource: ``threads`` | ``assistants`` (``crons``, ``store`` when they exist).
        action: LangGraph's action name: ``create``, ``read``, ``update``, ``delete``,
            ``search``, ``create_run``.
        value: the request's parameters as LangGraph's ``Auth.types`` name them; a handler
            may change them in place (e.g. add an owner to ``metadata``) and the route
            uses them as changed.
        owner_action: what the owner rule counts this action as, when not what
            :data:`READS` says (resuming an interrupt is a review: ``read``).

    Returns:
        The handler's filters as ``Scope(metadata=...)`` when an ``Auth`` handler covers
        this resource and action; otherwise the owner rule's scope.

    Raises:
        PermissionDeniedError: the handler returned False or failed an ``assert`` (403).
        AuthHandlerError: the handler raised ``HTTPException`` (its status).
        OverseerError: the handler returned something that is neither None, a bool nor a
            filter dict (500: the deployment's handler is wrong, not the request).
    """
    auth = get_registry().auth()
    handler = _handler(auth, resource, action) if auth is not None else None
    if handler is None:
        if resource == "assistants":
            return access.ANY
        return access.scope(principal, owner_action or ("read" if action in READS else "write"))
    from langgraph_sdk import Auth
    from langgraph_sdk.auth.types import AuthContext

    user = principal.user if principal.user is not None else AuthUser(
        {"identity": principal.subject, "permissions": [principal.role]})
    ctx = AuthContext(user=user, resource=resource, action=action,  # type: ignore[arg-type]
                      permissions=list(principal.permissions) or [principal.role])
    try:
        result = await handler(ctx=ctx, value=value)
    except Auth.exceptions.HTTPException as err:
        raise _handler_error(err) from None
    except AssertionError as err:
        raise PermissionDeniedError(str(err) or "refused by the auth handler") from None
    if result is None or result is True:
        return access.ANY
    if result is False:
        raise PermissionDeniedError(f"the auth handler refused {resource}.{action}")
    if isinstance(result, Mapping):
        return Scope(metadata=dict(result))
    raise OverseerError(f"the auth handler for {resource}.{action} returned a "
                        f"{type(result).__name__}; expected None, a bool or a filter dict")


async def authorize_store(principal: Principal, action: str, value: dict[str, Any]) -> bool:
    """Run the deployment's ``@auth.on.store`` handler for ``action``, if it has one.

    As on the Agent Server, the handler may change ``value`` in place (e.g. put the user's
    identity first in ``value["namespace"]``) and the route uses it as changed; a filter
    dict it returns means "allowed" (store handlers do not filter).

    Args:
        principal: the caller.
        action: ``put`` | ``get`` | ``delete`` | ``search`` | ``list_namespaces``.
        value: the request's parameters (``namespace`` a tuple, ``key``, ``value`` …).

    Returns:
        True when a handler decided; False when none covers the store (the owner rule
        applies: :func:`services.api.routes.agent_store.admit`).

    Raises:
        PermissionDeniedError, AuthHandlerError: as :func:`authorize`.
    """
    auth = get_registry().auth()
    if auth is None or _handler(auth, "store", action) is None:
        return False
    await authorize(principal, "store", action, value)
    return True


async def gate_thread(pool: asyncpg.Pool | asyncpg.Connection, principal: Principal,
                      thread_id: str, action: str, value: dict[str, Any] | None = None, *,
                      owner_action: access.Action | None = None) -> Scope:
    """Check that ``principal`` may ``action`` thread ``thread_id``, before anything touches it.

    Args:
        pool: the database.
        principal: the caller.
        thread_id: the path's thread id.
        action: ``read``, ``update``, ``delete`` or ``create_run`` (see :func:`authorize`).
        value: the action's parameters for an ``Auth`` handler (``thread_id`` is added).
        owner_action: see :func:`authorize`.

    Returns:
        The scope that admitted the thread.

    Raises:
        NotFoundError: no such thread, or one outside the caller's scope (404, so the id
            is not confirmed).
        PermissionDeniedError: a reviewer changing a thread it may only read (403), or an
            ``Auth`` handler's refusal.
    """
    value = {"thread_id": parse_uuid(thread_id), **(value or {})}
    admitted = await authorize(principal, "threads", action, value, owner_action=owner_action)
    if await thread_in_scope(pool, thread_id, admitted):
        return admitted
    if (admitted.metadata is None and admitted != access.scope(principal, "read")
            and await thread_in_scope(pool, thread_id, access.scope(principal, "read"))):
        raise PermissionDeniedError(f"role {principal.role!r} may read thread {thread_id} "
                                    "but not change it")
    raise NotFoundError(f"unknown thread {thread_id}")


async def thread_in_scope(pool: asyncpg.Pool | asyncpg.Connection, thread_id: str,
                          scope: Scope) -> bool:
    """Whether thread ``thread_id`` exists and is in ``scope`` (one SQL query)."""
    args: list[Any] = [parse_uuid(thread_id)]
    where = scope.sql(args, owner_column="created_by", metadata_column="metadata")
    return bool(await pool.fetchval(
        f"SELECT EXISTS (SELECT 1 FROM agent_threads WHERE thread_id = $1 AND {where})", *args))


def _handler(auth: Any, resource: str, action: str) -> Any:
    """The most specific ``@auth.on`` handler: (resource, action), (resource, *), (*, action), global."""
    for key in ((resource, action), (resource, "*"), ("*", action), ("*", "*")):
        found = auth._handlers.get(key)
        if found:
            return found[-1]
    return auth._global_handlers[-1] if auth._global_handlers else None


async def _authenticate_arguments(handler: Any, request: Request) -> dict[str, Any]:
    """The parameters an ``@auth.authenticate`` handler names, as LangGraph's server injects them."""
    wanted = inspect.signature(handler).parameters
    available: dict[str, Any] = {
        "request": request, "path": request.url.path, "method": request.method,
        "path_params": dict(request.path_params),
        "query_params": dict(request.query_params),
        "headers": {k.encode(): v.encode() for k, v in request.headers.items()},
        "authorization": request.headers.get("authorization"),
        "scope": request.scope}
    if "body" in wanted:
        raw = await request.body()
        try:
            available["body"] = json.loads(raw) if raw else None
        except ValueError:
            available["body"] = None
    return {name: available.get(name) for name in wanted}


def _user_of(result: Any) -> AuthUser:
    if isinstance(result, str):
        return AuthUser({"identity": result})
    if isinstance(result, Mapping):
        if not result.get("identity"):
            raise AuthenticationError("the auth handler returned no identity")
        return AuthUser(result)
    identity = getattr(result, "identity", None)
    if not identity:
        raise AuthenticationError("the auth handler returned no identity")
    return AuthUser({"identity": identity,
                     "display_name": getattr(result, "display_name", identity),
                     "is_authenticated": getattr(result, "is_authenticated", True),
                     "permissions": list(getattr(result, "permissions", []) or [])})


def _handler_error(err: Any) -> OverseerError:
    status = int(getattr(err, "status_code", 401) or 401)
    detail = str(getattr(err, "detail", "") or "refused by the auth handler")
    if status == 401:
        return AuthenticationError(detail)
    if status == 403:
        return PermissionDeniedError(detail)
    if status == 404:
        return NotFoundError(detail)
    return AuthHandlerError(detail, status)


@dataclass(frozen=True)
class _RunCaller:
    """The caller of a run as the run service takes it (:class:`overseer.run_service.RunCaller`)."""

    principal: Principal

    async def create_thread(self, value: dict[str, Any]) -> Scope:
        """The scope in which the caller may create the run's thread (:func:`authorize`)."""
        return await authorize(self.principal, "threads", "create", value)

    async def run_on(self, pool: asyncpg.Pool, thread_id: str, value: dict[str, Any], *,
                     resuming: bool) -> None:
        """Admit the run on the thread (:func:`gate_thread`, action ``create_run``).

        The owner rule counts a resume as a read (resuming an interrupt is a review).
        """
        await gate_thread(pool, self.principal, thread_id, "create_run", value,
                          owner_action="read" if resuming else None)


def run_caller(principal: Principal) -> _RunCaller:
    """``principal`` as the run service's caller: its thread and run checks are this module's."""
    return _RunCaller(principal)
