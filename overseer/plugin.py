"""The plug-in API: what a pipeline package (``activities/<name>/``) builds on.

A pipeline contributes its graph, its :class:`Pipeline` entry and, optionally, its own HTTP
routes (``Pipeline.api.router``) and stream protocol (:class:`RunStream`). Everything it needs
from the runtime is named here. Of Overseer, a pipeline imports only this module and the two
libraries it shares with the runtime, :mod:`overseer.documents` (reading and OCR) and
:mod:`overseer.embeddings`, and it never imports the API (``services``) or the workflows
(``workflows``): ``make lint`` holds it to that (import-linter). The names, by what they
are for:

- **the contract**: :class:`Pipeline` with its hooks grouped by where they run
  (:class:`Intake` in the API before a run, :class:`Gate` in the workflow's update
  validator, :class:`RunHooks` in the workflow, :class:`NodeHooks` in the segment
  activity, :class:`Api` in the API process with a :class:`ConsoleView` of its own,
  :class:`Store` its own tables, migrations and projectors), :class:`RunStream`,
  :class:`DecisionRefusedError` (a refusal from ``Gate.check_decision``);
- **errors** (:mod:`overseer.errors`): the :class:`OverseerError` family a pipeline raises
  and catches, each with its stable code and HTTP status: :class:`InvalidRequestError`,
  :class:`NotFoundError`, :class:`ConflictError`, :class:`DependencyUnavailableError`;
  a model call's :class:`LLMCallError` (:class:`LLMClientError`,
  :class:`LLMRateLimitedError`, :class:`LLMRefusedError`, :class:`LLMResponseError`) and
  :class:`BudgetExceededError`; and :class:`BudgetStop`, which a node raises instead of a
  call the run's LLM budget cannot pay for (:mod:`overseer.budget`);
- **the event log** (:mod:`overseer.store.events`): :class:`NewEvent`, :func:`append_events`
  and the event types a pipeline writes: :data:`LLM_CALLED`, :data:`ROUTE_DECIDED`,
  :data:`REVIEW_SUGGESTED`, and :data:`RUN_SUBMITTED` / :data:`RUN_COMPLETED` for a run a
  route answers itself; :data:`APPROVAL_DECIDED` for a projector of its own tables;
- **settings** (:mod:`overseer.settings`): :class:`Settings`, :func:`get_settings`;
- **artifacts** (:mod:`overseer.store.artifacts`): :func:`store_artifact`,
  :func:`load_artifact`, and a document's pages read once (:func:`cached_pages`,
  :func:`cache_pages`);
- **options** (:mod:`overseer.run_options`): :func:`approval_ladder_options` for a pipeline's
  options snapshot, :func:`request_options` (a request's per-run options);
- **the run service** (:mod:`overseer.runs`, :mod:`overseer.run_decisions`):
  :func:`submit_run` with :class:`Upload` (a ``/v1``-shaped submission), or, for a route
  that records its own submission, a :class:`RunRequest` started by
  :func:`start_or_record` (:func:`run_settings` says how the run runs);
  :func:`decide` (a person's decision through the run's gate; :func:`send_update` for
  claims), :func:`cancel_run_workflow`, :func:`visible_run` (a run the caller may read,
  :class:`RunRef`);
- **a run's stream** (:mod:`overseer.token_stream`): :func:`durable_items` and
  :func:`merge_live` read the workflow's durable stream and the run's live rows in one
  order; :func:`count_own` counts a stream protocol's live events;
- **in a node** (the activity side of the runtime, under ``activities/``): the process's
  pool and settings (:func:`get_runtime`); the LLM layer (:func:`chat_model`,
  :func:`select_model`, :func:`allowed_models`, :func:`llm_enabled`, :func:`call_json` with
  :class:`LLMContext` and :func:`extraction_messages`, :func:`classify_error`,
  :func:`model_call_retryable` (retry a transient failure, or use the offline strategy),
  :func:`price_usd`, :func:`reply_usage`), which meters every call against the run's
  budget; events from a node (:func:`append_from_activity`); heartbeats while a long step runs
  (:func:`with_heartbeats`); a stored document's pages through the page cache
  (:func:`load_pages`); errors as Temporal sees them (:func:`temporal_errors`,
  :func:`as_application_error`, :func:`error_dict`); a node's retry policy
  (:func:`node_retry_policy`); the task's idempotency key for a side effect outside the
  graph, the same on every retry and re-run (:func:`idempotency_key`);
- **HTTP routes** (:mod:`overseer.http_routes`): the dependencies (``PoolDep``, ``SettingsDep``,
  ``TemporalDep``, ``PrincipalDep``, ``SubmitterDep``, ``ReviewerDep``), the caller
  (:class:`Principal`), bounded uploads (:func:`read_bounded`, :func:`parse_metadata`)
  the ``202`` answer (:class:`RunAccepted`) and one SSE message (:func:`sse_frame`, how
  every stream Overseer serves is framed). The names of :mod:`overseer.http_routes` are
  imported on first use: a worker loads every pipeline's graph, and with it this module,
  but serves no route, so it does not import FastAPI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from overseer.access import Principal
from overseer.budget import BudgetStop
from overseer.errors import (
    BudgetExceededError,
    ConflictError,
    DependencyUnavailableError,
    InvalidRequestError,
    LLMCallError,
    LLMClientError,
    LLMRateLimitedError,
    LLMRefusedError,
    LLMResponseError,
    NotFoundError,
    OverseerError,
)
from overseer.idempotency import idempotency_key
from overseer.pipelines import (
    Api,
    ConsoleView,
    DecisionRefusedError,
    Gate,
    Intake,
    NodeHooks,
    Pipeline,
    RunHooks,
    RunStream,
    Store,
)
from overseer.resources import get_runtime
from overseer.run_decisions import decide, send_update
from overseer.run_options import approval_ladder_options, request_options
from overseer.runs import (
    RunRef,
    RunRequest,
    Upload,
    cancel_run_workflow,
    run_settings,
    start_or_record,
    submit_run,
    visible_run,
)
from overseer.runtime.document_pages import load_pages
from overseer.runtime.errors import as_application_error, error_dict, temporal_errors
from overseer.runtime.events import append_from_activity
from overseer.runtime.heartbeat import with_heartbeats
from overseer.runtime.llm import (
    LLMContext,
    allowed_models,
    call_json,
    chat_model,
    classify_error,
    extraction_messages,
    llm_enabled,
    model_call_retryable,
    price_usd,
    reply_usage,
    select_model,
)
from overseer.runtime.retry import node_retry_policy
from overseer.settings import Settings, get_settings
from overseer.store.artifacts import cache_pages, cached_pages, load_artifact, store_artifact
from overseer.store.events import (
    APPROVAL_DECIDED,
    LLM_CALLED,
    REVIEW_SUGGESTED,
    ROUTE_DECIDED,
    RUN_COMPLETED,
    RUN_SUBMITTED,
    NewEvent,
    append_events,
)
from overseer.token_reader import count_own, durable_items, merge_live

if TYPE_CHECKING:
    from overseer.http_routes import (
        PoolDep,
        PrincipalDep,
        ReviewerDep,
        RunAccepted,
        SettingsDep,
        SubmitterDep,
        TemporalDep,
        parse_metadata,
        read_bounded,
        sse_frame,
    )

_HTTP_NAMES = frozenset({"PoolDep", "PrincipalDep", "ReviewerDep", "RunAccepted", "SettingsDep",
                         "SubmitterDep", "TemporalDep", "parse_metadata", "read_bounded",
                         "sse_frame"})
"""The names of :mod:`overseer.http_routes`, imported on first use (see the module docstring)."""

if not TYPE_CHECKING:  # mypy reads the names above; a module __getattr__ would hide typos

    def __getattr__(name: str) -> Any:
        """An HTTP route name (:data:`_HTTP_NAMES`) from :mod:`overseer.http_routes`, imported now.

        Raises:
            AttributeError: ``name`` is not a name of this module.
        """
        if name in _HTTP_NAMES:
            from overseer import http_routes

            return getattr(http_routes, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "sse_frame",
    "RunRequest",
    "reply_usage",
    "load_pages",
    "as_application_error",
    "error_dict",
    "temporal_errors",
    "append_from_activity",
    "with_heartbeats",
    "idempotency_key",
    "LLMContext",
    "allowed_models",
    "call_json",
    "chat_model",
    "classify_error",
    "extraction_messages",
    "llm_enabled",
    "model_call_retryable",
    "price_usd",
    "select_model",
    "node_retry_policy",
    "get_runtime",
    "ConsoleView",
    "APPROVAL_DECIDED",
    "Store",
    "Api",
    "Gate",
    "Intake",
    "NodeHooks",
    "RunHooks",
    "LLM_CALLED",
    "REVIEW_SUGGESTED",
    "ROUTE_DECIDED",
    "RUN_COMPLETED",
    "RUN_SUBMITTED",
    "BudgetExceededError",
    "BudgetStop",
    "ConflictError",
    "DecisionRefusedError",
    "DependencyUnavailableError",
    "InvalidRequestError",
    "LLMCallError",
    "LLMClientError",
    "LLMRateLimitedError",
    "LLMRefusedError",
    "LLMResponseError",
    "NewEvent",
    "NotFoundError",
    "OverseerError",
    "Pipeline",
    "PoolDep",
    "Principal",
    "PrincipalDep",
    "ReviewerDep",
    "RunAccepted",
    "RunRef",
    "RunStream",
    "Settings",
    "SettingsDep",
    "SubmitterDep",
    "TemporalDep",
    "Upload",
    "append_events",
    "approval_ladder_options",
    "cache_pages",
    "cached_pages",
    "cancel_run_workflow",
    "count_own",
    "decide",
    "durable_items",
    "get_settings",
    "load_artifact",
    "merge_live",
    "parse_metadata",
    "read_bounded",
    "request_options",
    "run_settings",
    "send_update",
    "start_or_record",
    "store_artifact",
    "submit_run",
    "visible_run",
]
