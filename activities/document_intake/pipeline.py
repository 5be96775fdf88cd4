"""The ``document_intake`` pipeline's declaration (seed 000): its graph and how Overseer hosts it."""

from __future__ import annotations

from activities.document_intake.graph import build_document_intake_graph
from overseer.pipelines import Pipeline

PIPELINE = Pipeline(
    name="document_intake",
    graph=build_document_intake_graph,
    seed="000",
    description=("Essay-contest entry forms: text layer / OCR → extract → validate → confidence "
                 "routing to complete, retry, review agent or a human"),
    accepts=("application/pdf", "image/png", "image/jpeg", "image/tiff", "text/plain"),
    human_gate="approve (with field edits) or reject an escalated record",
    workflow="DocumentIntakeWorkflow",
)
