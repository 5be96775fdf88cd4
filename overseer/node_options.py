"""Node placement: node metadata ``{"overseer": {...}}`` and the options a node with it runs under.

A node whose metadata asks for per-node handling (:data:`NODE_OPTION_KEYS`) leaves the
run's segment: the segment stops before it and one activity runs its superstep with the
node's time-out, heartbeat, attempts and summary (:class:`NodeOptions`); the next segment
goes on (:mod:`workflows.segment_calls`). Without it a node runs inside its segment.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

DEFAULT_HEARTBEAT_SECONDS = 10.0
"""Heartbeat time-out of every node activity that sets none: a killed worker costs seconds, not minutes."""


class NodeOptions(BaseModel):
    """Per-node settings, read from node metadata ``{"overseer": {...}}``.

    Attributes:
        run_in: ``activity`` (default): a node whose metadata sets any option runs as its
            own activity between two segments (:func:`placed_nodes`); ``local_activity`` or
            ``workflow`` (the words of Temporal's LangGraph plugin, for short steps) run it
            inside its segment, like a node without options.
        timeout_seconds: start-to-close timeout of one attempt (default 300).
        heartbeat_seconds: heartbeat time-out of the node's activity (default
            :data:`DEFAULT_HEARTBEAT_SECONDS`; 0 or None turns it off). The runtime heartbeats
            on the node's behalf while it runs, so a dead worker's node runs again on another
            worker within this time, not after ``timeout_seconds``.
        max_attempts: attempts for errors that may be transient (default 5); a bug
            (``TypeError``, ``KeyError``, validation errors …) always fails after one.
        non_retryable: extra exception class names or ``ApplicationError`` types never retried.
        summary: what the Temporal UI shows for the node's activity (default: the node name).
    """

    run_in: str = "activity"
    timeout_seconds: float = 300.0
    heartbeat_seconds: float | None = DEFAULT_HEARTBEAT_SECONDS
    max_attempts: int = 5
    non_retryable: list[str] = []
    summary: str | None = None


NODE_OPTION_KEYS = frozenset({"overseer", "execute_in", "start_to_close_timeout",
                              "heartbeat_timeout", "retry_policy"})
"""Node metadata keys that ask for per-node handling (Overseer's, and the Temporal plugin's)."""


def placed_nodes(graph: Any) -> list[str]:
    """The graph's top-level nodes that ask for per-node handling (:data:`NODE_OPTION_KEYS`).

    ``graph`` is a ``StateGraph`` or ``{node: metadata}``
    (:meth:`overseer.registry.Registry.node_metadata`; ``{}`` for a Functional API
    entrypoint, whose tasks all run in the segment).

    As segments, each of them runs as its own activity with its options (time-out,
    heartbeat, attempts, summary): the segment stops before it, one activity runs the
    superstep it is in, the next segment goes on. A node placed ``run_in: workflow`` or
    ``local_activity`` (a short step) runs inside the segment, where it costs nothing extra.
    """
    metadata = graph if isinstance(graph, dict) else {
        name: spec.metadata for name, spec in graph.nodes.items()}
    return sorted(name for name, meta in metadata.items()
                  if NODE_OPTION_KEYS & set(meta or {})
                  and _run_in(meta) not in ("workflow", "local_activity"))


def _run_in(metadata: dict[str, Any] | None) -> Any:
    meta = metadata or {}
    return dict(meta.get("overseer") or {}).get("run_in") or meta.get("execute_in")


def node_options(metadata: dict[str, Any] | None) -> tuple[NodeOptions, Any]:
    """A node's :class:`NodeOptions` and Temporal ``RetryPolicy`` (or None) from its metadata.

    Overseer's ``{"overseer": {...}}`` keys, or those of Temporal's LangGraph plugin
    (``execute_in``, ``start_to_close_timeout``, ``heartbeat_timeout``, ``retry_policy``,
    ``summary``), so a graph written for the plugin runs unchanged.

    Raises:
        pydantic.ValidationError: malformed ``{"overseer": {...}}`` metadata.
        ValueError: ``run_in`` is not ``activity``, ``local_activity`` or ``workflow``.
    """
    from temporalio.common import RetryPolicy

    meta = dict(metadata or {})
    raw = dict(meta.get("overseer") or {})
    if "execute_in" in meta and "run_in" not in raw:
        raw["run_in"] = meta["execute_in"]
    if "start_to_close_timeout" in meta and "timeout_seconds" not in raw:
        raw["timeout_seconds"] = meta["start_to_close_timeout"].total_seconds()
    if meta.get("heartbeat_timeout") and "heartbeat_seconds" not in raw:
        raw["heartbeat_seconds"] = meta["heartbeat_timeout"].total_seconds()
    if "summary" in meta and "summary" not in raw:
        raw["summary"] = meta["summary"]
    opts = NodeOptions.model_validate(raw)
    if opts.run_in not in ("activity", "local_activity", "workflow"):
        raise ValueError(f"run_in must be activity, local_activity or workflow, not {opts.run_in!r}")
    retry = meta.get("retry_policy") if isinstance(meta.get("retry_policy"), RetryPolicy) else None
    return opts, retry
