"""The thread protocol's commands: ``POST /threads/{thread_id}/commands`` ("Protocol v2").

The thread-scoped protocol that ``@langchain/react`` 1.x ``useStream`` speaks, next to the
Agent Server API (its events: :mod:`services.api.routes.agent_protocol_stream`). One
command ``{id, method, params}``; ``run.start`` starts a run (creating a client-minted
thread on its first run, owned by the caller; on a thread paused at an interrupt it
resumes that interrupt with the whole input, as LangGraph's servers do),
``input.respond`` answers pending interrupts by id. Protocol failures are HTTP 200 error
envelopes ``{type: "error", id, error, message}`` (the client retries a 5xx with no
idempotency key); a command that is not one is 400, another submitter's thread 404, as
everywhere else. What differs from LangGraph's own servers: ``docs/langgraph-api.md``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import asyncpg
from fastapi import APIRouter, Body
from fastapi.responses import JSONResponse
from temporalio.client import Client

from overseer import run_body, run_service, thread_queue, threads
from overseer.access import Principal
from overseer.errors import (
    ConflictError,
    InvalidFieldEditsError,
    InvalidRequestError,
    NotAwaitingApprovalError,
    NotFoundError,
    OverseerError,
    PermissionDeniedError,
)
from overseer.http_routes import PoolDep, SettingsDep, TemporalDep
from overseer.pipelines import DecisionRefusedError
from services.api import agent_auth
from services.api.routes.agent_deps import AgentPrincipal, thread_uuid
from services.api.routes.agent_protocol_events import RUN_STREAM_MODES, SEQ_STRIDE

logger = logging.getLogger(__name__)

router = APIRouter(tags=["agent-server"])

RETRY_WINDOW_SECONDS = 300.0
"""A ``run.start`` equal to one accepted this recently (same thread, caller, command id and
params) is the client retrying it: it gets that run back instead of a second one."""
COMMANDS = ("run.start", "input.respond")


class InvalidCommandError(OverseerError):
    """The body is not a command: not a JSON object with an integer ``id`` and a string ``method`` (400)."""

    code = "invalid_command"
    http_status = 400


class CommandError(Exception):
    """A refused command, answered as an error envelope (HTTP 200) with the protocol's ``code``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


PROTOCOL_CODES: tuple[tuple[type[OverseerError], str], ...] = (
    (NotAwaitingApprovalError, "no_such_interrupt"),
    (run_body.StreamModeUnsupportedError, "not_supported"),
    (PermissionDeniedError, "permission_denied"),
    (InvalidRequestError, "invalid_argument"),
    (DecisionRefusedError, "invalid_argument"),
    (InvalidFieldEditsError, "invalid_argument"),
    (NotFoundError, "invalid_argument"),
    (ConflictError, "invalid_argument"),
)
"""Overseer's errors as the protocol's error codes (first match); anything else is ``unknown_error``."""


def protocol_code(err: BaseException) -> str:
    """The protocol error code for an error a command raised (see :data:`PROTOCOL_CODES`)."""
    for kind, code in PROTOCOL_CODES:
        if isinstance(err, kind):
            return code
    return "unknown_error"


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


@router.post("/threads/{thread_id}/commands")
async def thread_command(thread_id: str, principal: AgentPrincipal, pool: PoolDep,
                         temporal: TemporalDep, settings: SettingsDep,
                         body: Annotated[Any, Body()] = None) -> JSONResponse:
    """One protocol command on the thread: ``run.start`` or ``input.respond``.

    Body: ``{"id": int, "method": str, "params": {...}}``.

    Returns:
        HTTP 200 ``{"type": "success", "id", "result", "meta": {"applied_through_seq"}}``
        (``result`` is ``{"run_id"}`` for ``run.start``, ``{}`` for ``input.respond``), or
        HTTP 200 ``{"type": "error", "id", "error", "message"}`` with ``error`` one of
        ``unknown_command``, ``invalid_argument``, ``no_such_interrupt``,
        ``permission_denied``, ``not_supported``, ``unknown_error``.

    Raises:
        InvalidCommandError: the body is not a command (400).
        NotFoundError: the thread is someone else's, or (for ``input.respond``) missing (404).
        AuthenticationError: no key, or a wrong one (401).
    """
    if not isinstance(body, dict) or isinstance(body.get("id"), bool) or \
            not isinstance(body.get("id"), int) or not isinstance(body.get("method"), str):
        raise InvalidCommandError("a command is a JSON object with an integer id and a string "
                                  "method", details={"fields": ["id", "method", "params"]})
    command_id, method = int(body["id"]), str(body["method"])
    params = body.get("params") if body.get("params") is not None else {}
    tid = thread_uuid(thread_id)
    exists = await pool.fetchval("SELECT 1 FROM agent_threads WHERE thread_id = $1", tid)
    if exists or method != "run.start":  # another's thread is 404 here, as on every route
        await agent_auth.gate_thread(pool, principal, thread_id, "read")
    try:
        if method not in COMMANDS:
            raise CommandError("unknown_command", f"unknown command {method!r}; this server "
                               f"answers {', '.join(COMMANDS)}")
        if not isinstance(params, dict):
            raise CommandError("invalid_argument", "params must be an object")
        barrier = await applied_through_seq(pool, tid)  # before the command makes its run
        if method == "run.start":
            result, run_id = await _run_start(pool, temporal, settings, principal, thread_id,
                                              command_id, params, bool(exists))
        else:
            result, run_id = await _input_respond(pool, temporal, settings, principal,
                                                  thread_id, params)
        if run_id is not None:  # a retry answered with the run its first attempt made
            barrier = min(barrier, await applied_through_seq(pool, tid, run_id))
    except CommandError as err:
        return _error(command_id, err.code, err.message)
    except OverseerError as err:
        return _error(command_id, protocol_code(err), err.message)
    except Exception as err:  # noqa: BLE001 - a 5xx would be retried: answer with an envelope
        logger.exception("protocol command failed", exc_info=err)
        return _error(command_id, "unknown_error", f"{type(err).__name__}: the command failed")
    return JSONResponse({"type": "success", "id": command_id, "result": result,
                         "meta": {"applied_through_seq": barrier}})


