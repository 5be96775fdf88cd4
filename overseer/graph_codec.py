"""How graph state crosses the workflow/activity boundary: plain JSON when it can, LangGraph's serde when not.

A node's input and output travel inside Temporal payloads. Plain JSON (dicts with string
keys, lists, strings, numbers, booleans, null) travels as itself, so the Temporal Web UI
shows it; anything else — LangChain messages, pydantic models, dataclasses, ``Command``,
``Send``, tuples, sets — travels as LangGraph's own msgpack encoding (``JsonPlusSerializer``),
so a node gets back exactly the types it wrote (the plugin's default converter turns an
``AIMessage`` into a plain ``dict``, and a node would get a dict back).

**Claim check.** A top-level state value larger than :data:`CLAIM_CHECK_BYTES` is stored
in Postgres by content hash and replaced by a :func:`ref_marker`; node activities resolve
markers before user code sees them, so a chatty LLM state never hits Temporal's 2 MB
payload or 50 MB history limits. Routers and workflow-placed nodes see the marker.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

CLAIM_CHECK_BYTES = 256 * 1024
"""Values above this size (encoded) leave Temporal payloads for Postgres."""

REF_KEY = "__overseer_ref__"

_serde = JsonPlusSerializer()


def is_plain_json(value: Any, _depth: int = 0) -> bool:
    """True when ``value`` survives a JSON round trip unchanged (no tuples, sets, objects)."""
    if _depth > 64:
        return False
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if type(value) is dict:
        return all(isinstance(k, str) and is_plain_json(v, _depth + 1) for k, v in value.items())
    if type(value) is list:
        return all(is_plain_json(v, _depth + 1) for v in value)
    return False


def encode(value: Any) -> dict[str, Any]:
    """``{"json": value}`` for plain JSON, else ``{"lg": type, "b64": bytes}`` from LangGraph's serde."""
    if is_plain_json(value):
        return {"json": value}
    kind, blob = _serde.dumps_typed(value)
    return {"lg": kind, "b64": base64.b64encode(blob).decode("ascii")}


def decode(encoded: dict[str, Any]) -> Any:
    """Inverse of :func:`encode`.

    Raises:
        ValueError: not an encoded value.
    """
    if "json" in encoded:
        return encoded["json"]
    if "lg" in encoded:
        return _serde.loads_typed((encoded["lg"], base64.b64decode(encoded["b64"])))
    raise ValueError("not an encoded graph value")


def encoded_size(encoded: dict[str, Any]) -> int:
    """Approximate payload size of an encoded value, in bytes."""
    return len(json.dumps(encoded, separators=(",", ":"), default=str))


def ref_marker(sha256: str, size_bytes: int) -> dict[str, Any]:
    """The stand-in for a claim-checked value: ``{"__overseer_ref__": sha256, "size_bytes": n}``."""
    return {REF_KEY: sha256, "size_bytes": size_bytes}


def is_ref(value: Any) -> bool:
    """True for a :func:`ref_marker`."""
    return isinstance(value, dict) and REF_KEY in value and len(value) == 2


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """A JSON view of any graph value, for events, read models and API answers (lossy, never raises).

    Pydantic models and LangChain messages give their ``model_dump``, dataclasses their
    fields, tuples and sets lists; anything else its ``repr``.
    """
    if _depth > 64:
        return repr(value)
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [to_jsonable(v, _depth + 1) for v in items]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return to_jsonable(dump(mode="json"), _depth + 1)
        except Exception:  # noqa: BLE001 - a view must never fail the run
            return repr(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name), _depth + 1)
                for f in dataclasses.fields(value)}
    return repr(value)
