"""The one authorization rule (overseer.access) and the Agent Server's use of it (issue 29).

- :class:`Scope`'s SQL and its Python twin agree on real Postgres rows for owners, equality
  and ``$contains`` filters (the filters LangGraph's ``Auth`` handlers return);
- the owner rule: submitters own, reviewers read all and change their own, admins all;
- every Agent Server route under ``/threads/{thread_id}`` passes the thread gate — a new
  route that forgets it fails here, before any client finds the hole;
- a ``langgraph.json`` ``auth`` is loaded, resolved handler by handler as LangGraph does,
  and a second one in the same deployment is refused.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from fastapi.routing import APIRoute

from overseer import access
from overseer.access import Principal, Scope
from overseer.errors import AuthenticationError, InvalidRequestError, PermissionDeniedError
from overseer.registry import RegistryError, load_registry, set_registry

AUTHED = Path(__file__).resolve().parents[1] / "graphs" / "authed" / "langgraph.json"

ROWS = [
    ("alice", {"owner": "alice", "team": "red", "tags": ["a", "b"]}),
    ("alice", {"owner": "alice", "team": "blue", "tags": ["b"]}),
    ("bob", {"owner": "bob", "team": "red", "tags": ["a", "c"], "n": 1}),
    ("bob", {}),
    (None, {"owner": "carol", "tags": "a"}),
]

SCOPES = [
    access.ANY,
    Scope(owner="alice"),
    Scope(owner="nobody"),
    Scope(metadata={"owner": "bob"}),
    Scope(metadata={"team": {"$eq": "red"}}),
    Scope(metadata={"tags": {"$contains": "a"}}),
    Scope(metadata={"tags": {"$contains": ["a", "c"]}}),
    Scope(metadata={"team": "red", "tags": {"$contains": "b"}}),
    Scope(owner="bob", metadata={"n": 1}),
    Scope(metadata={"missing": "x"}),
]


@pytest.mark.parametrize("scope", SCOPES, ids=[repr(s) for s in SCOPES])
async def test_scope_sql_and_admits_select_the_same_rows(pool: asyncpg.Pool, scope: Scope):
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("CREATE TEMP TABLE things (i int, created_by text, metadata jsonb) "
                           "ON COMMIT DROP")
        for i, (owner, metadata) in enumerate(ROWS):
            await conn.execute("INSERT INTO things VALUES ($1, $2, $3::jsonb)", i, owner,
                               json.dumps(metadata))
        args: list[Any] = []
        where = scope.sql(args, owner_column="created_by", metadata_column="metadata")
        in_sql = {r["i"] for r in await conn.fetch(f"SELECT i FROM things WHERE {where}", *args)}
    in_python = {i for i, (owner, metadata) in enumerate(ROWS) if scope.admits(owner, metadata)}
    assert in_sql == in_python


def test_scope_examples():
    assert Scope(metadata={"tags": {"$contains": ["a", "c"]}}).admits("x", ROWS[2][1])
    assert not Scope(metadata={"tags": {"$contains": ["a", "c"]}}).admits("x", ROWS[0][1])
    assert not Scope(owner="alice").admits("bob", {})
    with pytest.raises(InvalidRequestError):
        Scope(metadata={"team": {"$in": ["red"]}}).sql([], owner_column="o",
                                                      metadata_column="m")
    with pytest.raises(InvalidRequestError):  # filters on a resource without metadata
        Scope(metadata={"team": "red"}).sql([], owner_column="o")


def test_the_owner_rule():
    alice, rita, root = (Principal("alice", "submitter"), Principal("rita", "reviewer"),
                         Principal("root", "admin"))
    assert access.can(alice, "read", "alice") and access.can(alice, "write", "alice")
    assert not access.can(alice, "read", "bob") and not access.can(alice, "write", "bob")
    assert not access.can(alice, "read", None)
    assert access.can(rita, "read", "bob") and not access.can(rita, "write", "bob")
    assert access.can(rita, "write", "rita")
    assert access.can(root, "read", "bob") and access.can(root, "write", "bob")


def test_every_thread_route_passes_the_gate():
    from services.api.routes import agent_run_streams, agent_runs, agent_threads

    gated, unguarded = [], []
    routes = [*agent_threads.router.routes, *agent_runs.router.routes, *agent_run_streams.router.routes]
    for route in routes:
        if not isinstance(route, APIRoute) or "{thread_id}" not in route.path:
            continue
        deps = {d.call.__name__ for d in route.dependant.dependencies if d.call is not None}
        source = inspect.getsource(route.endpoint)
        if any(n.startswith("thread_gate_") for n in deps) or "gate_thread(" in source \
                or "run_service.start_run(" in source and "run_caller(principal)" in source:
            gated.append(route.path)
        else:
            unguarded.append((sorted(route.methods), route.path))
    assert not unguarded, f"thread routes without the gate: {unguarded}"
    assert len(gated) >= 19  # the routes of today; more is fine
    from overseer import run_service
    from services.api import agent_auth

    assert "caller.run_on(" in inspect.getsource(run_service._authorised)  # every run passes it
    assert "gate_thread(" in inspect.getsource(agent_auth.run_caller(None).run_on)  # type: ignore[arg-type]


def test_a_langgraph_auth_is_loaded_and_resolved_as_langgraph_does():
    from services.api import agent_auth

    registry = load_registry(str(AUTHED))
    auth = registry.auth()
    assert registry.auth_source is not None and registry.auth_source.endswith("./auth.py:auth")
    assert agent_auth._handler(auth, "threads", "delete").__name__ == "delete_needs_permission"
    assert agent_auth._handler(auth, "threads", "read").__name__ == "owner_only"
    assert agent_auth._handler(auth, "assistants", "search").__name__ == "assistants_are_public"
    assert load_registry(None).auth() is None


async def test_handlers_decide_and_their_answers_map_to_errors():
    from services.api import agent_auth

    set_registry(load_registry(str(AUTHED)))
    try:
        user1 = Principal("user1", "submitter", ("threads:delete",),
                          agent_auth.AuthUser({"identity": "user1",
                                               "permissions": ["threads:delete"]}))
        user2 = Principal("user2", "submitter", (),
                          agent_auth.AuthUser({"identity": "user2"}))
        value: dict[str, Any] = {"metadata": {"topic": "t"}}
        scope = await agent_auth.authorize(user1, "threads", "create", value)
        assert scope == Scope(metadata={"owner": "user1"})
        assert value["metadata"] == {"topic": "t", "owner": "user1"}  # stamped in place
        with pytest.raises(PermissionDeniedError):
            await agent_auth.authorize(user2, "threads", "delete", {})
        assert await agent_auth.authorize(user2, "assistants", "search", {}) is access.ANY
    finally:
        set_registry(None)


def test_authenticate_handler_results_become_principals():
    from services.api import agent_auth

    assert agent_auth._user_of("u1").identity == "u1"
    user = agent_auth._user_of({"identity": "u2", "permissions": ["reviewer", "x"]})
    assert user.permissions == ["reviewer", "x"] and "identity" in user
    assert agent_auth.role_of(user.permissions) == "reviewer"
    assert agent_auth.role_of(["x"]) == "submitter"
    with pytest.raises(AuthenticationError):
        agent_auth._user_of({"display_name": "no identity"})


def test_one_auth_per_deployment(tmp_path: Path):
    second = tmp_path / "langgraph.json"
    second.write_text(json.dumps({"graphs": {"other_graph": f"{AUTHED.parent.parent}/user_graph/"
                                             "graph.py:constructs"},
                                  "auth": {"path": f"{AUTHED.parent}/auth.py:auth"}}))
    with pytest.raises(RegistryError, match="auth is already set"):
        load_registry(f"{AUTHED}:{second}")
    second.write_text(json.dumps({"graphs": {"other_graph": f"{AUTHED.parent.parent}/"
                                             "user_graph/graph.py:constructs"},
                                  "auth": {"path": f"{AUTHED.parent.parent}/user_graph/"
                                                   "graph.py:constructs"}}))
    with pytest.raises(RegistryError, match="not a langgraph_sdk.Auth"):
        load_registry(str(second)).auth()
    second.write_text(json.dumps({"graphs": {"other_graph": f"{AUTHED.parent.parent}/"
                                             "user_graph/graph.py:constructs"},
                                  "auth": {"file": "a"}}))
    with pytest.raises(RegistryError, match="'auth' must be"):
        load_registry(str(second))
