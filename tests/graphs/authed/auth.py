"""A user's LangGraph custom auth, written the way LangGraph's "private conversations" tutorial writes it.

Overseer must run it unchanged (issue 29): ``@auth.authenticate`` turns the bearer token
into a user, the global ``@auth.on`` handler stamps every resource it creates with
``owner`` and returns ``{"owner": identity}`` as the filter for every read and write, and
three narrower handlers show the resolution order: deleting a thread takes the
``threads:delete`` permission, assistants are open to everyone, and each user's store
items live under its identity (LangGraph's store-auth example).
"""

from __future__ import annotations

from typing import Any

from langgraph_sdk import Auth

VALID_TOKENS = {
    "user1-token": {"id": "user1", "name": "Alice", "permissions": ["threads:delete"]},
    "user2-token": {"id": "user2", "name": "Bob", "permissions": []},
    "auditor-token": {"id": "auditor", "name": "Ann", "permissions": []},
}

auth = Auth()


@auth.authenticate
async def get_current_user(authorization: str | None) -> Auth.types.MinimalUserDict:
    """The user behind ``Authorization: Bearer <token>``; 401 for anything else."""
    if not authorization or " " not in authorization:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Missing bearer token")
    scheme, token = authorization.split(" ", 1)
    if scheme.lower() != "bearer" or token not in VALID_TOKENS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Invalid token")
    user = VALID_TOKENS[token]
    return {"identity": user["id"], "display_name": user["name"],
            "permissions": user["permissions"], "is_authenticated": True}


@auth.on
async def owner_only(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> dict[str, str]:
    """Stamp what is created with its owner; let each user reach only what it owns."""
    filters = {"owner": ctx.user.identity}
    metadata = value.setdefault("metadata", {})
    if isinstance(metadata, dict):
        metadata.update(filters)
    return filters


@auth.on.threads.delete
async def delete_needs_permission(ctx: Auth.types.AuthContext,
                                  value: Auth.types.on.threads.delete.value) -> Any:
    """Only users with ``threads:delete`` may delete, and only their own threads."""
    if "threads:delete" not in ctx.permissions:
        return False
    return {"owner": ctx.user.identity}


@auth.on.assistants
async def assistants_are_public(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Every user may see every assistant."""
    return None


@auth.on.store()
async def own_namespace(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> None:
    """A user's store items live under its identity: ``namespace[0]`` must be it."""
    namespace = tuple(value.get("namespace") or ())
    assert namespace[:1] == (ctx.user.identity,), "not your namespace"
