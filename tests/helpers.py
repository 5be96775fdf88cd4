"""Helpers shared by the workflow and end-to-end tests."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import asyncpg

from activities.document_intake.options import document_intake_options
from activities.document_intake.pipeline import initial_state
from activities.document_intake.schema import load_field_schema
from overseer.documents import inspect_document, sniff_kind
from overseer.graph_codec import encode
from overseer.run_types import GraphRunInput
from overseer.settings import Settings
from overseer.store.artifacts import store_artifact
from overseer.store.events import RUN_SUBMITTED, NewEvent, append_events

T = TypeVar("T")


async def assert_eventually(check: Callable[[], Awaitable[T]], *, timeout: float = 30.0,
                            interval: float = 0.1) -> T:
    """Poll ``check`` until it returns without AssertionError (no bare sleeps in tests)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(interval)


async def submit_document(pool: asyncpg.Pool, data: bytes, filename: str, *,
                          settings: Settings | None = None, search_attributes: bool = True,
                          options: dict[str, Any] | None = None) -> GraphRunInput:
    """Store a document and record ``run.submitted`` as the API does; return the workflow input
    (a ``document_intake`` run of ``SegmentRunWorkflow``, id ``document_intake-<run_id>``)."""
    settings = settings or Settings(environment="test")
    kind = sniff_kind(data, filename, None)
    info = inspect_document(data, kind)
    run_id = str(uuid.uuid4())
    async with pool.acquire() as conn:
        sha = await store_artifact(conn, data, kind=kind.value, page_count=info.page_count,
                                   filename=filename, content_type=None)
        document = {"sha256": sha, "kind": kind.value, "filename": filename,
                    "page_count": info.page_count, "has_text_layer": info.has_text_layer}
        await append_events(conn, [NewEvent(
            run_id=run_id, key="run.submitted", type=RUN_SUBMITTED, actor="test",
            data={"pipeline": "document_intake", "workflow_id": f"document_intake-{run_id}",
                  "submitted_by": "tester", "input": {"document": document}},
        )])
    run_options = {**document_intake_options(settings), **(options or {})}
    state = initial_state(run_id, document, run_options,
                          load_field_schema().model_dump(mode="json"))
    return GraphRunInput(run_id=run_id, pipeline="document_intake", input=encode(state),
                         options=run_options, submitted_by="tester",
                         search_attributes=search_attributes)


async def event_types(pool: asyncpg.Pool, run_id: str) -> list[str]:
    """The run's event types in append order."""
    rows = await pool.fetch("SELECT type FROM events WHERE run_id = $1 ORDER BY seq",
                            uuid.UUID(run_id))
    return [r["type"] for r in rows]


AGREEMENT = Path(__file__).resolve().parents[1] / "examples" / "due_diligence" / \
    "crunchbase_data_license.txt"
"""The README's due-diligence example: a real commercial data licence (``licensedcode-data``)."""


async def submit_agreement(pool: asyncpg.Pool, temporal: Any, settings: Settings, *,
                           metadata: dict[str, Any], idempotency_key: str | None = None) -> Any:
    """Submit :data:`AGREEMENT` to ``due_diligence`` through the run service, as the API does.

    Returns:
        The run service's ``Submitted`` (``run_id``; the workflow id is
        ``due_diligence-<run_id>``).

    Raises:
        overseer.errors.DependencyUnavailableError: Temporal did not take the start.
    """
    from overseer.runs import Upload, submit_run

    return await submit_run(pool, temporal, settings, pipeline_name="due_diligence",
                            subject="alice", metadata=metadata, idempotency_key=idempotency_key,
                            upload=Upload(AGREEMENT.read_bytes(), "agreement.txt", "text/plain"))
