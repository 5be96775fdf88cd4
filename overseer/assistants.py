"""Agent Server assistants made through the API: a graph with its own config, context, versions.

Every registered graph is an assistant already (its id derived from the graph's name,
:func:`assistant_id_of`; config and context empty; read-only). An
assistant made with ``assistants.create`` is a row in ``agent_assistants`` pointing at one
of those graphs with a ``config`` (``configurable``, ``tags``, ``metadata``,
``recursion_limit``) and a ``context``; each ``update`` writes a new version
(``agent_assistant_versions``), ``set_latest`` picks which version runs, ``delete``
removes it and its versions.

A run of such an assistant runs its graph with the assistant's config and context under
the run's own (:func:`run_body`): the run's ``configurable`` keys, ``metadata`` and
``context`` keys win, tags add up, as on the Agent Server. Runs record the assistant's id.

Who may do what: every key reads every assistant (as the registry's); the creator and
admins may change or delete one; a deployment's ``Auth`` handlers for ``assistants``
decide instead when it has them.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg

from overseer import access
from overseer.errors import ConflictError, InvalidRequestError, NotFoundError
from overseer.pipelines import Pipeline
from overseer.registry import get_registry
from overseer.run_body import check_run_options

SORT_COLUMNS = ("assistant_id", "graph_id", "name", "created_at", "updated_at")


def graph_pipelines() -> list[Pipeline]:
    """Every registered graph an Agent Server client may run (all but those that take an upload)."""
    return [p for p in get_registry() if not p.takes_upload]


def assistant_id_of(name: str) -> str:
    """The stable assistant id of graph ``name`` (uuid5, as the Agent Server derives it)."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"overseer-assistant:{name}"))


def resolve_assistant(assistant_id: str) -> Pipeline:
    """The pipeline an ``assistant_id`` (or graph name) names.

    Raises:
        NotFoundError: no such assistant (404).
    """
    for pipeline in graph_pipelines():
        if assistant_id in (pipeline.name, assistant_id_of(pipeline.name)):
            return pipeline
    raise NotFoundError(f"unknown assistant {assistant_id!r}",
                        details={"known": [p.name for p in graph_pipelines()]})


def assistant_view(pipeline: Pipeline) -> dict[str, Any]:
    """An ``Assistant`` as the SDK reads it."""
    epoch = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
    return {"assistant_id": assistant_id_of(pipeline.name), "graph_id": pipeline.name,
            "config": {}, "context": {}, "created_at": epoch, "updated_at": epoch,
            "metadata": {"created_by": "system", "seed": pipeline.seed},
            "version": 1, "name": pipeline.name, "description": pipeline.description or None}


@dataclass
class Assistant:
    """An assistant: its graph's pipeline and, for one made through the API, its row."""

    pipeline: Pipeline
    row: asyncpg.Record | None = None

    @property
    def assistant_id(self) -> str:
        """The assistant's id (a registered graph's derived id, or the row's)."""
        return str(self.row["assistant_id"]) if self.row else assistant_id_of(self.pipeline.name)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _uuid(assistant_id: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(assistant_id))
    except ValueError:
        return None


async def resolve(pool: asyncpg.Pool, assistant_id: str) -> Assistant:
    """The assistant an id (or a graph's name) names: a registered graph's, or one made here.

    Raises:
        NotFoundError: no such assistant (404).
    """
    try:
        return Assistant(resolve_assistant(assistant_id))
    except NotFoundError:
        found = _uuid(assistant_id)
        row = await pool.fetchrow("SELECT * FROM agent_assistants WHERE assistant_id = $1",
                                  found) if found else None
        if row is None:
            raise
        return Assistant(get_registry().get(row["graph_id"]), row)


