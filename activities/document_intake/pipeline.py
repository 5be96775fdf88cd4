"""The ``document_intake`` pipeline's declaration (seed 000): its graph and how Overseer hosts it.

It runs on its own ``DocumentIntakeWorkflow`` (batch files split into child runs; field
edits validated against the schema on approval), started through the run service's hook.
"""

from __future__ import annotations

from typing import Any

from activities.document_intake.graph import build_document_intake_graph
from overseer.pipelines import Pipeline


def start(ctx: Any) -> tuple[Any, Any]:
    """Start hook for :func:`overseer.runs.submit_run`: the intake workflow and its input."""
    from activities.document_intake.schema import load_field_schema
    from overseer.catalogue import document_intake_options, request_options
    from workflows.document_intake import DocumentIntakeInput, DocumentIntakeWorkflow

    document = {k: v for k, v in ctx.document.items() if k != "content_type"}
    return DocumentIntakeWorkflow.run, DocumentIntakeInput(
        run_id=ctx.run_id, document=document,
        field_schema=load_field_schema().model_dump(mode="json"),
        options={**document_intake_options(ctx.settings), **request_options(ctx.metadata)},
        submitted_by=ctx.subject, search_attributes=ctx.settings.search_attributes_enabled,
        metadata=ctx.metadata,
    )


def worker_parts() -> dict[str, Any]:
    """What the worker registers for document intake: its workflow, split activity, plugin graph."""
    from activities.document_intake.activities import split_document
    from activities.document_intake.graph import GRAPH_NAME
    from workflows.document_intake import DocumentIntakeWorkflow

    return {"workflows": [DocumentIntakeWorkflow], "activities": [split_document],
            "plugin_graphs": {GRAPH_NAME: build_document_intake_graph()}}


PIPELINE = Pipeline(
    name="document_intake",
    graph=build_document_intake_graph,
    seed="000",
    description=("Essay-contest entry forms: text layer / OCR → extract → validate → confidence "
                 "routing to complete, retry, review agent or a human"),
    accepts=("application/pdf", "image/png", "image/jpeg", "image/tiff", "text/plain"),
    human_gate="approve (with field edits) or reject an escalated record",
    workflow="DocumentIntakeWorkflow",
    worker_parts=worker_parts,
    extra={"start": start},
)
