"""Request and response models of the pricing chat API (seed 003 paths under ``/api/v1``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field


class ChatRequest(BaseModel):
    """``POST /api/v1/chat`` body."""

    message: str = Field(min_length=1, max_length=4000, description="The pricing ask.")
    session_id: str | None = Field(default=None, max_length=200,
                                   description="Continues a conversation (follow-ups like "
                                               "'why was that price recommended?').")


class ChatStreamEvent(BaseModel):
    """One stream event (seed 003 "v1 Stream Contract"); non-streaming calls answer the last one.

    Exactly one of ``token``, ``tool_call``, ``node`` (meta), ``message`` (final) or ``error``
    leads; ``done`` marks the end; ``seq`` is the event's position in the run's stream.
    """

    model_config = ConfigDict(extra="allow")

    token: str | None = None
    tool_call: str | None = None
    node: str | None = None
    message: str | None = None
    tools_used: list[str] | None = None
    error: str | None = None
    code: str | None = None
    retryable: bool | None = None
    done: bool
    model: str | None = None
    thread_id: str | None = None
    seq: int | None = None


class ThreadRequest(BaseModel):
    """``POST /api/v1/chat/approve`` and ``/cancel`` body."""

    thread_id: str = Field(description="The run id the stream's events carry as thread_id.")
    note: str | None = Field(default=None, max_length=2000)
    updates: dict[str, str | float] | None = Field(
        default=None, description='Approve only: price edits {"<item_id>.<tier>": price}; the '
                                  "edited price lists must keep the pricing policy.")


class ChatHealth(BaseModel):
    """``GET /api/v1/chat/health``."""

    status: str
    model: str
    tools_count: int
    time: str


class ToolView(BaseModel):
    """One tool the chat can call."""

    name: str
    description: str


class ModelsView(BaseModel):
    """``GET /api/v1/chat/models``: what ``?model=`` may ask for."""

    default: str
    allowlist: list[str]
    llm_enabled: bool
    selection_order: list[str]


class PolicyItem(BaseModel):
    """One item's prices to check."""

    item_id: str = Field(min_length=1, max_length=200)
    prices: dict[str, Annotated[float, Field(gt=0)]] = Field(
        description="tier → price (USD, > 0); tiers must be the policy's (new, exchange, repair, usm)")
    segment: str | None = None
    region: str | None = None


class PolicyThresholds(BaseModel):
    """Optional thresholds overriding the server's (fractions: 0.05 = 5 %)."""

    tiers: list[str] | None = None
    min_gap_pct: float | None = Field(default=None, ge=0, lt=0.9)
    segment_overrides: dict[str, float] | None = None
    region_overrides: dict[str, float] | None = None


class PolicyCheckRequest(BaseModel):
    """``POST /api/v1/policy/check``: explicit items, catalog item ids, or both."""

    items: list[PolicyItem] = Field(default_factory=list, max_length=5000)
    item_ids: list[str] = Field(default_factory=list, max_length=5000,
                                description="Catalog items to check at today's prices.")
    thresholds: PolicyThresholds | None = None


class PolicyCheckResponse(BaseModel):
    """Violations (seed shape), suggestions and fixed prices."""

    ok: bool
    counts: dict[str, int]
    violations: list[dict[str, Any]]
    suggestions: list[dict[str, Any]]
    fixed_prices: dict[str, dict[str, float]]