def view(assistant: Assistant) -> dict[str, Any]:
    """An ``Assistant`` as the SDK reads it."""
    if assistant.row is None:
        return assistant_view(assistant.pipeline)
    row = assistant.row
    return {"assistant_id": str(row["assistant_id"]), "graph_id": row["graph_id"],
            "config": _json(row["config"]) or {}, "context": _json(row["context"]) or {},
            "metadata": _json(row["metadata"]) or {}, "version": row["version"],
            "name": row["name"], "description": row["description"],
            "created_at": row["created_at"].isoformat(),
            "updated_at": row["updated_at"].isoformat()}


def _checked(body: dict[str, Any]) -> dict[str, Any]:
    """The assistant fields of a create or update body.

    Raises:
        InvalidRequestError: ``config``, ``context`` or ``metadata`` that is not an object,
            or ``name``/``description`` that is not a string (422, ``details.field``).
    """
    out: dict[str, Any] = {}
    for key in ("config", "context", "metadata"):
        if body.get(key) is not None:
            if not isinstance(body[key], dict):
                raise InvalidRequestError(f"{key} must be an object", details={"field": key})
            out[key] = body[key]
    for key in ("name", "description"):
        if body.get(key) is not None:
            if not isinstance(body[key], str):
                raise InvalidRequestError(f"{key} must be a string", details={"field": key})
            out[key] = body[key]
    return out


async def create(pool: asyncpg.Pool, body: dict[str, Any], subject: str) -> dict[str, Any]:
    """``assistants.create``: a new assistant on a registered graph (version 1).

    Body: ``graph_id``, ``config``, ``context``, ``metadata``, ``name``, ``description``,
    ``assistant_id`` (a uuid; a new one when absent), ``if_exists`` (``raise`` |
    ``do_nothing``).

    Raises:
        NotFoundError: an unknown ``graph_id`` (404).
        ConflictError: the id is taken and ``if_exists`` is not ``do_nothing`` (409).
        InvalidRequestError: a malformed field (422).
    """
    pipeline = resolve_assistant(str(body.get("graph_id") or ""))
    fields = _checked(body)
    check_run_options(pipeline, {"config": fields.get("config")})
    given = body.get("assistant_id")
    assistant_id = _uuid(str(given)) if given else uuid.uuid4()
    if assistant_id is None:
        raise InvalidRequestError("assistant_id must be a uuid", details={"field": "assistant_id"})
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(
            """INSERT INTO agent_assistants (assistant_id, graph_id, name, description, config,
                                             context, metadata, version, created_by)
               VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7::jsonb, 1, $8)
               ON CONFLICT (assistant_id) DO NOTHING RETURNING *""",
            assistant_id, pipeline.name, fields.get("name") or pipeline.name,
            fields.get("description"), json.dumps(fields.get("config") or {}),
            json.dumps(fields.get("context") or {}), json.dumps(fields.get("metadata") or {}),
            subject)
        if row is None:
            existing = await conn.fetchrow(
                "SELECT * FROM agent_assistants WHERE assistant_id = $1", assistant_id)
            if body.get("if_exists") == "do_nothing" and existing is not None:
                return view(Assistant(pipeline, existing))
            raise ConflictError(f"assistant {assistant_id} already exists")
        await _version(conn, row)
    return view(Assistant(pipeline, row))


async def _version(conn: Any, row: asyncpg.Record) -> None:
    await conn.execute(
        """INSERT INTO agent_assistant_versions (assistant_id, version, graph_id, name,
               description, config, context, metadata)
           VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8::jsonb)""",
        row["assistant_id"], row["version"], row["graph_id"], row["name"], row["description"],
        json.dumps(_json(row["config"])), json.dumps(_json(row["context"])),
        json.dumps(_json(row["metadata"])))


async def _own(pool: asyncpg.Pool, assistant_id: str, scope: access.Scope) -> asyncpg.Record:
    """The row of an assistant made through the API that ``scope`` may change.

    Raises:
        NotFoundError: none by that id (404).
        PermissionDeniedError: a registered graph's (read-only) or another's (403).
    """
    from overseer.errors import PermissionDeniedError

    assistant = await resolve(pool, assistant_id)
    if assistant.row is None:
        raise PermissionDeniedError(
            f"assistant {assistant_id!r} is the graph {assistant.pipeline.name!r} itself: "
            "create an assistant on it to give it a config")
    if not scope.admits(assistant.row["created_by"], _json(assistant.row["metadata"]) or {}):
        raise PermissionDeniedError(f"assistant {assistant_id} is someone else's")
    return assistant.row


