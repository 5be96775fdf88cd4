"""The thread-scoped "Protocol v2" that ``@langchain/react`` 1.x ``useStream`` speaks (issue 26, item 10).

Two endpoints next to the Agent Server API (:mod:`services.api.routes.agent_runs` and its siblings):

- ``POST /threads/{thread_id}/commands``: one command ``{id, method, params}``;
  ``run.start`` starts a run (creating a client-minted thread on its first run, owned by
  the caller; on a thread paused at an interrupt it resumes that interrupt with the whole
  input, as LangGraph's servers do), ``input.respond`` answers pending interrupts by id.
  Protocol failures are HTTP 200 error envelopes ``{type: "error", id, error, message}``
  (the client retries a 5xx with no idempotency key); a command that is not one is 400,
  another submitter's thread 404, as everywhere else.
- ``POST /threads/{thread_id}/stream/events``: SSE that stays open across runs. A new
  connection replays the thread from its current run (the oldest one queued or running,
  else the latest), then each run as it comes. Every run is ``lifecycle running``, then
  ``values`` (the full state), ``messages`` (LangGraph's token chunks as
  ``message-start`` / ``content-block-*`` / ``message-finish``), ``updates``, ``custom``,
  ``tasks`` (LangGraph's task starts and results), ``checkpoints`` (an envelope per
  checkpoint: ``{id, parent_id, step, source}``) and ``tools`` (LangGraph's tool-call
  events: ``tool-started``, ``tool-output-delta``, ``tool-finished``, ``tool-error``),
  then ``input.requested`` per interrupt and exactly one terminal
  ``lifecycle`` (``completed``, ``failed {error}`` or ``interrupted``).

Runs are read with :func:`overseer.thread_streams.run_events` (the run's durable stream and its live
token rows), so every connection derives the same events in the same order: an event's
``event_id`` is ``"<run id>:<the run's own event id>.<j>"``, and its ``seq`` is the run's
place on the thread times :data:`SEQ_STRIDE` plus the event's place in the run, the same on
every connection and rising across the thread's runs. What differs from LangGraph's own
servers: ``docs/langgraph-api.md``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

import asyncpg
from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse, StreamingResponse
from temporalio.client import Client

from overseer import run_body, thread_queue, thread_streams, threads
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
from overseer.pipelines import DecisionRefusedError
from overseer.web import PoolDep, SettingsDep, TemporalDep
from services.api import agent_auth
from services.api.routes.agent_deps import AgentPrincipal, ThreadReader
from services.api.routes.agent_run_streams import with_keepalives
from services.api.routes.agent_runs import start_run

logger = logging.getLogger(__name__)

router = APIRouter(tags=["agent-server"])

CHANNELS = frozenset({"values", "updates", "checkpoints", "messages", "tools", "custom",
                      "lifecycle", "input", "tasks"})
"""Channel names a stream may ask for (and ``custom:<name>``)."""
RUN_STREAM_MODES = ["values", "updates", "custom", "messages-tuple", "tasks", "checkpoints",
                    "tools"]
"""The stream modes a ``run.start`` run asks for (LangGraph's models stream tokens only for a
run that asks for messages; ``tasks``, ``checkpoints`` and ``tools`` feed those channels),
and those each run is read in."""
SEQ_STRIDE = 2 ** 32
"""``seq`` = the run's place on the thread (1, 2 …) × this + the event's place in its run."""
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


def _thread_uuid(thread_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(thread_id)
    except ValueError:
        raise NotFoundError(f"unknown thread {thread_id}") from None


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


# --- commands ------------------------------------------------------------------------------------


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
    tid = _thread_uuid(thread_id)
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
    tid = _thread_uuid(thread_id)
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
        "if_not_exists": "create", "stream_mode": RUN_STREAM_MODES}
    strategy = params.get("multitaskStrategy", params.get("multitask_strategy"))
    if strategy is not None:
        request["multitask_strategy"] = strategy
    if checkpoint_id:
        request["checkpoint_id"] = checkpoint_id
    if await pool.fetchval("SELECT 1 FROM agent_runs WHERE run_id = $1", key):
        key = uuid.uuid4()  # an old command with this id and params: a page loaded again
    run = await start_run(pool, temporal, settings, principal, thread_id, request,
                          run_id=str(key))
    return {"run_id": str(run["run_id"])}, run["run_id"]


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
        run = await start_run(pool, temporal, settings, principal, thread_id,
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


# --- the thread's event stream -------------------------------------------------------------------


@dataclass
class Selector:
    """What one SSE connection asked for: ``channels``, ``namespaces`` prefixes, ``depth``, ``since``."""

    channels: frozenset[str]
    namespaces: list[list[str]] | None = None
    depth: int | None = None
    since: int | None = None

    @classmethod
    def parse(cls, body: Any) -> Selector:
        """The request body as a selector.

        Raises:
            InvalidRequestError: ``channels`` missing, empty or naming an unknown channel;
                ``namespaces`` not a list of string lists; ``depth`` or ``since`` not a
                non-negative integer (422).
        """
        body = body if isinstance(body, dict) else {}
        channels = body.get("channels")
        if not isinstance(channels, list) or not channels or not all(
                isinstance(c, str) and (c in CHANNELS or c.startswith("custom:"))
                for c in channels):
            raise InvalidRequestError(f"channels must be a non-empty list of {sorted(CHANNELS)} "
                                      "or custom:<name>", details={"field": "channels"})
        namespaces = body.get("namespaces")
        if namespaces is not None and (not isinstance(namespaces, list) or not all(
                isinstance(n, list) and all(isinstance(s, str) for s in n) for n in namespaces)):
            raise InvalidRequestError("namespaces must be a list of string lists",
                                      details={"field": "namespaces"})
        for key in ("depth", "since"):
            value = body.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 0):
                raise InvalidRequestError(f"{key} must be a non-negative integer",
                                          details={"field": key})
        return cls(frozenset(channels), namespaces or None, body.get("depth"), body.get("since"))

    def admits(self, event: dict[str, Any]) -> bool:
        """Whether ``event`` goes out on this connection (the client's own matching rule)."""
        if self.since is not None and event["seq"] <= self.since:
            return False
        method, params = event["method"], event["params"]
        if method == "input.requested":
            wanted = "input" in self.channels
        elif method == "custom":
            name = params["data"].get("name") if isinstance(params["data"], dict) else None
            wanted = "custom" in self.channels or f"custom:{name}" in self.channels
        else:
            wanted = method in self.channels
        if not wanted or self.namespaces is None:
            return wanted
        namespace = params["namespace"]
        return any(_prefix(namespace, p) and (self.depth is None
                                              or len(namespace) - len(p) <= self.depth)
                   for p in self.namespaces)


def checkpoint_envelope(chunk: dict[str, Any]) -> dict[str, Any]:
    """The ``checkpoints`` channel's envelope of one of LangGraph's ``checkpoints`` chunks.

    ``{id, parent_id?, step, source}``: the checkpoint to fork from, its parent, its
    superstep (-1 for the input) and LangGraph's ``metadata.source`` (``input`` / ``loop``
    / ``update`` / ``fork``); the state itself stays with ``values`` and ``state.get``.
    """
    def checkpoint_id(config: Any) -> str | None:
        found = ((config or {}).get("configurable") or {}).get("checkpoint_id") \
            if isinstance(config, dict) else None
        return str(found) if found else None

    found = chunk.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    envelope: dict[str, Any] = {"id": checkpoint_id(chunk.get("config")),
                                "step": metadata.get("step"), "source": metadata.get("source")}
    parent = checkpoint_id(chunk.get("parent_config"))
    if parent:
        envelope["parent_id"] = parent
    return envelope


def _prefix(namespace: list[str], prefix: list[str]) -> bool:
    """``prefix`` segment by segment; ``"fetcher"`` also matches ``"fetcher:abc"``."""
    return len(prefix) <= len(namespace) and all(
        seg == want or (":" not in want and seg.split(":", 1)[0] == want)
        for seg, want in zip(namespace, prefix, strict=False))


@router.post("/threads/{thread_id}/stream/events")
async def thread_event_stream(request: Request, thread_id: str, _: ThreadReader, pool: PoolDep,
                              temporal: TemporalDep,
                              body: Annotated[Any, Body()] = None) -> StreamingResponse:
    """The thread's protocol events as SSE, open across runs (see the module docstring).

    Body: ``{"channels": [...], "namespaces"?: [[...]], "depth"?: int, "since"?: int}``.
    Each frame is ``event: <method>``, ``id: <seq>``, ``data: <event JSON>``; a comment
    ``: open`` first and a keep-alive comment every 15 s of silence.

    Raises:
        InvalidRequestError: a body that is not a selector (422).
        NotFoundError: no such thread, or someone else's (404).
    """
    selector = Selector.parse(body)

    async def admitted() -> AsyncIterator[tuple[str | None, str, Any]]:
        async for event in thread_protocol_events(pool, temporal, thread_id):
            if selector.admits(event):
                yield str(event["seq"]), event["method"], event

    async def frames() -> AsyncIterator[bytes]:
        yield b": open\n\n"
        async for frame in with_keepalives(request, admitted()):
            yield frame

    return StreamingResponse(frames(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


async def thread_protocol_events(pool: asyncpg.Pool, temporal: Client,
                                 thread_id: str) -> AsyncIterator[dict[str, Any]]:
    """Every protocol event of the thread from its current run on, then of each new run.

    The current run is the oldest one queued or running, else the latest (a paused run's
    ``input.requested`` is replayed). Runs are read one after the other in the order they
    were made (:func:`overseer.thread_streams.thread_runs`, each by
    :func:`overseer.thread_streams.run_events`). Ends when the thread is deleted.

    Yields:
        ``{"type": "event", "event_id", "seq", "method", "params": {"namespace",
        "timestamp", "node"?, "data"}}``.
    """
    tid = _thread_uuid(thread_id)
    start = await pool.fetchrow(
        "SELECT created_at, run_id FROM agent_runs WHERE thread_id = $1 AND status = ANY($2) "
        "ORDER BY created_at, run_id LIMIT 1", tid, list(threads.ACTIVE_RUN_STATUSES)) or \
        await pool.fetchrow("SELECT created_at, run_id FROM agent_runs WHERE thread_id = $1 "
                            "ORDER BY created_at DESC, run_id DESC LIMIT 1", tid)
    async for run in thread_streams.thread_runs(pool, tid, start):
        place = 1 + int(await pool.fetchval(
            "SELECT count(*) FROM agent_runs WHERE thread_id = $1 AND (created_at, run_id) < "
            "($2::timestamptz, $3::uuid)", tid, run["created_at"], run["run_id"]))
        async for event in run_protocol_events(pool, temporal, run, place):
            yield event


async def run_protocol_events(pool: asyncpg.Pool, temporal: Client, run: asyncpg.Record,
                              place: int) -> AsyncIterator[dict[str, Any]]:
    """One run's protocol events (see :class:`RunTranslator`), ``place`` its rank on the thread."""
    translator = RunTranslator(run, place)
    async for source, name, data in thread_streams.run_events(pool, temporal, run, RUN_STREAM_MODES):
        out = translator.feed(source, name, data)
        if name in ("end", "error"):  # a run cancelled through the API is interrupted, not failed
            paused = name == "end" and bool(translator.interrupts)
            status = None if paused else await _settled_status(pool, run["run_id"])
            failure = data if name == "error" and isinstance(data, dict) else {}
            error = str(failure.get("message") or failure.get("error") or "the run failed") \
                if name == "error" else None
            out += translator.ended(source, cancelled=status == "interrupted", error=error)
        for event in out:
            yield event
        if name in ("end", "error"):
            return


CANCEL_SETTLE_SECONDS = 2.0
"""A run's status is final when its workflow publishes its ending, except for a run the API is
cancelling (the API marks it ``interrupted`` right after asking Temporal to cancel it): a
status still active is looked at again for this long before the run counts as ended normally."""


async def _settled_status(pool: asyncpg.Pool, run_id: uuid.UUID) -> str | None:
    deadline = time.monotonic() + CANCEL_SETTLE_SECONDS
    while True:
        status: str | None = await pool.fetchval(
            "SELECT status FROM agent_runs WHERE run_id = $1", run_id)
        if status not in threads.ACTIVE_RUN_STATUSES or time.monotonic() > deadline:
            return status
        await asyncio.sleep(0.2)


@dataclass
class _OpenMessage:
    """A message being streamed: its id, its blocks so far and the next block index."""

    id: str
    role: str
    text_index: int | None = None
    text: str = ""
    tools: dict[Any, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    """Tool-call chunks by their own index (or id): (block index, the chunk so far)."""
    usage: dict[str, int] = field(default_factory=dict)
    blocks: int = 0

    def next_index(self) -> int:
        self.blocks += 1
        return self.blocks - 1


class RunTranslator:
    """Turns one run's Agent Server events (:func:`overseer.thread_streams.run_events`) into protocol events.

    - ``metadata`` (the run's first event) → ``lifecycle {event: "running", graph_name}``.
    - ``values`` → ``values`` (the full state without ``__interrupt__``; the state a pause
      repeats is not sent twice); a ``__interrupt__`` in it is kept for the ending.
    - ``updates`` → one ``updates {node, values}`` per node (``node`` also in ``params``).
    - ``custom`` (``custom|<ns>``) → ``custom {payload}``.
    - ``messages`` (``messages|<ns>``) ``[chunk, metadata]``, a model's token chunk →
      ``message-start {role, id}`` on the first chunk of an id, ``content-block-start`` /
      ``content-block-delta`` (``text-delta`` for text; ``block-delta`` with the whole
      ``tool_call_chunk`` so far for tool calls) per chunk; the last chunk
      (``chunk_position: "last"``), a chunk of another id at the same node, the next item
      of the durable stream or the run's ending closes it: ``content-block-finish`` per
      block (text; ``tool_call`` with parsed ``args``, ``invalid_tool_call`` when they do
      not parse), then ``message-finish`` (with ``usage`` when the model gave it).
      ``params.node`` is LangGraph's ``langgraph_node``. Whole messages (a node's own, a
      human's) are not sent here: they come in ``values``.
    - ``end`` / ``error``: the caller adds :meth:`ended` (``input.requested`` per interrupt
      then ``lifecycle interrupted``; ``completed``; ``failed {error}``; or ``interrupted``
      for a run cancelled through the API).

    Args:
        run: the run's ``agent_runs`` row.
        place: the run's rank on its thread (1 for its first run), the high part of ``seq``.
    """

    def __init__(self, run: asyncpg.Record, place: int) -> None:
        self.run_id = str(run["run_id"])
        self.graph = str(run["graph_id"])
        self.base = place * SEQ_STRIDE
        self.count = 0
        self.open: dict[tuple[tuple[str, ...], str | None], _OpenMessage] = {}
        self.values: Any = None
        self.interrupts: list[dict[str, Any]] = []
        self.done = False

    def _event(self, source: str, j: int, method: str, data: Any, *,
               namespace: tuple[str, ...] = (), node: str | None = None) -> dict[str, Any]:
        self.count += 1
        params: dict[str, Any] = {"namespace": list(namespace),
                                  "timestamp": int(time.time() * 1000), "data": data}
        if node is not None:
            params["node"] = node
        return {"type": "event", "event_id": f"{self.run_id}:{source}.{j}",
                "seq": self.base + self.count, "method": method, "params": params}

    def feed(self, source: str | None, name: str, data: Any) -> list[dict[str, Any]]:
        """The protocol events of one Agent Server event ``(source id, name, data)``."""
        source = source or "start"
        pieces: list[tuple[str, Any, tuple[str, ...], str | None]] = []
        kind, _, rest = name.partition("|")
        namespace = tuple(rest.split("|")) if rest else ()
        if name == "metadata":
            pieces.append(("lifecycle", {"event": "running", "graph_name": self.graph}, (), None))
        elif kind == "messages":
            pieces += self._chunk(data, namespace)
        elif kind in ("tasks", "tools") and isinstance(data, dict):
            # LangGraph's own chunks: a task's start or result; a tool call's tool-started /
            # tool-output-delta / tool-finished / tool-error, as the protocol names them
            node = data.get("name") if kind == "tasks" else None
            pieces.append((kind, data, namespace, str(node) if node else None))
        elif kind == "checkpoints" and isinstance(data, dict):
            pieces.append(("checkpoints", checkpoint_envelope(data), namespace, None))
        else:
            pieces += self._close_all()
            if name == "values" and isinstance(data, dict):
                found = data.get("__interrupt__")
                if isinstance(found, list):
                    self.interrupts = [i for i in found if isinstance(i, dict)]
                state = {k: v for k, v in data.items() if k != "__interrupt__"}
                if state != self.values:
                    self.values = state
                    pieces.append(("values", state, (), None))
            elif name == "updates" and isinstance(data, dict):
                pieces += [("updates", {"node": node, "values": update}, (), node)
                           for node, update in data.items() if node != "__interrupt__"]
            elif kind == "updates" and isinstance(data, dict):
                pieces += [("updates", {"node": node, "values": update}, namespace, node)
                           for node, update in data.items()]
            elif kind == "custom":
                pieces.append(("custom", {"payload": data}, namespace, None))
        return self._with_ids(source, pieces)

    def ended(self, source: str | None, *, cancelled: bool = False,
              error: str | None = None) -> list[dict[str, Any]]:
        """The run's ending, once: ``completed``, ``failed {error}`` or ``interrupted``.

        ``cancelled`` (the run was cancelled through the API): ``interrupted``; else with
        ``error``: ``failed {error}``; else a paused run sends ``input.requested`` per
        interrupt before ``interrupted``; else ``completed``.
        """
        if self.done:
            return []
        self.done = True
        pieces = self._close_all()
        base: dict[str, Any] = {"graph_name": self.graph}
        if cancelled:
            pieces.append(("lifecycle", {"event": "interrupted", **base}, (), None))
        elif error is not None:
            pieces.append(("lifecycle", {"event": "failed", "error": error, **base}, (), None))
        elif self.interrupts:
            pieces += [("input.requested", {"interrupt_id": str(i.get("id")),
                                            "payload": i.get("value")}, (), None)
                       for i in self.interrupts]
            pieces.append(("lifecycle", {"event": "interrupted", **base}, (), None))
        else:
            pieces.append(("lifecycle", {"event": "completed", **base}, (), None))
        return self._with_ids(f"{source or 'end'}.end", pieces)

    def _with_ids(self, source: str,
                  pieces: list[tuple[str, Any, tuple[str, ...], str | None]]
                  ) -> list[dict[str, Any]]:
        return [self._event(source, j, method, data, namespace=namespace, node=node)
                for j, (method, data, namespace, node) in enumerate(pieces)]

    def _chunk(self, data: Any, namespace: tuple[str, ...]
               ) -> list[tuple[str, Any, tuple[str, ...], str | None]]:
        if not isinstance(data, list) or len(data) < 2 or not isinstance(data[0], dict):
            return []
        message, metadata = data[0], data[1] if isinstance(data[1], dict) else {}
        kind = str(message.get("type") or "")
        if not kind.endswith("Chunk"):
            return []  # a whole message: it comes in values
        node = metadata.get("langgraph_node")
        node = str(node) if node is not None else None
        key = (namespace, node)
        mid = str(message.get("id") or "")
        out: list[tuple[str, Any, tuple[str, ...], str | None]] = []
        current = self.open.get(key)
        if current is not None and current.id != mid:
            out += self._close(key)
            current = None
        if current is None:
            role = kind.removesuffix("MessageChunk").lower() or "ai"
            current = self.open[key] = _OpenMessage(id=mid, role=role)
            start: dict[str, Any] = {"event": "message-start", "role": role, "id": mid}
            if role == "tool" and message.get("tool_call_id"):
                start["tool_call_id"] = message["tool_call_id"]
            out.append(("messages", start, namespace, node))
        text = _text_of(message.get("content"))
        if text:
            if current.text_index is None:
                current.text_index = current.next_index()
                out.append(("messages", {"event": "content-block-start",
                                         "index": current.text_index,
                                         "content": {"type": "text", "text": ""}},
                            namespace, node))
            current.text += text
            out.append(("messages", {"event": "content-block-delta", "index": current.text_index,
                                     "delta": {"type": "text-delta", "text": text}},
                        namespace, node))
        for piece in message.get("tool_call_chunks") or []:
            if not isinstance(piece, dict):
                continue
            slot = piece.get("index") if piece.get("index") is not None else piece.get("id")
            if slot not in current.tools:
                current.tools[slot] = (current.next_index(), {
                    "type": "tool_call_chunk", "id": piece.get("id"), "name": piece.get("name"),
                    "args": "", "index": piece.get("index")})
                at, block = current.tools[slot]
                out.append(("messages", {"event": "content-block-start", "index": at,
                                         "content": dict(block)}, namespace, node))
            at, block = current.tools[slot]
            for k in ("id", "name"):
                if piece.get(k) is not None:
                    block[k] = piece[k]
            if piece.get("args"):
                block["args"] += str(piece["args"])
                out.append(("messages", {"event": "content-block-delta", "index": at,
                                         "delta": {"type": "block-delta", "fields": dict(block)}},
                            namespace, node))
        for k, v in (message.get("usage_metadata") or {}).items():
            if k in ("input_tokens", "output_tokens", "total_tokens") and isinstance(v, int):
                current.usage[k] = current.usage.get(k, 0) + v
        if message.get("chunk_position") == "last":
            out += self._close(key)
        return out

    def _close_all(self) -> list[tuple[str, Any, tuple[str, ...], str | None]]:
        out: list[tuple[str, Any, tuple[str, ...], str | None]] = []
        for key in list(self.open):
            out += self._close(key)
        return out

    def _close(self, key: tuple[tuple[str, ...], str | None]
               ) -> list[tuple[str, Any, tuple[str, ...], str | None]]:
        current = self.open.pop(key)
        namespace, node = key
        finished: list[tuple[int, dict[str, Any]]] = []
        if current.text_index is not None:
            finished.append((current.text_index, {"type": "text", "text": current.text}))
        for at, block in current.tools.values():
            try:
                args = json.loads(block["args"]) if block["args"] else {}
                final = {"type": "tool_call", "id": block["id"], "name": block["name"],
                         "args": args if isinstance(args, dict) else {"value": args}}
            except ValueError:
                final = {"type": "invalid_tool_call", "id": block["id"], "name": block["name"],
                         "args": block["args"], "error": "the arguments are not JSON"}
            finished.append((at, final))
        out: list[tuple[str, Any, tuple[str, ...], str | None]] = [
            ("messages", {"event": "content-block-finish", "index": index, "content": content},
             namespace, node) for index, content in sorted(finished, key=lambda f: f[0])]
        finish: dict[str, Any] = {"event": "message-finish"}
        if current.usage:
            finish["usage"] = current.usage
        out.append(("messages", finish, namespace, node))
        return out


def _text_of(content: Any) -> str:
    """The text in a chunk's ``content``: the string, or its ``text`` blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text") or "") for b in content
                       if isinstance(b, dict) and b.get("type") in ("text", None))
    return ""
