"""A new pipeline with a router, a table and a console view: its own package, one langgraph.json line.

The package is written to a temporary directory, named in a ``langgraph.json`` of its own
(as a deployment's ``OVERSEER_GRAPHS`` file), and registered; nothing in Overseer changes.
Its migration creates its table, its projector fills it from the event log in the event's
transaction, ``overseer check`` rebuilds it, its route reads it and the review console
shows its section of a run's page.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from overseer.access import Principal
from overseer.http_routes import get_principal
from overseer.registry import get_registry, load_registry, set_registry
from overseer.store.consistency import check_consistency
from overseer.store.events import RUN_SUBMITTED, NewEvent, append_events
from overseer.store.migrations import apply_migrations
from services.api.errors import install_error_handlers
from services.api.routes.console.items import pipeline_view

PACKAGE = '''
"""acme_notes: one node, its own table of notes, a route and a console section."""

import uuid
from typing import TypedDict

from fastapi import APIRouter
from langgraph.graph import END, START, StateGraph

from overseer.plugin import (
    RUN_SUBMITTED, Api, ConsoleView, Pipeline, PoolDep, PrincipalDep, Store, visible_run,
)


class State(TypedDict):
    text: str


def build_graph() -> StateGraph:
    graph = StateGraph(State)
    graph.add_node("shout", lambda state: {"text": state["text"].upper()})
    graph.add_edge(START, "shout")
    graph.add_edge("shout", END)
    return graph


async def noted(conn, event, at):
    if event.data.get("pipeline") == "acme_notes":
        await conn.execute("INSERT INTO acme_notes (run_id, note, noted_at) VALUES ($1, $2, $3) "
                           "ON CONFLICT (run_id) DO NOTHING", uuid.UUID(event.run_id),
                           f"submitted by {event.data.get('submitted_by')}", at)


async def notes(run_id: str, principal: PrincipalDep, pool: PoolDep) -> dict:
    run = await visible_run(pool, run_id, principal)
    rows = await pool.fetch("SELECT note FROM acme_notes WHERE run_id = $1", uuid.UUID(run.run_id))
    return {"run_id": run.run_id, "notes": [r["note"] for r in rows]}


def build_router() -> APIRouter:
    router = APIRouter()
    router.add_api_route("/acme/runs/{run_id}/notes", notes, methods=["GET"])
    return router


async def view(pool, run_id):
    rows = await pool.fetch("SELECT note FROM acme_notes WHERE run_id = $1", uuid.UUID(run_id))
    return ConsoleView(title="Acme notes", columns=("note",), rows=[[r["note"]] for r in rows])


PIPELINE = Pipeline(
    name="acme_notes", graph=build_graph, description="notes kept by the acme pipeline",
    api=Api(router=build_router, console_view=view),
    store=Store(
        migrations=(("notes", "CREATE TABLE acme_notes (run_id uuid PRIMARY KEY REFERENCES runs "
                              "(run_id), note text NOT NULL, noted_at timestamptz NOT NULL)"),),
        projectors={RUN_SUBMITTED: noted},
        read_models=("acme_notes",)),
)
'''


@pytest.fixture
async def acme_registry(tmp_path: Path, db: asyncpg.Pool) -> AsyncIterator[Path]:
    """The project's pipelines plus ``acme_notes``, from a package in ``tmp_path``.

    Afterwards the registry is restored and the table dropped (it refers to ``runs``, which
    other tests truncate).
    """
    package = tmp_path / "acme_notes"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "pipeline.py").write_text(textwrap.dedent(PACKAGE))
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"dependencies": ["."],
                                  "graphs": {"acme_notes": "acme_notes.pipeline:PIPELINE"}}))
    before = get_registry()
    set_registry(load_registry(str(config)))
    try:
        yield config
    finally:
        set_registry(before)
        await db.execute("DROP TABLE IF EXISTS acme_notes")
        await db.execute("DELETE FROM pipeline_migrations WHERE pipeline = 'acme_notes'")


async def test_a_pipeline_package_brings_its_table_route_and_console_view(
        acme_registry: Path, db: asyncpg.Pool) -> None:
    acme = get_registry().get("acme_notes")
    async with db.acquire() as conn:
        await conn.execute("DROP TABLE IF EXISTS acme_notes")
        await conn.execute("DELETE FROM pipeline_migrations WHERE pipeline = 'acme_notes'")
        assert await apply_migrations(conn) == ["acme_notes:notes"]
        assert await apply_migrations(conn) == []  # each migration once
        run_id = str(uuid.uuid4())
        await append_events(conn, [NewEvent(
            run_id=run_id, key="run.submitted", type=RUN_SUBMITTED, actor="api:ann",
            data={"pipeline": "acme_notes", "workflow_id": f"acme_notes-{run_id}",
                  "submitted_by": "ann", "input": {"text": "hi"}})])
        assert await conn.fetchval("SELECT note FROM acme_notes WHERE run_id = $1",
                                   uuid.UUID(run_id)) == "submitted by ann"
        report = await check_consistency(conn)
        assert report.mismatched.get("acme_notes") == [] and report.ok, report.to_dict()

    app = FastAPI()
    install_error_handlers(app)  # the API's: an OverseerError answers JSON with its code
    app.state.pool = db
    app.include_router(acme.api.router())
    app.dependency_overrides[get_principal] = lambda: Principal(subject="ann", role="submitter")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://acme") as client:
        answer = await client.get(f"/acme/runs/{run_id}/notes")
        assert answer.status_code == 200 and answer.json()["notes"] == ["submitted by ann"]
        app.dependency_overrides[get_principal] = lambda: Principal(subject="bob", role="submitter")
        refused = await client.get(f"/acme/runs/{run_id}/notes")  # not bob's: no leak
        assert refused.status_code == 404 and refused.json()["code"] == "not_found"

    view = await pipeline_view(db, "acme_notes", run_id)
    assert view is not None and view.title == "Acme notes" and view.rows == [["submitted by ann"]]
    assert await pipeline_view(db, "resume_tailoring", run_id) is None  # declares none