def _error(command_id: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"type": "error", "id": command_id, "error": code, "message": message})


async def applied_through_seq(pool: asyncpg.Pool, thread_id: uuid.UUID,
                              run_id: uuid.UUID | None = None) -> int:
    """The highest ``seq`` the runs before a command's run can have (``meta.applied_through_seq``).

    Read before the command makes its run: every event of the oldest run still queued or
    running, or of a run made after this call, has a higher ``seq``; so a client treats an
    interrupt of the new run as new, and one of an older run it did not hydrate as
    history. With ``run_id``: the highest ``seq`` of the runs before that one. 0 when no
    run comes before.
    """
    first = await pool.fetchrow(
        "SELECT created_at, run_id FROM agent_runs WHERE thread_id = $1 AND (run_id = $3 OR "
        "$3::uuid IS NULL AND status = ANY($2)) ORDER BY created_at, run_id LIMIT 1",
        thread_id, list(threads.ACTIVE_RUN_STATUSES), run_id)
    before = int(await pool.fetchval(
        "SELECT count(*) FROM agent_runs WHERE thread_id = $1 AND ($2::timestamptz IS NULL "
        "OR (created_at, run_id) < ($2::timestamptz, $3::uuid))", thread_id,
        first["created_at"] if first else None, first["run_id"] if first else None))
    return 0 if before == 0 else (before + 1) * SEQ_STRIDE - 1


async def _run_start(pool: asyncpg.Pool, temporal: Client, settings: Any, principal: Principal,
                     thread_id: str, command_id: int, params: dict[str, Any],
                     exists: bool) -> tuple[dict[str, Any], uuid.UUID | None]:
    """``run.start``: a new run (the thread made on the first), or a resume at a pending interrupt.

    Returns ``({"run_id"}, the run's id)``.

    The client retries a command whose answer it did not get with the same id and params:
    the run such a command made (:func:`command_key`) within :data:`RETRY_WINDOW_SECONDS`
    is answered again and nothing starts twice.
    """
    assistant = params.get("assistant_id")
    if not isinstance(assistant, str) or not assistant:
        raise CommandError("invalid_argument", "run.start needs params.assistant_id")
    config = params.get("config") if params.get("config") is not None else {}
    if not isinstance(config, dict):
        raise CommandError("invalid_argument", "params.config must be an object")
    metadata = params.get("metadata") if params.get("metadata") is not None else {}
    if not isinstance(metadata, dict):
        raise CommandError("invalid_argument", "params.metadata must be an object")
    tid = thread_uuid(thread_id)
    key = command_key(thread_id, principal.subject, command_id, params)

    async def retried() -> uuid.UUID | None:
        found: uuid.UUID | None = await pool.fetchval(
            "SELECT run_id FROM agent_runs WHERE thread_id = $1 AND (run_id = $2 "
            f"OR metadata->>'{COMMAND_KEY}' = $2::text) "
            "AND created_at > now() - make_interval(secs => $3) ORDER BY created_at LIMIT 1",
            tid, key, RETRY_WINDOW_SECONDS)
        return found

    if exists and (found := await retried()) is not None:
        return {"run_id": str(found)}, found
    value = params.get("input")
    row = await thread_queue.sync_thread(pool, temporal, thread_id, settings) if exists else None
    if row is not None and value is not None and row["status"] == "interrupted" and \
            row["last_run_id"] is not None:  # paused on an interrupt: the input answers it
        shown = (_json(row["checkpoint"]) or {}).get("interrupts") or []
        target, _, _ = run_body.resume_target(value, shown)
        named = isinstance(value, dict) and target in value
        resume = value if named or target is None else {target: value}
        run = await _resume(pool, temporal, settings, principal, thread_id, resume,
                            {"assistant_id": assistant,
                             "metadata": {**metadata, COMMAND_KEY: str(key)}}, retried)
        return {"run_id": str(run)}, run
    configurable = dict(config.get("configurable") or {})
    configurable.pop("thread_id", None)  # the runtime's, as on every run
    checkpoint_id = configurable.pop("checkpoint_id", None)  # submit(..., {forkFrom})
    request: dict[str, Any] = {
        "assistant_id": assistant, "input": value, "metadata": metadata,
        "config": {**config, "configurable": configurable} if configurable else
        {k: v for k, v in config.items() if k != "configurable"},
        "if_not_exists": "create", "stream_mode": RUN_STREAM_MODES,
        "stream_subgraphs": True}  # a subgraph's events at its namespace, as the Agent Server
    strategy = params.get("multitaskStrategy", params.get("multitask_strategy"))
    if strategy is not None:
        request["multitask_strategy"] = strategy
    if checkpoint_id:
        request["checkpoint_id"] = checkpoint_id
    if await pool.fetchval("SELECT 1 FROM agent_runs WHERE run_id = $1", key):
        key = uuid.uuid4()  # an old command with this id and params: a page loaded again
    started = await run_service.start_run(pool, temporal, settings,
                                          agent_auth.run_caller(principal), thread_id, request,
                                          run_id=str(key))
    return {"run_id": str(started["run_id"])}, started["run_id"]