async def update(pool: asyncpg.Pool, assistant_id: str, body: dict[str, Any],
                 scope: access.Scope) -> dict[str, Any]:
    """``assistants.update``: a new version with the changes (``metadata`` is merged).

    Raises:
        NotFoundError: no such assistant, or an unknown new ``graph_id`` (404).
        PermissionDeniedError: a registered graph's assistant, or another's (403).
        InvalidRequestError: a malformed field (422).
    """
    row = await _own(pool, assistant_id, scope)
    fields = _checked(body)
    graph = resolve_assistant(str(body["graph_id"])).name if body.get("graph_id") \
        else row["graph_id"]
    check_run_options(get_registry().get(graph), {"config": fields.get("config")})
    async with pool.acquire() as conn, conn.transaction():
        top = await conn.fetchval("SELECT max(version) FROM agent_assistant_versions "
                                  "WHERE assistant_id = $1", row["assistant_id"])
        new = await conn.fetchrow(
            """UPDATE agent_assistants SET graph_id = $2, name = $3, description = $4,
                   config = $5::jsonb, context = $6::jsonb, metadata = $7::jsonb,
                   version = $8, updated_at = now()
               WHERE assistant_id = $1 RETURNING *""",
            row["assistant_id"], graph, fields.get("name", row["name"]),
            fields.get("description", row["description"]),
            json.dumps(fields.get("config", _json(row["config"]))),
            json.dumps(fields.get("context", _json(row["context"]))),
            json.dumps({**(_json(row["metadata"]) or {}), **fields.get("metadata", {})}),
            int(top or 0) + 1)
        assert new is not None
        await _version(conn, new)
    return view(Assistant(get_registry().get(graph), new))


async def delete(pool: asyncpg.Pool, assistant_id: str, scope: access.Scope) -> asyncpg.Record:
    """``assistants.delete``: the assistant and its versions (its threads stay).

    Returns:
        The deleted row (the route deletes its threads when asked).

    Raises:
        NotFoundError: no such assistant (404).
        PermissionDeniedError: a registered graph's assistant, or another's (403).
    """
    row = await _own(pool, assistant_id, scope)
    await pool.execute("DELETE FROM agent_assistants WHERE assistant_id = $1",
                       row["assistant_id"])
    return row


async def versions(pool: asyncpg.Pool, assistant_id: str,
                   body: dict[str, Any]) -> list[dict[str, Any]]:
    """``assistants.get_versions``: newest first (``metadata`` containment, ``limit``, ``offset``).

    A registered graph's assistant has one version, itself.

    Raises:
        NotFoundError: no such assistant (404).
    """
    assistant = await resolve(pool, assistant_id)
    if assistant.row is None:
        return [view(assistant)]
    args: list[Any] = [assistant.row["assistant_id"]]
    where = "assistant_id = $1"
    if isinstance(body.get("metadata"), dict) and body["metadata"]:
        args.append(json.dumps(body["metadata"]))
        where += f" AND metadata @> ${len(args)}::jsonb"
    args += [int(body.get("limit") or 10), int(body.get("offset") or 0)]
    rows = await pool.fetch(
        f"SELECT * FROM agent_assistant_versions WHERE {where} "  # noqa: S608
        f"ORDER BY version DESC LIMIT ${len(args) - 1} OFFSET ${len(args)}", *args)
    return [{"assistant_id": str(r["assistant_id"]), "graph_id": r["graph_id"],
             "version": r["version"], "name": r["name"], "description": r["description"],
             "config": _json(r["config"]) or {}, "context": _json(r["context"]) or {},
             "metadata": _json(r["metadata"]) or {}, "created_at": r["created_at"].isoformat()}
            for r in rows]


