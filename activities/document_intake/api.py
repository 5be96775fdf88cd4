"""document_intake's own route: ``POST /v1/submissions``, seed 000's name for an upload run.

The pipeline's :attr:`~overseer.pipelines.Pipeline.api.router`; the run itself is started by the
run service exactly as ``POST /v1/pipelines/document_intake/runs`` does.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, Header, UploadFile, status

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
