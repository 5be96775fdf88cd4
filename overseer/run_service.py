"""Starting an Agent Server run: the one path from a request to its run.

``POST /threads/{id}/runs``, the stateless ``POST /runs``, their ``stream`` and ``wait``
forms, ``POST /runs/batch``, the thread protocol's ``run.start`` and the MCP tool call all
start their run with :func:`start_run`, in these steps:

1. **resolve** (:func:`resolve_request`): the assistant to its graph, once (an assistant
   made through the API has its config and context applied), and the request checked
   against that graph: stream modes, webhook, run options, input; a 404 or 422 before
   anything is written;
2. **thread**: a stateless run's own thread, or a missing one with
   ``if_not_exists="create"``, made when the caller may create threads;
3. **authorise**: the caller may run on the thread (the deployment's LangGraph ``Auth``
   handlers and Overseer's roles, through the API's :class:`RunCaller`), which may add
   metadata;
4. **create** (:func:`overseer.thread_runs.create_run`): the run is written ``pending``
   and the thread's queue starts it (``SegmentRunWorkflow``), or a ``command.resume`` is
   decided on the thread's interrupt.

The authorisation is the API's (it knows the deployment's ``Auth`` handlers); this module
takes the caller as a :class:`RunCaller` so the core imports nothing of the API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg
from temporalio.client import Client

from overseer import assistants, run_body, thread_runs, threads
from overseer.access import Principal, Scope
from overseer.errors import ConflictError, InvalidRequestError
from overseer.pipelines import Pipeline
from overseer.settings import Settings


@dataclass(frozen=True)
class RunAsk:
    """A run request resolved to its graph and checked (:func:`resolve_request`).

    Attributes:
        body: the request, with its assistant's config and context applied and
            ``assistant_id`` naming the graph.
        pipeline: the graph it runs.
        assistant_id: the assistant made through the API it came from (for the run's
            row), or None for a registered graph's own assistant.
    """

    body: dict[str, Any]
    pipeline: Pipeline
    assistant_id: str | None


class RunCaller(Protocol):
    """Who asks for a run, and what the API decides about them (``Auth`` handlers, roles)."""

    @property
    def principal(self) -> Principal:
        """The caller."""

    async def create_thread(self, value: dict[str, Any]) -> Scope:
        """The scope in which the caller may create the thread ``value`` describes.

        Raises:
            PermissionDeniedError: the caller may not create threads.
        """

    async def run_on(self, pool: asyncpg.Pool, thread_id: str, value: dict[str, Any], *,
                     resuming: bool) -> None:
        """Admit the caller's run on ``thread_id`` (``value``: the run, its metadata may change).

        Raises:
            NotFoundError: no such thread in the caller's scope (404).
            PermissionDeniedError: a role or ``Auth`` handler refused the run.
        """


async def resolve_request(pool: asyncpg.Pool, body: dict[str, Any]) -> RunAsk:
    """A run request resolved to its graph once and checked against it, before anything is written.

    Raises:
        NotFoundError: no such assistant (404).
        InvalidRequestError: an unknown stream mode, a webhook that is not an http(s) URL,
            run options the graph cannot honour (:func:`overseer.run_body.check_run_options`),
            or an input that is not an object for a graph that takes one (422).
    """
    body, assistant_id = await assistants.run_body(pool, body)
    pipeline = assistants.resolve_assistant(str(body.get("assistant_id") or ""))
    if "stream_mode" in body:
        run_body.stream_modes(body["stream_mode"])
    run_body.check_webhook(body.get("webhook"))
    run_body.check_run_options(pipeline, body)
    given = body.get("input")
    if given is not None and not isinstance(given, dict) and not run_body.takes_any_input(pipeline):
        raise InvalidRequestError("input must be a JSON object", details={"field": "input"})
    return RunAsk(body=body, pipeline=pipeline, assistant_id=assistant_id)


async def start_run(pool: asyncpg.Pool, temporal: Client, settings: Settings, caller: RunCaller,
                    thread_id: str | None, body: dict[str, Any], *,
                    run_id: str | None = None, ask: RunAsk | None = None) -> asyncpg.Record:
    """Create (or queue) a run on a thread, or resume its interrupt with ``command.resume``.

    Args:
        pool: the database.
        temporal: the Temporal client.
        settings: the process settings.
        caller: the caller, and the API's authorisation of them.
        thread_id: the thread; None for a stateless run (a thread of its own is made).
        body: the SDK's run body (``assistant_id``, ``input``, ``command``, ``metadata``,
            ``stream_mode``, ``multitask_strategy``, ``if_not_exists`` …).
        run_id: the new run's id (a run with this id already on the thread is returned as
            it is); a uuid4 when None. Not used by a resume.
        ask: ``body`` already resolved (a batch resolves every payload before it starts
            any); resolved here when None.

    Returns:
        The run's ``agent_runs`` row: ``running`` once started, ``pending`` while queued.

    Raises:
        NotFoundError: unknown assistant or thread (404).
        InvalidRequestError: a request the graph cannot run (422).
        PermissionDeniedError: the caller may not run here (403).
        ThreadBusyError, NotAwaitingApprovalError: see
            :func:`overseer.thread_runs.create_run` (409).
    """
    ask = ask or await resolve_request(pool, body)
    stateless = thread_id is None
    if stateless or ask.body.get("if_not_exists") == "create":
        thread_id = await _own_thread(pool, temporal, settings, caller, thread_id)
    assert thread_id is not None  # made above for a stateless run
    body = await _authorised(pool, caller, thread_id, ask.body)
    principal = caller.principal
    return await thread_runs.create_run(pool, temporal, settings, thread_id=thread_id, body=body,
                                        principal=principal, check_role=principal.user is None,
                                        assistant_id=ask.assistant_id, run_id=run_id,
                                        fresh=stateless, pipeline=ask.pipeline)


async def _own_thread(pool: asyncpg.Pool, temporal: Client, settings: Settings,
                      caller: RunCaller, thread_id: str | None) -> str:
    """A stateless run's new thread, or ``thread_id`` made if missing (``if_not_exists="create"``).

    A thread id that is someone else's thread is returned as it is: :func:`_authorised`
    answers 404 for it, never 409 (the id is not confirmed).
    """
    value: dict[str, Any] = {"thread_id": thread_id,
                             "metadata": {"stateless": True} if thread_id is None else {},
                             "if_exists": "do_nothing"}
    scope = await caller.create_thread(value)
    try:
        row = await threads.create_thread(pool, thread_id=thread_id,
                                          metadata=dict(value.get("metadata") or {}),
                                          if_exists="do_nothing", subject=caller.principal.subject,
                                          scope=scope, temporal=temporal, settings=settings)
    except ConflictError:
        if thread_id is None:
            raise
        return thread_id
    return str(row["thread_id"])


async def _authorised(pool: asyncpg.Pool, caller: RunCaller, thread_id: str,
                      body: dict[str, Any]) -> dict[str, Any]:
    """``body`` once the caller is admitted to run on the thread, with the metadata it left."""
    resuming = "resume" in (body.get("command") or {})
    value: dict[str, Any] = {k: body.get(k) for k in (
        "assistant_id", "multitask_strategy", "if_not_exists", "after_seconds")}
    value |= {"metadata": dict(body.get("metadata") or {}),
              "kwargs": {k: body.get(k) for k in ("input", "command", "config", "context",
                                                  "stream_mode")}}
    await caller.run_on(pool, thread_id, value, resuming=resuming)
    return {**body, "metadata": value.get("metadata") or {}}
