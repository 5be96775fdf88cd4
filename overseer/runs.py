"""The run service for ``/v1``: how a pipeline's run is submitted and its workflow started.

``POST /v1/pipelines/{name}/runs`` (JSON or an upload) calls :func:`submit_run`, which
validates the input, stores an upload once by hash, records ``run.submitted`` in the same
transaction, and starts the pipeline's workflow with conflict policy USE_EXISTING — so a
retried request with the same ``Idempotency-Key`` maps to the same run and nothing is
started twice. A start that fails is recorded (``run.failed`` with ``start_failed``) and
answered 503: nothing accepted is silently dropped.

Every run is a ``SegmentRunWorkflow``; a pipeline whose graph takes more than the request (a
schema snapshot, options from settings) builds its input with ``Pipeline.intake.make_input``.
Every starter of a run — this service, an Agent Server thread's run
(:mod:`overseer.thread_queue`) and a pipeline's own routes (``Pipeline.api.router``) — builds
a :class:`RunRequest` and starts it through :func:`start`, which builds the workflow's
options once (:func:`run_options`); :func:`start_or_record` records a start Temporal did
not take. Decisions reach a run through :mod:`overseer.run_decisions`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import typing
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import asyncpg
from pydantic import ValidationError
from temporalio.client import (
    Client,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from observability.tracing import current_trace_id, tracer
from overseer import access
from overseer.access import Principal
from overseer.checkpoints import copy_checkpoints, segments_app
from overseer.errors import (
    ConflictError,
    DependencyUnavailableError,
    InvalidRequestError,
    NotFoundError,
)
from overseer.graph_codec import encode
from overseer.pipelines import Pipeline
from overseer.registry import get_registry
from overseer.run_options import approval_ladder_options, request_options
from overseer.run_types import (
    PIPELINE_ATTRIBUTE,
    RUN_WORKFLOW,
    STATUS_ATTRIBUTE,
    GraphRunInput,
    RunSettings,
)
from overseer.settings import Settings
from overseer.store.artifacts import sha256_hex, store_artifact
from overseer.store.events import RUN_CANCELLED, RUN_FAILED, RUN_SUBMITTED, NewEvent, append_events

log = logging.getLogger("overseer.runs")

IDEMPOTENCY_NAMESPACE = uuid.UUID("0b4f0f0e-5d1c-4d8e-9a47-3d2c1b0a9f88")
DOCUMENT_TYPES = frozenset({"application/pdf", "image/png", "image/jpeg", "image/tiff",
                            "text/plain"})


@dataclass
class Upload:
    """An uploaded file (already size-checked by the API)."""

    data: bytes
    filename: str | None
    content_type: str | None


@dataclass
class StartContext:
    """Everything a pipeline's start hook may use.

    Attributes:
        pipeline: the pipeline; run_id: the run; workflow_id: ``<pipeline>-<run_id>``.
        subject: the submitter; metadata: the request's metadata.
        document: the stored upload's reference (uploads only); input: JSON input (JSON runs).
        settings: the process settings.
    """

    pipeline: Pipeline
    run_id: str
    workflow_id: str
    subject: str
    metadata: dict[str, Any]
    settings: Settings
    document: dict[str, Any] | None = None
    input: Any = None


@dataclass(frozen=True)
class RunRequest:
    """What starts a run, whoever starts it: the one argument of :func:`start` and :func:`start_or_record`.

    Attributes:
        pipeline: the pipeline.
        run_id: the run (its workflow id is ``pipeline.workflow_id(run_id)``).
        input: the graph's input state; None goes on from the run's thread's checkpoints.
        submitted_by: who started it.
        metadata: the request's metadata (its per-run options are read from it).
        snapshot: the pipeline's options snapshot (default: ``pipeline.options()``).
        own: the starter's own choices of how the run runs, by
            :class:`~overseer.run_types.RunSettings` field name, on top of
            :func:`run_settings`' (an Agent Server run's stream modes, durability,
            checkpoint, LangGraph config …).
        thread_id: the Agent Server thread the run's checkpoints live on (default: its own).
        resume_from: a retry going on from checkpoints copied from a failed run.
        summary: what the Temporal Web UI shows for the run.
        start_delay_seconds: Temporal holds the run's first task this long.
    """

    pipeline: Pipeline
    run_id: str
    input: Any
    submitted_by: str
    metadata: dict[str, Any] = field(default_factory=dict)
    snapshot: dict[str, Any] | None = None
    own: dict[str, Any] = field(default_factory=dict)
    thread_id: str | None = None
    resume_from: dict[str, Any] | None = None
    summary: str = ""
    start_delay_seconds: float = 0.0

    def workflow_input(self, settings: Settings) -> GraphRunInput:
        """The run's ``GraphRunInput``: how it runs (:func:`run_settings`) built once, typed.

        ``options`` records the pipeline's snapshot and the request's per-run options.

        Raises:
            InvalidRequestError: a per-run option in ``metadata`` is not valid (422).
        """
        snapshot = self.pipeline.options() if self.snapshot is None else self.snapshot
        return GraphRunInput(
            run_id=self.run_id, pipeline=self.pipeline.name, input=encode(self.input),
            options={**snapshot, **request_options(self.metadata)},
            run=run_settings(settings, self.metadata, self.own),
            metadata=self.metadata, submitted_by=self.submitted_by,
            search_attributes=settings.search_attributes_enabled, thread_id=self.thread_id,
            resume_from=self.resume_from, announce=self.thread_id is None)


@dataclass
class Submitted:
    """What ``202`` answers: the run id and where to look."""

    run_id: str
    pipeline: str
    status: str = "running"
    links: dict[str, str] = field(default_factory=dict)


@dataclass
class RunRef:
    """A run as a pipeline's own routes see it (:func:`visible_run`).

    Attributes:
        run_id: the run (uuid text); pipeline: its pipeline; workflow_id: its workflow
        (None for a run answered without one); status: the read model's status; result:
        its result once it has one (JSON).
    """

    run_id: str
    pipeline: str
    workflow_id: str | None
    status: str
    result: dict[str, Any] | None


async def visible_run(pool: asyncpg.Pool, run_id: str, principal: Principal) -> RunRef:
    """The run ``run_id`` if ``principal`` may read it (submitters their own, reviewers all).

    Raises:
        NotFoundError: an unknown run, a malformed id, or someone else's run (no leak).
    """
    try:
        rid = uuid.UUID(str(run_id))
    except ValueError:
        raise NotFoundError(f"unknown run {run_id}") from None
    row = await pool.fetchrow("SELECT pipeline, workflow_id, status, result, submitted_by "
                              "FROM runs WHERE run_id = $1", rid)
    if row is None or not access.can(principal, "read", row["submitted_by"]):
        raise NotFoundError(f"unknown run {run_id}")
    result = row["result"]
    return RunRef(run_id=str(rid), pipeline=row["pipeline"], workflow_id=row["workflow_id"],
                  status=row["status"],
                  result=json.loads(result) if isinstance(result, str) else result)


def run_id_for(subject: str, pipeline: str, idempotency_key: str | None) -> str:
    """The run id: ``uuid5`` of (subject, pipeline, key) with an ``Idempotency-Key``, else random."""
    if idempotency_key:
        return str(uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"{subject}:{pipeline}:{idempotency_key}"))
    return str(uuid.uuid4())


async def submit_run(pool: asyncpg.Pool, temporal: Client, settings: Settings, *,
                     pipeline_name: str, subject: str, metadata: dict[str, Any],
                     idempotency_key: str | None = None, graph_input: Any = None,
                     upload: Upload | None = None) -> Submitted:
    """Validate, record and start one run (see the module docstring).

    Args:
        pool: the database pool.
        temporal: the Temporal client.
        settings: process settings.
        pipeline_name: registry name.
        subject: the submitter.
        metadata: the request's metadata.
        idempotency_key: maps a retried request to the same run.
        graph_input: the JSON ``input`` of a JSON run.
        upload: the file of an upload run.

    Raises:
        NotFoundError: unknown pipeline (404).
        InvalidRequestError: the input does not validate, or the pipeline takes the other
            kind of input (422).
        UnreadableDocumentError, UnsupportedDocumentError: a bad upload (422/415).
        ConflictError: the Idempotency-Key was used for a different input (409).
        DependencyUnavailableError: Temporal did not take the start (503; recorded).
    """
    pipeline = get_registry().get(pipeline_name)
    if pipeline.intake.submit_path:
        raise InvalidRequestError(
            f"runs of {pipeline.name} start at {pipeline.intake.submit_path}",
            details={"submit_path": pipeline.intake.submit_path})
    request_options(metadata)  # refuse bad per-run options before storing anything
    if (upload is None) == pipeline.takes_upload:
        wanted = "a file upload (multipart/form-data)" if pipeline.takes_upload else \
            'a JSON body {"input": {...}}'
        raise InvalidRequestError(f"pipeline {pipeline.name} takes {wanted}",
                                  details={"accepts": list(pipeline.intake.accepts)})
    run_id = run_id_for(subject, pipeline.name, idempotency_key)
    workflow_id = pipeline.workflow_id(run_id)
    document = await _inspect(upload, pipeline, settings) if upload else None
    if upload is None:
        graph_input = _validated_input(pipeline, graph_input)
    recorded = {"document": document, "metadata": metadata} if document else \
        {"input": graph_input, "metadata": metadata}
    fingerprint = hashlib.sha256(json.dumps(
        document["sha256"] if document else graph_input, sort_keys=True, default=str
    ).encode()).hexdigest()
    ctx = StartContext(pipeline=pipeline, run_id=run_id, workflow_id=workflow_id, subject=subject,
                       metadata=metadata, settings=settings, document=document,
                       input=graph_input)
    with tracer().start_as_current_span(f"submit {pipeline.name}", attributes={
            "overseer.run_id": run_id, "overseer.pipeline": pipeline.name}):
        async with pool.acquire() as conn, conn.transaction():
            existing = await conn.fetchrow("SELECT input FROM runs WHERE run_id = $1",
                                           uuid.UUID(run_id))
            if existing is not None and \
                    json.loads(existing["input"]).get("fingerprint", fingerprint) != fingerprint:
                raise ConflictError("Idempotency-Key was already used for a different input",
                                    details={"run_id": run_id})
            if upload is not None and document is not None:
                await store_artifact(conn, upload.data, kind=document["kind"],
                                     page_count=document.get("page_count") or 0,
                                     filename=document["filename"],
                                     content_type=upload.content_type)
            await append_events(conn, [NewEvent(
                run_id=run_id, key="run.submitted", type=RUN_SUBMITTED, actor=f"api:{subject}",
                trace_id=current_trace_id(),
                data={"pipeline": pipeline.name, "workflow_id": workflow_id,
                      "submitted_by": subject, "idempotency_key": idempotency_key,
                      "input": {**recorded, "fingerprint": fingerprint}},
            )])
        await start_or_record(pool, temporal, settings, _request(ctx))
    return Submitted(run_id=run_id, pipeline=pipeline.name,
                     links={"self": f"/v1/runs/{run_id}", "events": f"/v1/runs/{run_id}/events"})


async def retry_run(pool: asyncpg.Pool, temporal: Client, settings: Settings, *, run_id: str,
                    subject: str) -> Submitted:
    """Start a new run that resumes a failed one at its failed node.

    Seed 004: retry from the failed agent without redoing the rest.

    The new run gets a copy of the failed run's LangGraph checkpoints and goes on from the
    last one (LangGraph runs again only the tasks of the failed superstep that did not
    finish); one with no checkpoint starts over. Its ``parent_run_id`` is the failed run.

    Raises:
        NotFoundError: unknown run (404).
        ConflictError: the run has not failed (409).
        InvalidRequestError: its pipeline runs on a workflow of its own (422).
        DependencyUnavailableError: Temporal did not take the start (503; recorded).
    """
    rid = uuid.UUID(run_id)
    row = await pool.fetchrow("SELECT pipeline, status, input, submitted_by FROM runs "
                              "WHERE run_id = $1", rid)
    if row is None:
        raise NotFoundError(f"unknown run {run_id}")
    if row["status"] != "failed":
        raise ConflictError("only a failed run can be retried", details={"status": row["status"]})
    pipeline = get_registry().get(row["pipeline"])
    if pipeline.intake.submit_path:
        raise InvalidRequestError(f"runs of {pipeline.name} cannot be retried from a node")
    recorded = json.loads(row["input"])
    tries = await pool.fetchval("SELECT count(*) FROM runs WHERE parent_run_id = $1", rid)
    new_id = str(uuid.uuid5(rid, f"retry:{tries + 1}"))
    ctx = StartContext(pipeline=pipeline, run_id=new_id, workflow_id=pipeline.workflow_id(new_id),
                       subject=subject, metadata=recorded.get("metadata") or {},
                       settings=settings, document=recorded.get("document"),
                       input=recorded.get("input"))
    resume_from: dict[str, Any] | None = None
    if await _fork_checkpoints(pool, pipeline.name, run_id, new_id):  # LangGraph goes on
        last = await pool.fetchval(  # from the failed run's last checkpoint
            "SELECT data->>'node' FROM events WHERE run_id = $1 AND type = 'node.completed' "
            "ORDER BY seq DESC LIMIT 1", rid)
        resume_from = {"as_node": last}
    async with pool.acquire() as conn:
        await append_events(conn, [NewEvent(
            run_id=new_id, key="run.submitted", type=RUN_SUBMITTED, actor=f"api:{subject}",
            trace_id=current_trace_id(),
            data={"pipeline": pipeline.name, "workflow_id": ctx.workflow_id,
                  "submitted_by": row["submitted_by"], "parent_run_id": run_id,
                  "retry_of": run_id,
                  "resumed_after": resume_from["as_node"] if resume_from else None,
                  "input": recorded})])
    await start_or_record(pool, temporal, settings, _request(ctx, resume_from=resume_from))
    return Submitted(run_id=new_id, pipeline=pipeline.name,
                     links={"self": f"/v1/runs/{new_id}", "events": f"/v1/runs/{new_id}/events",
                            "retry_of": f"/v1/runs/{run_id}"})


async def _fork_checkpoints(pool: asyncpg.Pool, pipeline: str, failed: str, new: str) -> bool:
    """Copy a failed segments run's LangGraph thread to its retry's; False when it has none.

    The retry then runs from the failed run's last checkpoint: LangGraph keeps the writes
    of the tasks that finished in the failed superstep, so only the failed ones run again.
    """
    await segments_app(pipeline)  # LangGraph's tables exist
    async with pool.acquire() as conn, conn.transaction():
        if not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM checkpoints "
                                   "WHERE thread_id = $1)", failed):
            return False
        await copy_checkpoints(conn, failed, new)
    return True


def _request(ctx: StartContext, *, resume_from: dict[str, Any] | None = None) -> RunRequest:
    """The :class:`RunRequest` of a ``/v1`` run (or its retry).

    ``resume_from`` (a retry): the run's thread already holds the checkpoints it goes on
    from, so its input is None (``GraphRunInput.resume_from``).
    """
    if ctx.pipeline.intake.make_input is not None:
        graph_input = ctx.pipeline.intake.make_input(ctx)
    else:
        graph_input = {"document": ctx.document} if ctx.document else dict(ctx.input or {})
    graph_input = with_run_keys(ctx.pipeline, graph_input, ctx.run_id, ctx.metadata)
    label = (ctx.document or {}).get("filename") or (ctx.document or {}).get("sha256", "")[:12]
    return RunRequest(pipeline=ctx.pipeline, run_id=ctx.run_id,
                      input=None if resume_from is not None else graph_input,
                      submitted_by=ctx.subject, metadata=ctx.metadata, resume_from=resume_from,
                      summary=f"{ctx.pipeline.name}: {label or ctx.run_id}")


def run_settings(settings: Settings, metadata: dict[str, Any] | None = None,
                 own: dict[str, Any] | None = None) -> RunSettings:
    """How a run's workflow runs it (``GraphRunInput.run``), for every starter.

    In order, later ones winning: the operator's defaults (``durability``, the segments'
    local try and heartbeat, the approval ladder), the request's per-run options from its
    ``metadata`` (:func:`~overseer.run_options.request_options`: LLM budget, durability),
    and the starter's ``own`` choices (:class:`~overseer.run_types.RunSettings` field
    names: an Agent Server run's stream modes, checkpoint, LangGraph config …).

    Raises:
        InvalidRequestError: a per-run option in ``metadata`` is not valid (422).
        TypeError: ``own`` names no field of ``RunSettings``.
    """
    asked = request_options(metadata or {})
    chosen: dict[str, Any] = {
        "durability": settings.durability,
        "local_seconds": settings.segment_local_seconds,
        "heartbeat_seconds": settings.segment_heartbeat_seconds,
        "approval": approval_ladder_options(settings)}
    chosen |= {k: asked[k] for k in ("llm_budget_usd", "llm_budget_tokens", "durability")
               if k in asked}
    return RunSettings(**(chosen | (own or {})))


def with_run_keys(pipeline: Pipeline, graph_input: dict[str, Any], run_id: str,
                  metadata: dict[str, Any]) -> dict[str, Any]:
    """``graph_input`` with the keys the runtime adds, each only where the graph declares it.

    The one place they are added, for every starter (``/v1``, an Agent Server run, a
    pipeline's own route): ``run_id``; ``options``, the pipeline's options snapshot with the
    request's per-run options from its ``metadata`` (:func:`overseer.run_options.request_options`);
    ``metadata``. A key the input already has, or the graph's input schema does not
    declare (:func:`input_keys`), is left alone.
    """
    registry = get_registry()
    declared = set() if registry.functional(pipeline.name) else \
        input_keys(registry.builder(pipeline.name))
    extras = {"run_id": run_id, "options": {**pipeline.options(), **request_options(metadata)},
              "metadata": metadata}
    return {**graph_input, **{k: v for k, v in extras.items()
                              if k in declared and k not in graph_input}}


def input_keys(builder: Any) -> set[str]:
    """Keys a graph's input schema declares (TypedDict, pydantic model or dataclass)."""
    schema = builder.input_schema
    fields = getattr(schema, "model_fields", None)
    if isinstance(fields, dict):
        return set(fields)
    try:
        return set(typing.get_type_hints(schema))
    except Exception:  # noqa: BLE001 - unresolvable annotations: fall back to the raw names
        return set(getattr(schema, "__annotations__", {}))


def _validated_input(pipeline: Pipeline, graph_input: Any) -> Any:
    if not isinstance(graph_input, dict):
        raise InvalidRequestError("input must be a JSON object", details={"field": "input"})
    if pipeline.intake.input_model is None:
        return graph_input
    try:
        return pipeline.intake.input_model.model_validate(graph_input).model_dump(mode="json")
    except ValidationError as err:
        raise InvalidRequestError(
            "input does not validate",
            details={"errors": [{"loc": list(e["loc"]), "msg": e["msg"]} for e in err.errors()]},
        ) from None


async def _inspect(upload: Upload, pipeline: Pipeline, settings: Settings) -> dict[str, Any]:
    """The stored-document reference; documents (PDF, images, text) are opened and checked first."""
    from overseer.documents import DocumentLimits, inspect_document, sniff_kind

    sha = sha256_hex(upload.data)
    filename = safe_name(upload.filename)
    if DOCUMENT_TYPES & set(pipeline.intake.accepts):
        kind = sniff_kind(upload.data, upload.filename, upload.content_type)
        limits = DocumentLimits(max_pages=settings.max_document_pages,
                                max_pixels_per_page=settings.max_pixels_per_page,
                                ocr_timeout_seconds=settings.ocr_timeout_seconds)
        info = await asyncio.to_thread(inspect_document, upload.data, kind, limits)
        return {"sha256": sha, "kind": kind.value, "filename": filename,
                "page_count": info.page_count, "has_text_layer": info.has_text_layer,
                "size_bytes": len(upload.data),
                "content_type": upload.content_type}
    return {"sha256": sha, "kind": "data", "filename": filename, "page_count": 0,
            "size_bytes": len(upload.data), "content_type": upload.content_type}


async def start(temporal: Client, settings: Settings, request: RunRequest) -> bool:
    """Start a run's ``SegmentRunWorkflow`` (idempotent): the one place a run's workflow starts.

    Every starter — ``/v1`` submissions and retries, an Agent Server thread's run, a
    pipeline's own routes (``Pipeline.api.router``) — builds a :class:`RunRequest` and comes
    here (a split's child runs are started by their parent workflow, from its own input).
    The starter sets the search attributes (``OverseerPipeline``, ``OverseerStatus=running``),
    so the workflow upserts none; conflict policy ``USE_EXISTING`` and reuse policy
    ``REJECT_DUPLICATE`` map a retried request to the same run and start nothing twice.

    Args:
        temporal: the client.
        settings: the task queue, the operator's run options and whether search attributes
            are set.
        request: the run.

    Returns:
        True when started now (or already running); False when the id's run had already
        finished (an idempotent retry).

    Raises:
        Exception: whatever Temporal's client raised when it did not take the start (the
            caller records or retries it).
    """
    kwargs: dict[str, Any] = {}
    if settings.search_attributes_enabled:
        kwargs["search_attributes"] = TypedSearchAttributes([
            SearchAttributePair(PIPELINE_ATTRIBUTE, request.pipeline.name),
            SearchAttributePair(STATUS_ATTRIBUTE, "running"),
        ])
    if request.start_delay_seconds:
        kwargs["start_delay"] = timedelta(seconds=request.start_delay_seconds)
    try:
        await temporal.start_workflow(
            RUN_WORKFLOW, request.workflow_input(settings),
            id=request.pipeline.workflow_id(request.run_id), task_queue=settings.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            static_summary=request.summary or f"{request.pipeline.name}: {request.run_id}",
            **kwargs)
    except WorkflowAlreadyStartedError:
        return False
    return True


async def cancel_run_workflow(pool: asyncpg.Pool, temporal: Client, workflow_id: str,
                              run_id: str, subject: str) -> bool:
    """Cancel a run's workflow and put its cancellation on record at once: the one cancel path.

    The event has the key of the run's own ending (``run.finished``), so whichever of this
    and the workflow's own ``run.cancelled`` (or an ending it reached first) is written
    first is the run's one terminal event; a workflow already gone is recorded here.

    Returns:
        True when the workflow was asked to cancel; False when it was gone already.

    Raises:
        DependencyUnavailableError: Temporal did not answer (503).
    """
    handle = temporal.get_workflow_handle(workflow_id)
    found = True
    try:
        await handle.cancel()
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise DependencyUnavailableError("Temporal did not answer") from err
        found = False
    async with pool.acquire() as conn:
        status = await conn.fetchval("SELECT status FROM runs WHERE run_id = $1",
                                     uuid.UUID(run_id))
        if status not in ("completed", "rejected", "failed", "cancelled"):
            await append_events(conn, [NewEvent(
                run_id=run_id, key="run.finished", type=RUN_CANCELLED, actor=f"api:{subject}",
                data={"status": "cancelled", "outcome": "cancelled",
                      "snapshot": {"outcome": "cancelled"}})])
    return found


async def record_start_failure(pool: asyncpg.Pool, run_id: str) -> None:
    """``run.failed`` with ``start_failed`` for an accepted run Temporal did not take.

    Keyed ``run.start_failed``, so a retried request records it once; the run's read model
    says it failed instead of showing it running for ever.
    """
    async with pool.acquire() as conn:
        await append_events(conn, [NewEvent(
            run_id=run_id, key="run.start_failed", type=RUN_FAILED, actor="api",
            data={"status": "failed", "error": {"code": "start_failed",
                                                "message": "could not start the workflow"}},
        )])


async def start_or_record(pool: asyncpg.Pool, temporal: Client, settings: Settings,
                          request: RunRequest) -> None:
    """Start an accepted run's workflow (:func:`start`), or record that it could not.

    For a run whose ``run.submitted`` is written: a start Temporal does not take is
    recorded (:func:`record_start_failure`) and answered 503, so nothing accepted is
    silently dropped; the same request again (same run id) starts it then.

    Raises:
        DependencyUnavailableError: Temporal did not take the start (503); ``details``
            names the ``run_id``.
    """
    try:
        await start(temporal, settings, request)
    except Exception as err:
        log.warning("could not start the workflow of run %s: %r", request.run_id, err)
        await record_start_failure(pool, request.run_id)
        raise DependencyUnavailableError("Temporal is unavailable; the run was not started",
                                         details={"run_id": request.run_id}) from err


def safe_name(name: str | None) -> str | None:
    """Keep only the base name of an uploaded file (no path traversal reaches storage or UIs)."""
    if not name:
        return None
    base = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    return base[:255] or None
