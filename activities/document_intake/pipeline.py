"""The ``document_intake`` pipeline's declaration (seed 000): its graph and how Overseer hosts it.

It runs as segments (``SegmentRunWorkflow``, LangGraph's loop on its Postgres checkpointer;
the graph module says which nodes leave the segment), through these hooks: ``make_input``
(the schema and options snapshot a run starts with), ``split`` (a batch file becomes one
child run per entry; a short text layer's split, and its segments, are local activities), ``check_decision``
(field edits validated against the schema on approval), ``result`` / ``node_snapshot`` (the
run view: the record, never page text).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from activities.document_intake import suggestions
from activities.document_intake.assess import public_snapshot
from activities.document_intake.decisions import check_decision
from activities.document_intake.graph import build_document_intake_graph
from overseer.plugin import Api, Gate, Intake, NodeHooks, Pipeline, RunHooks, Store

SHORT_TEXT_LAYER_PAGES = 10
"""A text-layer document of at most this many pages is split, and its segments run, in local
activities."""


def short_text_layer(state: Mapping[str, Any]) -> bool:
    """Whether this run's work is short: a text layer (no OCR expected) of ≤ 10 pages.

    ``Pipeline.run.split_locally`` and ``Pipeline.run.local_segments``; pure (reads the document
    reference the API stored). A scanned document's split and segments OCR its pages, so
    they stay heartbeating activities.
    """
    document = state.get("document") or {}
    return bool(document.get("has_text_layer")) and document.get("kind") in ("pdf", "text") \
        and 0 < int(document.get("page_count") or 0) <= SHORT_TEXT_LAYER_PAGES


def make_input(ctx: Any) -> dict[str, Any]:
    """The graph's input state for a new run (``Pipeline.intake.make_input``).

    Args:
        ctx: the run service's ``StartContext`` (the stored upload, settings, metadata).

    Returns:
        :class:`~activities.document_intake.state.DocumentIntakeState` context keys:
        ``run_id``, ``document`` (a reference), ``span`` (None), the field schema and
        options snapshots, ``max_steps`` and empty counters.
    """
    from activities.document_intake.options import document_intake_options
    from activities.document_intake.schema import load_field_schema
    from overseer.plugin import request_options

    options = {**document_intake_options(ctx.settings), **request_options(ctx.metadata)}
    return initial_state(ctx.run_id, ctx.document, options,
                         load_field_schema().model_dump(mode="json"))


def initial_state(run_id: str, document: dict[str, Any], options: dict[str, Any],
                  field_schema: dict[str, Any]) -> dict[str, Any]:
    """The graph's input for one document: context keys plus empty counters."""
    return {
        "run_id": run_id,
        "document": {k: v for k, v in document.items() if k != "content_type"},
        "span": None, "field_schema": field_schema, "options": options,
        "max_steps": int(options.get("thresholds", {}).get("max_steps", 5)),
        "tries": 0, "tools_used": [], "record": {},
    }


def record_fields() -> dict[str, dict[str, Any]]:
    """The console's field form (``Pipeline.api.record_fields``): label and required flag per field."""
    from activities.document_intake.schema import load_field_schema

    return {f.name: {"label": f.label_variants[0], "required": f.required}
            for f in load_field_schema().fields}


def build_router() -> Any:
    """The pipeline's own route (``Pipeline.api.router``): ``POST /v1/submissions``."""
    from activities.document_intake.api import build_router as intake_router

    return intake_router()


def worker_parts() -> dict[str, Any]:
    """What the worker registers besides the graph runtime: the split activity."""
    from activities.document_intake.activities import split_parts

    return {"activities": [split_parts]}


PIPELINE = Pipeline(
    name="document_intake",
    graph=build_document_intake_graph,
    seed="000",
    description=("Essay-contest entry forms: text layer / OCR → extract → validate → confidence "
                 "routing to complete, retry, review agent or a human"),
    intake=Intake(accepts=("application/pdf", "image/png", "image/jpeg", "image/tiff",
                           "text/plain"),
                  make_input=make_input),
    gate=Gate(human_gate="approve (with field edits) or reject an escalated record",
              check_decision=check_decision,
              decides_on_state=True),  # its refusal rules read the state at the pause
    run=RunHooks(result=public_snapshot, split="document_intake.split",
                 split_locally=short_text_layer, local_segments=short_text_layer),
    nodes=NodeHooks(node_snapshot=public_snapshot),
    api=Api(router=build_router, record_fields=record_fields,
            console_view=suggestions.console_view),
    store=Store(migrations=suggestions.MIGRATIONS, projectors=suggestions.PROJECTORS,
                read_models=(suggestions.TABLE,)),
    worker_parts=worker_parts,
)
