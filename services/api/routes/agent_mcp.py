"""``/mcp``: every assistant as an MCP tool, as the Agent Server exposes them (Streamable HTTP).

An MCP client (``mcp``'s ``ClientSession``, ``langchain-mcp-adapters``, a desktop app) points
at ``<server>/mcp`` with the same API key as any Agent Server call and gets the assistants
that key may see as tools: ``tools/list`` names each by its assistant's name with the
graph's input JSON schema; ``tools/call`` runs it as a stateless ``runs.wait`` does (the
same path: queueing, events, approvals, ``/v1/runs``) and answers with the run's values.

The transport is the Streamable HTTP one without sessions or server-sent streams, as the
Agent Server's: each JSON-RPC request is a ``POST`` answered with one JSON body;
notifications and responses get 202; ``GET`` and ``DELETE`` are 405 (no stream to resume,
no session to end). A newer client's ``server/discover`` probe is answered "method not
found", so it falls back to the ``initialize`` handshake.

A run that pauses on an interrupt keeps its thread and answers with its values (with
``__interrupt__``) and ``_meta`` naming the run and thread, so a person can decide it in
the console or through ``command.resume``; a run that fails answers ``isError: true`` with
its error, as MCP asks of a tool's own failures.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from overseer import run_service, thread_streams
from overseer.errors import OverseerError
from overseer.graph_codec import to_jsonable
from overseer.http_routes import PoolDep, SettingsDep, TemporalDep
from services.api import agent_auth
from services.api.routes.agent_assistants import read_assistant_schemas, search_assistants
from services.api.routes.agent_deps import AgentPrincipal
from services.api.routes.agent_run_streams import drop_stateless_thread

router = APIRouter(tags=["agent-server"])

PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""MCP protocol versions of the ``initialize`` handshake this endpoint speaks; a client
asking for another gets the newest, as the protocol's negotiation has it."""
TOOLS_PAGE = 100
"""Tools per ``tools/list`` page (``nextCursor`` names the next)."""
METHOD_NOT_FOUND, INVALID_PARAMS = -32601, -32602
"""JSON-RPC error codes."""
_NOT_A_NAME = re.compile(r"[^A-Za-z0-9_.-]")
_MESSAGE_TYPES = frozenset(f"{kind}Message{chunk}" for kind in (
    "AI", "Human", "Chat", "System", "Function", "Tool") for chunk in ("", "Chunk"))
"""LangChain's message classes, as ``list[AnyMessage]``'s JSON schema refers to them."""


class InvalidMcpMessageError(OverseerError):
    """The body is not one JSON-RPC 2.0 message, or the client accepts no JSON (400)."""

    code = "invalid_mcp_message"
    http_status = 400


def _is_message_list(prop: Any) -> bool:
    """A property whose schema is LangChain's message list (``list[AnyMessage]``)."""
    if not isinstance(prop, dict) or prop.get("type") != "array":
        return False
    items = prop.get("items") or {}
    refs = [c.get("$ref", "") for c in items.get("oneOf") or items.get("anyOf") or []
            if isinstance(c, dict)]
    return bool(refs) and all(r.startswith("#/$defs/") and r[len("#/$defs/"):] in _MESSAGE_TYPES
                              for r in refs)


def _refs(node: Any, out: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            out.add(ref[len("#/$defs/"):])
        for value in node.values():
            _refs(value, out)
    elif isinstance(node, list):
        for value in node:
            _refs(value, out)


def tool_input_schema(input_schema: dict[str, Any] | None) -> dict[str, Any]:
    """A graph's input JSON schema as a tool's ``inputSchema``, simplified for a model to fill.

    A message list (``messages: list[AnyMessage]``) becomes a string, the user's message
    (LangGraph's ``add_messages`` takes a string as a human message), as the Agent Server
    offers it; the ``$defs`` nothing refers to any more are dropped. Always an object's
    schema, as MCP requires.
    """
    schema: dict[str, Any] = json.loads(json.dumps(input_schema or {}))  # a copy to change
    props = schema.get("properties")
    if isinstance(props, dict):
        for key, prop in list(props.items()):
            if _is_message_list(prop):
                props[key] = {"type": "string", "title": prop.get("title", key),
                              "description": "The user's message to the agent."}
    defs = schema.get("$defs")
    if isinstance(defs, dict):
        reachable: set[str] = set()
        _refs({k: v for k, v in schema.items() if k != "$defs"}, reachable)
        frontier = set(reachable)
        while frontier:
            found: set[str] = set()
            _refs([defs[name] for name in frontier if name in defs], found)
            frontier = found - reachable
            reachable |= found
        schema["$defs"] = {k: v for k, v in defs.items() if k in reachable}
        if not schema["$defs"]:
            del schema["$defs"]
    schema.setdefault("type", "object")
    return schema


def tool_name(assistant_name: str) -> str:
    """An assistant's name as an MCP tool name: ``[A-Za-z0-9_.-]``, 1 to 128 characters."""
    return (_NOT_A_NAME.sub("_", assistant_name.strip()) or "assistant")[:128]


@router.get("/mcp", responses={405: {"description": "no stream to open"}})
@router.delete("/mcp", responses={405: {"description": "no session to end"}})
async def mcp_no_stream(_: AgentPrincipal) -> Response:
    """405: no server-sent stream to open or resume, no session to end."""
    return Response(status_code=405, headers={"Allow": "POST"})


@router.post("/mcp", responses={
    200: {"description": "the JSON-RPC answer to a request", "content": {"application/json": {}}},
    202: {"description": "a notification or a response, taken"}})
async def mcp(request: Request, principal: AgentPrincipal, pool: PoolDep,
              temporal: TemporalDep, settings: SettingsDep) -> Response:
    """One JSON-RPC message: ``initialize``, ``ping``, ``tools/list``, ``tools/call``.

    Raises:
        InvalidMcpMessageError: not JSON, a batch, no ``jsonrpc: "2.0"``, neither a request,
            a notification nor a response, or an ``Accept`` without JSON or event streams (400).
    """
    accept = request.headers.get("accept", "")
    if "application/json" not in accept and "text/event-stream" not in accept \
            and "*/*" not in accept:
        raise InvalidMcpMessageError("Accept must include application/json")
    try:
        message = json.loads(await request.body())
    except ValueError as err:
        raise InvalidMcpMessageError(f"not JSON: {err}") from err
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise InvalidMcpMessageError('one JSON-RPC 2.0 message (an object with "jsonrpc": '
                                     '"2.0"); batches are not part of MCP')
    method, msg_id = message.get("method"), message.get("id")
    if msg_id is None or not method:  # a notification or a response: nothing to answer
        if method or "result" in message or "error" in message:
            return Response(status_code=202)
        raise InvalidMcpMessageError("neither a request, a notification nor a response")
    params = message.get("params") or {}
    if not isinstance(params, dict):
        answer: dict[str, Any] = _error(INVALID_PARAMS, "params must be an object")
    elif method == "initialize":
        asked = params.get("protocolVersion")
        answer = {"result": {
            "protocolVersion": asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "Overseer", "version": _version()}}}
    elif method == "ping":
        answer = {"result": {}}
    elif method == "tools/list":
        answer = await _tools_list(principal, pool, params)
    elif method == "tools/call":
        answer = await _tools_call(principal, pool, temporal, settings, params)
    else:
        answer = _error(METHOD_NOT_FOUND, f"method not found: {method}")
    return JSONResponse({"jsonrpc": "2.0", "id": msg_id, **answer})


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("overseer")
    except PackageNotFoundError:
        return "0"


