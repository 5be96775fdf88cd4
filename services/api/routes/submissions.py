"""Submitting documents: ``POST /v1/pipelines/{pipeline}/runs`` and its alias ``POST /v1/submissions``."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Header, UploadFile, status
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)

from activities.document_intake.documents import DocumentLimits, inspect_document, sniff_kind
from activities.document_intake.schema import load_field_schema
from observability.tracing import current_trace_id, tracer
from overseer.catalogue import document_intake_options, get_pipeline, request_options
from overseer.errors import (
    ConflictError,
    DependencyUnavailableError,
    InvalidRequestError,
    PayloadTooLargeError,
    UnreadableDocumentError,
)
from overseer.settings import Settings
from overseer.store.artifacts import sha256_hex, store_artifact
from overseer.store.events import RUN_FAILED, RUN_SUBMITTED, NewEvent, append_events
from services.api.deps import PoolDep, SettingsDep, SubmitterDep, TemporalDep
from services.api.schemas import RunAccepted
from workflows.document_intake import DocumentIntakeInput, DocumentIntakeWorkflow
from workflows.task_queues import PIPELINE_ATTRIBUTE, STATUS_ATTRIBUTE

log = logging.getLogger("overseer.api")
router = APIRouter(tags=["submissions"])

IDEMPOTENCY_NAMESPACE = uuid.UUID("0b4f0f0e-5d1c-4d8e-9a47-3d2c1b0a9f88")
_CHUNK_BYTES = 1024 * 1024


@router.post("/v1/pipelines/{pipeline}/runs", status_code=status.HTTP_202_ACCEPTED,
             response_model=RunAccepted)
async def submit_run(
    pipeline: str,
    principal: SubmitterDep,
    settings: SettingsDep,
    pool: PoolDep,
    temporal: TemporalDep,
    file: Annotated[UploadFile, File(description="PDF, PNG/JPEG/TIFF scan or plain text")],
    metadata: Annotated[str | None, Form(description="optional JSON object")] = None,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=200)] = None,
) -> RunAccepted:
    """Submit a document; starts a durable run and answers 202 at once."""
    spec = get_pipeline(pipeline)
    if "application/pdf" not in spec.accepts:
        raise InvalidRequestError(f"pipeline {pipeline} does not take document uploads")
    meta = _parse_metadata(metadata)
    request_options(meta)  # refuse bad per-run options before storing anything
    data = await _read_bounded(file, settings.max_upload_bytes)
    kind = sniff_kind(data, file.filename, file.content_type)
    limits = DocumentLimits(max_pages=settings.max_document_pages,
                            max_pixels_per_page=settings.max_pixels_per_page,
                            ocr_timeout_seconds=settings.ocr_timeout_seconds)
    info = await asyncio.to_thread(inspect_document, data, kind, limits)
    run_id = (str(uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"{principal.subject}:{pipeline}:{idempotency_key}"))
              if idempotency_key else str(uuid.uuid4()))
    sha = sha256_hex(data)
    document = {"sha256": sha, "kind": kind.value, "filename": _safe_name(file.filename),
                "page_count": info.page_count, "size_bytes": len(data)}
    workflow_id = spec.workflow_id(run_id)
    with tracer().start_as_current_span(f"submit {pipeline}", attributes={
        "overseer.run_id": run_id, "overseer.pipeline": pipeline,
    }):
        await _record_and_start(pool, temporal, settings, data=data, document=document,
                                run_id=run_id, workflow_id=workflow_id, pipeline=pipeline,
                                content_type=file.content_type, subject=principal.subject,
                                idempotency_key=idempotency_key, meta=meta)
    return RunAccepted(run_id=run_id, pipeline=pipeline, status="running",
                       links={"self": f"/v1/runs/{run_id}", "events": f"/v1/runs/{run_id}/events"})


async def _record_and_start(pool: Any, temporal: Any, settings: Settings, *, data: bytes,
                            document: dict[str, Any], run_id: str, workflow_id: str,
                            pipeline: str, content_type: str | None, subject: str,
                            idempotency_key: str | None, meta: dict[str, Any]) -> None:
    """Store the document and ``run.submitted`` in one transaction, then start the workflow."""
    async with pool.acquire() as conn, conn.transaction():
        existing = await conn.fetchrow("SELECT input FROM runs WHERE run_id = $1", uuid.UUID(run_id))
        if existing is not None:
            previous = json.loads(existing["input"]).get("document", {})
            if previous.get("sha256") != document["sha256"]:
                raise ConflictError("Idempotency-Key was already used for a different document",
                                    details={"run_id": run_id})
        await store_artifact(conn, data, kind=document["kind"], page_count=document["page_count"],
                             filename=document["filename"], content_type=content_type)
        await append_events(conn, [NewEvent(
            run_id=run_id, key="run.submitted", type=RUN_SUBMITTED, actor=f"api:{subject}",
            trace_id=current_trace_id(),
            data={"pipeline": pipeline, "workflow_id": workflow_id, "submitted_by": subject,
                  "idempotency_key": idempotency_key,
                  "input": {"document": document, "metadata": meta}},
        )])
    await _start(temporal, settings, pool, run_id, workflow_id, document, subject, meta)


@router.post("/v1/submissions", status_code=status.HTTP_202_ACCEPTED, response_model=RunAccepted)
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
    return await submit_run("document_intake", principal, settings, pool, temporal, file,
                            metadata, idempotency_key)


async def _start(temporal: Any, settings: Settings, pool: Any, run_id: str, workflow_id: str,
                 document: dict[str, Any], subject: str, meta: dict[str, Any]) -> None:
    inp = DocumentIntakeInput(
        run_id=run_id, document=document,
        field_schema=load_field_schema().model_dump(mode="json"),
        options={**document_intake_options(settings), **request_options(meta)},
        submitted_by=subject,
        search_attributes=settings.search_attributes_enabled, metadata=meta,
    )
    kwargs: dict[str, Any] = {}
    if settings.search_attributes_enabled:
        kwargs["search_attributes"] = TypedSearchAttributes([
            SearchAttributePair(PIPELINE_ATTRIBUTE, "document_intake"),
            SearchAttributePair(STATUS_ATTRIBUTE, "running"),
        ])
    try:
        await temporal.start_workflow(
            DocumentIntakeWorkflow.run, inp, id=workflow_id, task_queue=settings.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            static_summary=f"document_intake: {document['filename'] or document['sha256'][:12]}",
            **kwargs,
        )
    except Exception as err:
        from temporalio.exceptions import WorkflowAlreadyStartedError

        if isinstance(err, WorkflowAlreadyStartedError):
            return  # an idempotent retry of a run that already finished
        log.warning("could not start workflow %s: %r", workflow_id, err)
        async with pool.acquire() as conn:
            await append_events(conn, [NewEvent(
                run_id=run_id, key="run.start_failed", type=RUN_FAILED, actor="api",
                data={"status": "failed", "error": {"code": "start_failed",
                                                    "message": "could not start the workflow"}},
            )])
        raise DependencyUnavailableError("Temporal is unavailable; the run was not started",
                                         details={"run_id": run_id}) from err


async def _read_bounded(file: UploadFile, max_bytes: int) -> bytes:
    """Read an upload in chunks, refusing it as soon as it passes ``max_bytes``."""
    chunks: list[bytes] = []
    total = 0
    while chunk := await file.read(_CHUNK_BYTES):
        total += len(chunk)
        if total > max_bytes:
            raise PayloadTooLargeError(f"upload larger than {max_bytes} bytes",
                                       details={"max_upload_bytes": max_bytes})
        chunks.append(chunk)
    data = b"".join(chunks)
    if not data:
        raise UnreadableDocumentError("the uploaded file is empty", details={"reason": "empty"})
    return data


def _parse_metadata(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise InvalidRequestError("metadata is not valid JSON") from None
    if not isinstance(value, dict):
        raise InvalidRequestError("metadata must be a JSON object")
    return value


def _safe_name(name: str | None) -> str | None:
    """Keep only the base name of an uploaded file (no path traversal reaches storage or UIs)."""
    if not name:
        return None
    base = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    return base[:255] or None
