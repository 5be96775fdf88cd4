"""document_intake's own routes: ``POST /v1/submissions`` and a run's review suggestions.

The pipeline's :attr:`~overseer.pipelines.Pipeline.api.router`. ``POST /v1/submissions`` is
seed 000's name for an upload run, started by the run service exactly as ``POST
/v1/pipelines/document_intake/runs`` does; ``GET /v1/runs/{run_id}/suggestions`` reads the
pipeline's own table (:mod:`activities.document_intake.suggestions`).
"""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Header, UploadFile, status

from overseer.plugin import (
    PoolDep,
    PrincipalDep,
    RunAccepted,
    SettingsDep,
    SubmitterDep,
    TemporalDep,
    Upload,
    parse_metadata,
    read_bounded,
    submit_run,
    visible_run,
)


def build_router() -> APIRouter:
    """The pipeline's extra routes (``Pipeline.api.router``)."""
    router = APIRouter(tags=["submissions"])
    router.add_api_route("/v1/submissions", submit_document, methods=["POST"],
                         status_code=status.HTTP_202_ACCEPTED, response_model=RunAccepted)
    router.add_api_route("/v1/runs/{run_id}/suggestions", list_suggestions, methods=["GET"],
                         tags=["runs"])
    return router


async def submit_document(
    principal: SubmitterDep,
    settings: SettingsDep,
    pool: PoolDep,
    temporal: TemporalDep,
    file: Annotated[UploadFile, File(description="PDF, PNG/JPEG/TIFF scan or plain text")],
    metadata: Annotated[str | None, Form(description="optional JSON object")] = None,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=200)] = None,
) -> RunAccepted:
    """Alias of ``POST /v1/pipelines/document_intake/runs`` (seed 000 submissions)."""
    upload = Upload(data=await read_bounded(file, settings.max_upload_bytes),
                    filename=file.filename, content_type=file.content_type)
    submitted = await submit_run(pool, temporal, settings, pipeline_name="document_intake",
                                 subject=principal.subject, metadata=parse_metadata(metadata),
                                 idempotency_key=idempotency_key, upload=upload)
    return RunAccepted(run_id=submitted.run_id, pipeline=submitted.pipeline,
                       status=submitted.status, links=submitted.links)


async def list_suggestions(run_id: str, principal: PrincipalDep, pool: PoolDep) -> dict[str, Any]:
    """The review agent's proposals for the run, each with its quote check and what became of it.

    ``status``: ``pending``, ``auto_applied``, ``approved``, ``overridden`` (approved with
    another value) or ``rejected``. ``suggestions`` are values whose quote is not in the
    document: shown, never applied.

    Raises:
        NotFoundError: an unknown run, or one the caller may not read (404).
    """
    run = await visible_run(pool, run_id, principal)
    rows = await pool.fetch(
        """SELECT s.suggestion_id, s.status, s.proposed_updates, s.current_values, s.evidence,
                  s.strength, s.strategy, s.created_at, s.resolved_at, s.resolved_by, e.data
           FROM review_suggestions s
           LEFT JOIN events e ON e.run_id = s.run_id AND e.type = 'review.suggested'
                             AND e.data->>'suggestion_id' = s.suggestion_id::text
           WHERE s.run_id = $1 ORDER BY s.created_at""", uuid.UUID(run.run_id))
    items = []
    for r in rows:
        data = json.loads(r["data"]) if r["data"] else {}
        items.append({
            "suggestion_id": str(r["suggestion_id"]), "status": r["status"],
            "proposed_updates": json.loads(r["proposed_updates"]),
            "current_values": json.loads(r["current_values"]),
            "evidence": json.loads(r["evidence"]), "strength": r["strength"],
            "strategy": r["strategy"], "suggestions": data.get("suggestions", {}),
            "quote_verified": data.get("quote_verified", {}), "notes": data.get("notes", {}),
            "created_at": r["created_at"].isoformat(),
            "resolved_at": r["resolved_at"].isoformat() if r["resolved_at"] else None,
            "resolved_by": r["resolved_by"]})
    return {"run_id": run.run_id, "items": items}