async def _tools(principal: Any, pool: Any, offset: int, limit: int) -> list[dict[str, Any]]:
    """The assistants ``principal`` may see, one per tool name (the first of a name wins)."""
    seen: set[str] = set()
    out = []
    for assistant in await search_assistants(principal, pool, {"offset": offset, "limit": limit}):
        name = tool_name(str(assistant["name"]))
        if name not in seen:
            seen.add(name)
            out.append({**assistant, "tool_name": name})
    return out


async def _tools_list(principal: Any, pool: Any, params: dict[str, Any]) -> dict[str, Any]:
    """``tools/list``: a page of tools, each with its graph's input schema."""
    cursor = params.get("cursor")
    try:
        offset = int(cursor) if cursor is not None else 0
    except (TypeError, ValueError):
        return _error(INVALID_PARAMS, f"unknown cursor {cursor!r}")
    page = await _tools(principal, pool, offset, TOOLS_PAGE)
    tools = []
    for assistant in page:
        schemas = await read_assistant_schemas(assistant["assistant_id"], principal, pool)
        tools.append({"name": assistant["tool_name"], "title": assistant["name"],
                      "description": assistant.get("description")
                      or f"Run the {assistant['graph_id']} graph on Overseer",
                      "inputSchema": tool_input_schema(schemas.get("input_schema")),
                      "annotations": {"readOnlyHint": False, "destructiveHint": False,
                                      "idempotentHint": False, "openWorldHint": True}})
    result: dict[str, Any] = {"tools": tools}
    if len(page) == TOOLS_PAGE:
        result["nextCursor"] = str(offset + TOOLS_PAGE)
    return {"result": result}


async def _tools_call(principal: Any, pool: Any, temporal: Any, settings: Any,
                      params: dict[str, Any]) -> dict[str, Any]:
    """``tools/call``: a stateless run of the named assistant on ``arguments``, waited for."""
    name, arguments = params.get("name"), params.get("arguments") or {}
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return _error(INVALID_PARAMS, "tools/call needs a name and arguments (an object)")
    matches = [a for a in await _tools(principal, pool, 0, 10_000) if a["tool_name"] == name]
    if not matches:
        return _error(INVALID_PARAMS, f"unknown tool: {name}")
    body: dict[str, Any] = {"assistant_id": matches[0]["assistant_id"], "input": arguments}
    if isinstance(params.get("context"), dict):
        body["context"] = params["context"]
    try:
        run = await run_service.start_run(pool, temporal, settings, agent_auth.run_caller(principal),
                                          None, body)
        values = await thread_streams.wait_values(pool, temporal, run)
    except OverseerError as err:  # the run was refused (its input, the caller's role …)
        return {"result": {"isError": True, "content": [
            {"type": "text", "text": f"{err.code}: {err.message}"}]}}
    await drop_stateless_thread(pool, temporal, run, values, principal.subject)
    meta = {"overseer/run_id": str(run["run_id"]), "overseer/thread_id": str(run["thread_id"])}
    if isinstance(values, dict) and "__error__" in values:
        error = values["__error__"] or {}
        text = f"{error.get('error', 'error')}: {error.get('message', '')}".strip()
        return {"result": {"isError": True, "content": [{"type": "text", "text": text}],
                           "_meta": meta}}
    plain = to_jsonable(values)
    result: dict[str, Any] = {"content": [{"type": "text", "text": json.dumps(plain)}],
                              "_meta": meta}
    if isinstance(plain, dict):
        result["structuredContent"] = plain
    return {"result": result}

