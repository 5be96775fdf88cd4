"""document_intake's own routes: ``POST /v1/submissions`` and a run's review suggestions.

The pipeline's :attr:`~overseer.pipelines.Pipeline.api.router`. ``POST /v1/submissions`` is
seed 000's name for an upload run, started by the run service exactly as ``POST
/v1/pipelines/document_intake/runs`` does; ``GET /v1/runs/{run_id}/suggestions`` reads the
pipeline's own table (:mod:`activities.document_intake.suggestions`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, Header, UploadFile, status

from activities.document_intake.suggestions import list_suggestions
from overseer.plugin import (
    PoolDep,
    RunAccepted,
    SettingsDep,
    SubmitterDep,
    TemporalDep,
    Upload,
    parse_metadata,
    read_bounded,
    submit_run,
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
