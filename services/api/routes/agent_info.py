"""``GET /info``: the Agent Server's versions and feature flags, as ``langgraph-sdk`` reads them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

router = APIRouter(tags=["agent-server"])


@router.get("/info")
async def info() -> dict[str, Any]:
    """``GET /info``, as the Agent Server answers it (no key needed): versions and feature flags.

    Returns:
        ``{"version", "langgraph_py_version", "flags": {"assistants", "crons", "langsmith"},
        "host": {"kind"}}``; crons are on (each a Temporal Schedule), LangSmith off (traces
        go to OpenTelemetry).
    """
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {"version": installed("overseer"), "langgraph_py_version": installed("langgraph"),
            "flags": {"assistants": True, "crons": True, "langsmith": False},
            "host": {"kind": "self-hosted", "server": "overseer"}}
