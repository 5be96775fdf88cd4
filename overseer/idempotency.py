"""A node task's idempotency key: the same on every retry and every re-run after a crash.

A node that calls something outside the graph (charges a card, sends an e-mail, files a
ticket) runs again when its segment is retried: LangGraph's ``RetryPolicy`` retries the task,
and a worker that died mid-node makes Temporal run the segment again from the thread's last
checkpoint. LangGraph's task ids are derived from the checkpoint a superstep starts from, which
a segment that re-runs more than one superstep writes anew (``durability="exit"``, or the
superstep before under ``async``), so they are not enough. :func:`idempotency_key` is derived
from what stays: the run, the subgraph path by node names, the superstep and the task's path
(its node, or its ``Send`` index). The external service deduplicates on it (Stripe's
``Idempotency-Key`` header, an ``ON CONFLICT`` insert, a message id):

.. code-block:: python

    from overseer.plugin import idempotency_key

    async def charge(state):
        key = idempotency_key("charge")
        await http.post(url, json=..., headers={"Idempotency-Key": key})
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from overseer.run_types import RUN_ID_KEY

NAMESPACE = uuid.UUID("5b0f6c52-6d0e-4c36-9a44-1f3f5d8e2a17")
"""The uuid5 namespace of Overseer's idempotency keys."""


def idempotency_key(name: str = "", config: dict[str, Any] | None = None) -> str:
    """The idempotency key of the node task running now (a uuid, as text).

    Args:
        name: which side effect of the task (two calls in one node need two names).
        config: the node's ``RunnableConfig``; default LangGraph's ``get_config()`` (the task
            running in this context).

    Returns:
        ``uuid5`` of the run (Overseer's run id; outside Overseer, the thread id), the task's
        namespace by node names, its superstep, its path and ``name``: the same for every
        retry and re-run of this task in this run, different for any other task, run or name.

    Raises:
        RuntimeError: not called from a graph node (no LangGraph config, or no superstep).
    """
    if config is None:
        from langgraph.config import get_config

        config = dict(get_config())
    meta = config.get("metadata") or {}
    owner = meta.get(RUN_ID_KEY) or (config.get("configurable") or {}).get("thread_id")
    if owner is None or meta.get("langgraph_step") is None:
        raise RuntimeError("idempotency_key() is called from a graph node, with its config")
    names = [part.split(":", 1)[0]
             for part in str(meta.get("langgraph_checkpoint_ns") or "").split("|") if part]
    path = json.dumps(list(meta.get("langgraph_path") or ()), default=str)
    return str(uuid.uuid5(NAMESPACE, json.dumps(
        [str(owner), names, int(meta["langgraph_step"]), path, name])))
