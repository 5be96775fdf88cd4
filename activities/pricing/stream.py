"""The chat stream's event envelope (seed 003 "SSE Event Serialization (v1 Stream Contract)").

Every event is a small JSON object with ``done``; the API adds ``seq`` when it sends it:

* ``{"token": str, "done": false}`` — incremental assistant text;
* ``{"tool_call": str, "done": false}`` — a tool starts (``node`` added for orchestrator steps);
* ``{"node": str, "done": false, ...}`` — orchestrator meta events: ``thread_id`` and ``plan``
  (router), ``summary`` (each worker), ``violations``/``violations_total`` (policy_checker),
  ``approval`` (approval_gate);
* ``{"message": str, "tools_used": [...], "done": true, "model", "thread_id", "strategy"}`` — the
  final assembled answer, once;
* ``{"error": str, "code": str, "retryable": bool, "done": true}`` — terminal failure.

Token and tool events carry no metadata so that they match the seed's golden samples; the
final message equals the concatenation of the run's tokens. :data:`STREAM_TOPIC` is the
workflow-stream topic every orchestrator event is published on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

RULES = "rules"
"""The effective model name when no LLM is configured (the deterministic strategy)."""

STREAM_TOPIC = "chat"
"""Topic on the pricing workflow's ``WorkflowStream`` (wire name: never renamed)."""

VIOLATIONS_IN_STREAM = 20
"""At most this many violations ride on a stream event; the run result has them all."""


def token(text: str) -> dict[str, Any]:
    """An incremental text event."""
    return {"token": text, "done": False}


def tool_call(name: str, node: str | None = None) -> dict[str, Any]:
    """A tool-start event (``node`` only for orchestrator workers)."""
    event: dict[str, Any] = {"tool_call": name, "done": False}
    if node:
        event["node"] = node
    return event


def meta(node: str, **extra: Any) -> dict[str, Any]:
    """An orchestrator meta event for ``node`` (extra keys must be JSON-safe and small)."""
    return {"node": node, "done": False, **{k: v for k, v in extra.items() if v is not None}}


def final(message: str, *, tools_used: list[str], model: str, thread_id: str | None = None,
          strategy: str = "rules", **extra: Any) -> dict[str, Any]:
    """The one final event of a stream."""
    event: dict[str, Any] = {"message": message, "tools_used": list(tools_used), "done": True,
                             "model": model}
    if thread_id:
        event["thread_id"] = thread_id
    event["strategy"] = strategy
    event.update({k: v for k, v in extra.items() if v is not None})
    return event


def error(message: str, code: str, *, retryable: bool, **extra: Any) -> dict[str, Any]:
    """A terminal error event (seed "Error Serialization")."""
    return {"error": message, "code": code, "retryable": retryable, "done": True,
            **{k: v for k, v in extra.items() if v is not None}}


_CHUNK = re.compile(r"\S+\s*|\s+")


def chunks(text: str) -> Iterator[str]:
    """Split text into word-sized tokens whose concatenation is ``text`` exactly."""
    yield from _CHUNK.findall(text)


def is_terminal(event: dict[str, Any]) -> bool:
    """The final or error event."""
    return bool(event.get("done"))
