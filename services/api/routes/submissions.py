"""Starting runs: ``POST /v1/pipelines/{pipeline}/runs`` (JSON or upload).

HTTP only: the body is parsed here and handed to the run service (:mod:`overseer.runs`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request, status
from starlette.datastructures import UploadFile as StarletteUpload

from overseer.errors import InvalidRequestError
from overseer.http_routes import (
    PoolDep,
    RunAccepted,
    SettingsDep,
    SubmitterDep,
    TemporalDep,
    parse_metadata,
    read_bounded,
)
from overseer.runs import Upload, submit_run

router = APIRouter(tags=["submissions"])


RUN_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {
                "type": "object", "required": ["input"],
                "properties": {"input": {"type": "object"}, "metadata": {"type": "object"}}}},
            "multipart/form-data": {"schema": {
                "type": "object", "required": ["file"],
                "properties": {"file": {"type": "string", "format": "binary"},
                               "metadata": {"type": "string",
                                            "description": "optional JSON object"}}}},
        },
    }
}


@router.post("/v1/pipelines/{pipeline}/runs", status_code=status.HTTP_202_ACCEPTED,
             response_model=RunAccepted, openapi_extra=RUN_BODY)
async def submit_pipeline_run(
    pipeline: str,
    request: Request,
    principal: SubmitterDep,
    settings: SettingsDep,
    pool: PoolDep,
    temporal: TemporalDep,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=200)] = None,
) -> RunAccepted:
    """Start a run: JSON ``{"input": {...}, "metadata": {...}}``, or a multipart ``file`` (+ ``metadata``)."""
    content_type = request.headers.get("content-type", "")
    upload: Upload | None = None
    graph_input: Any = None
    if content_type.startswith("multipart/form-data"):
        form = await request.form()
        file = form.get("file")
        if not isinstance(file, StarletteUpload):
            raise InvalidRequestError("multipart body needs a 'file' part", details={"field": "file"})
        raw_meta = form.get("metadata")
        meta = parse_metadata(raw_meta if isinstance(raw_meta, str) else None)
        upload = Upload(data=await read_bounded(file, settings.max_upload_bytes),
                        filename=file.filename, content_type=file.content_type)
    else:
        body = await _json_body(request)
        graph_input = body.get("input")
        meta = body.get("metadata") or {}
        if not isinstance(meta, dict):
            raise InvalidRequestError("metadata must be a JSON object", details={"field": "metadata"})
    submitted = await submit_run(pool, temporal, settings, pipeline_name=pipeline,
                                 subject=principal.subject, metadata=meta,
                                 idempotency_key=idempotency_key, graph_input=graph_input,
                                 upload=upload)
    return RunAccepted(run_id=submitted.run_id, pipeline=submitted.pipeline,
                       status=submitted.status, links=submitted.links)


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InvalidRequestError("the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise InvalidRequestError('the body must be a JSON object {"input": {...}}')
    return body
