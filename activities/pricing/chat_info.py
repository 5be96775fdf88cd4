"""The pricing chat's read-only routes: ``GET /api/v1/chat/health``, ``/tools`` and ``/models``."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter

from activities.pricing.chat_routing import effective_model
from activities.pricing.schemas import ChatHealth, ModelsView, ToolView
from activities.pricing.tools import TOOLS
from overseer.plugin import PrincipalDep, SettingsDep

router = APIRouter(prefix="/api/v1/chat", tags=["chat"])

SELECTION_ORDER = ["admin_override", "request_hint (allowlisted)", "task_default",
                   "global_default"]


@router.get("/health", response_model=ChatHealth)
async def chat_health(settings: SettingsDep) -> ChatHealth:
    """Seed 003 AC6: ``{status, model, tools_count, time}`` (model: the effective default)."""
    return ChatHealth(status="ok", model=effective_model(settings, None)[0],
                      tools_count=len(TOOLS), time=datetime.now(UTC).isoformat())


@router.get("/tools", response_model=list[ToolView])
async def chat_tools(_: PrincipalDep) -> list[ToolView]:
    """Seed 003 AC6: the tools the chat's agent and workers call."""
    return [ToolView(**t) for t in TOOLS]


@router.get("/models", response_model=ModelsView)
async def chat_models(_: PrincipalDep, settings: SettingsDep) -> ModelsView:
    """Models ``?model=`` may ask for; the server decides (seed 003 AC5)."""
    from overseer.plugin import allowed_models, llm_enabled

    return ModelsView(default=effective_model(settings, None)[0],
                      allowlist=allowed_models(settings), llm_enabled=llm_enabled(settings),
                      selection_order=SELECTION_ORDER)
