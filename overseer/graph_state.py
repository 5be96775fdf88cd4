"""A thread's state as a run segment hands it on: claim-checked values and its snapshot.

:func:`claim_checked` keeps what crosses Temporal from a segment (its result, its stream
chunks, the thread's state) under the payload limit; :func:`snapshot_of` shapes LangGraph's
``StateSnapshot`` as the workflow's ``get_thread_state`` gives it (the API's thread views read
it too).
"""

from __future__ import annotations

import json
from typing import Any

from overseer.graph_codec import (
    CLAIM_CHECK_BYTES,
    encode,
    encoded_size,
    ref_marker,
    to_jsonable,
)
from overseer.resources import get_runtime
from overseer.store.artifacts import store_artifact

STATE_BLOB_KIND = "graph_state"
"""Artifact kind of a state value stored by :func:`put_state_blob`."""

async def put_state_blob(encoded: dict[str, Any]) -> str:
    """Store an encoded value too large for a Temporal payload; returns its SHA-256.

    The API resolves the reference (:func:`services.api.readmodels.resolve_output_refs`).
    """
    data = json.dumps(encoded, separators=(",", ":")).encode()
    async with get_runtime().pool.acquire() as conn:
        return await store_artifact(conn, data, kind=STATE_BLOB_KIND, page_count=0,
                                    filename=None, content_type="application/json")


async def claim_checked(values: Any) -> Any:
    """``values`` as JSON, each top-level value over the claim-check size stored and referenced.

    What crosses Temporal from a segment (its result, stream chunks, the thread's state)
    stays under the payload limit however large the graph's state grows; the API resolves
    the references (:func:`services.api.readmodels.resolve_output_refs`).
    """
    if not isinstance(values, dict):
        return to_jsonable(values)
    out: dict[str, Any] = {}
    for key, value in values.items():
        encoded = encode(value)
        size = encoded_size(encoded)
        out[key] = ref_marker(await put_state_blob(encoded), size) \
            if size > CLAIM_CHECK_BYTES else to_jsonable(value)
    return out


def snapshot_of(state: Any) -> dict[str, Any]:
    """A LangGraph ``StateSnapshot`` as the workflow's ``get_thread_state`` shapes it.

    Each task as the Agent Server lists it: ``id``, ``name``, ``path``, ``error``,
    ``interrupts``, ``result``, and ``checkpoint``, the ``{thread_id, checkpoint_ns}`` of the
    subgraph the task runs when LangGraph names one (read it with
    ``threads.get_state(checkpoint=…)``), else ``None``; ``state`` is ``None`` here
    (:func:`overseer.checkpoints.checkpoint_view` fills it for ``subgraphs=True``).
    """
    conf = (state.config or {}).get("configurable") or {}
    parent = (state.parent_config or {}).get("configurable") or {}
    return {
        "values": to_jsonable(state.values), "encoded": encode(state.values),
        "next": list(state.next),
        "tasks": [{"id": t.id, "name": t.name, "path": to_jsonable(t.path),
                   "error": None if t.error is None else repr(t.error)[:500],
                   "interrupts": [{"value": to_jsonable(i.value), "id": i.id}
                                  for i in t.interrupts],
                   "checkpoint": (to_jsonable(dict(t.state.get("configurable") or {}))
                                  if isinstance(t.state, dict) else None),
                   "state": None,
                   "result": to_jsonable(t.result)} for t in state.tasks],
        "interrupts": [{"value": to_jsonable(i.value), "id": i.id} for i in state.interrupts],
        "checkpoint_id": conf.get("checkpoint_id"),
        "parent_checkpoint_id": parent.get("checkpoint_id"),
        "metadata": to_jsonable(dict(state.metadata or {})),
        "created_at": state.created_at,
    }