COMMAND_KEY = "overseer_command"
"""The metadata key under which a resume made by ``run.start`` keeps its :func:`command_key`
(a new run's id is the key itself)."""


def command_key(thread_id: str, subject: str, command_id: int, params: dict[str, Any]) -> uuid.UUID:
    """A ``run.start``'s identity: the same for the client's retries of it (uuid5).

    A command id restarts at 1 with each page load, so only a run made with this key within
    :data:`RETRY_WINDOW_SECONDS` counts as the same command.
    """
    digest = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()
    return uuid.uuid5(uuid.NAMESPACE_URL,
                      f"overseer:protocol:{thread_id}:{subject}:{command_id}:{digest}")


async def _resume(pool: asyncpg.Pool, temporal: Client, settings: Any, principal: Principal,
                  thread_id: str, resume: Any, extra: dict[str, Any],
                  retried: Callable[[], Awaitable[uuid.UUID | None]]) -> uuid.UUID:
    """Resume the thread's interrupt(s) with ``resume``; the run serving it.

    ``retried`` finds the run a first attempt of the same command made: that run is
    answered, before resuming and when the resume is refused because the interrupt was
    just answered (a retry racing its original), so nothing is resumed twice.

    Raises:
        NotAwaitingApprovalError: nothing pending to answer (and no earlier attempt).
    """
    if (found := await retried()) is not None:
        return found
    try:
        run = await run_service.start_run(pool, temporal, settings, agent_auth.run_caller(principal),
                                          thread_id,
                                          {**extra, "command": {"resume": resume}})
    except NotAwaitingApprovalError:
        if (found := await retried()) is not None:
            return found
        raise
    run_id: uuid.UUID = run["run_id"]
    return run_id


async def _input_respond(pool: asyncpg.Pool, temporal: Client, settings: Any,
                         principal: Principal, thread_id: str,
                         params: dict[str, Any]) -> tuple[dict[str, Any], uuid.UUID | None]:
    """``input.respond``: answer pending interrupts by id (``responses`` answers several in one run).

    Returns ``({}, the id of the run that serves the answers)``; the same answers to the
    same ids again (the client retrying) are answered with that run and resume nothing.
    """
    given = params.get("responses")
    if given is None:
        given = [{"interrupt_id": params.get("interrupt_id"), "response": params.get("response")}]
    if not isinstance(given, list) or not given or not all(
            isinstance(g, dict) and isinstance(g.get("interrupt_id"), str) for g in given):
        raise CommandError("invalid_argument", "input.respond needs params.interrupt_id and "
                           "params.response, or params.responses [{interrupt_id, response}]")
    if params.get("update") is not None or params.get("goto") is not None:
        raise CommandError("not_supported", "update and goto with a resume are not supported: "
                           "answer the interrupt, then start a run with Command(goto, update)")
    resume = {str(g["interrupt_id"]): g.get("response") for g in given}
    row = await thread_queue.sync_thread(pool, temporal, thread_id, settings)
    pending = {str(i.get("id")) for i in (_json(row["checkpoint"]) or {}).get("interrupts") or []
               if isinstance(i, dict)} if row["status"] == "interrupted" and \
        row["last_run_id"] is not None else set()
    unknown = sorted(set(resume) - pending)
    metadata = params.get("metadata") if isinstance(params.get("metadata"), dict) else {}
    extra = {"assistant_id": row["graph_id"] or "", "metadata": metadata}

    async def retried() -> uuid.UUID | None:  # the same answers to the same ids went through
        found: uuid.UUID | None = await pool.fetchval(
            "SELECT run_id FROM agent_runs WHERE thread_id = $1 AND kind = 'resume' "
            "AND kwargs->'command'->'resume' = $2::jsonb LIMIT 1", row["thread_id"],
            json.dumps(resume))
        return found

    if unknown:
        if (found := await retried()) is not None:
            return {}, found
        raise CommandError("no_such_interrupt", "Unknown or already-answered interrupt: "
                           f"{', '.join(unknown)}")
    return {}, await _resume(pool, temporal, settings, principal, thread_id, resume, extra,
                             retried)