async def set_latest(pool: asyncpg.Pool, assistant_id: str, version: Any,
                     scope: access.Scope) -> dict[str, Any]:
    """``assistants.set_latest``: make an earlier (or later) version the one runs use.

    Raises:
        NotFoundError: no such assistant or version (404).
        PermissionDeniedError: a registered graph's assistant, or another's (403).
    """
    row = await _own(pool, assistant_id, scope)
    if isinstance(version, bool) or not isinstance(version, int):
        raise InvalidRequestError("version must be an integer", details={"field": "version"})
    new = await pool.fetchrow(
        """UPDATE agent_assistants a SET graph_id = v.graph_id, name = v.name,
               description = v.description, config = v.config, context = v.context,
               metadata = v.metadata, version = v.version, updated_at = now()
           FROM agent_assistant_versions v
           WHERE a.assistant_id = $1 AND v.assistant_id = $1 AND v.version = $2
           RETURNING a.*""", row["assistant_id"], version)
    if new is None:
        raise NotFoundError(f"assistant {assistant_id} has no version {version}")
    return view(Assistant(get_registry().get(new["graph_id"]), new))


async def search(pool: asyncpg.Pool, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The assistants made through the API matching ``graph_id``, ``name``, ``metadata``."""
    args: list[Any] = []
    clauses = ["true"]
    if body.get("graph_id"):
        args.append(str(body["graph_id"]))
        clauses.append(f"graph_id = ${len(args)}")
    if body.get("name"):
        args.append(f"%{body['name']}%")
        clauses.append(f"name ILIKE ${len(args)}")
    if isinstance(body.get("metadata"), dict) and body["metadata"]:
        args.append(json.dumps(body["metadata"]))
        clauses.append(f"metadata @> ${len(args)}::jsonb")

    rows = await pool.fetch(f"SELECT * FROM agent_assistants WHERE {' AND '.join(clauses)} "  # noqa: S608
                            "ORDER BY created_at, assistant_id", *args)
    known = {p.name for p in get_registry()}
    return [view(Assistant(get_registry().get(r["graph_id"]), r)) for r in rows
            if r["graph_id"] in known]


def merged_config(base: dict[str, Any], run: dict[str, Any] | None) -> dict[str, Any]:
    """An assistant's config under a run's.

    ``configurable`` and ``metadata`` merge (the run's keys win), tags add up, the run's
    ``recursion_limit`` wins.
    """
    run = run or {}
    out = {**base, **{k: v for k, v in run.items()
                      if k not in ("configurable", "metadata", "tags")}}
    for key in ("configurable", "metadata"):
        if base.get(key) or run.get(key):
            out[key] = {**(base.get(key) or {}), **(run.get(key) or {})}
    tags = [*(base.get("tags") or []), *(t for t in run.get("tags") or []
                                         if t not in (base.get("tags") or []))]
    if tags:
        out["tags"] = tags
    return out


async def run_body(pool: asyncpg.Pool, body: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """A run (or cron) body with its assistant's config and context applied.

    Returns:
        ``(body, assistant id)``: for an assistant made through the API, ``assistant_id``
        becomes its graph's name and ``config``/``context`` the assistant's under the run's
        (:func:`merged_config`; context keys: the run's win), and the id is the
        assistant's, for the run's row. A registered graph's assistant: ``(body, None)``.

    Raises:
        NotFoundError: no such assistant (404).
    """
    assistant = await resolve(pool, str(body.get("assistant_id") or ""))
    if assistant.row is None:
        return body, None
    row = assistant.row
    config = merged_config(_json(row["config"]) or {}, body.get("config"))
    context = {**(_json(row["context"]) or {}), **(body.get("context") or {})}
    out = {**body, "assistant_id": row["graph_id"]}
    if config:
        out["config"] = config
    if context:
        out["context"] = context
    return out, str(row["assistant_id"])
