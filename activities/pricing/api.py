"""The pricing pipeline's chat routes (seed 003), put together as one router.

``/api/v1/chat`` with SSE streaming, approvals, health, tools, models.

* ``POST /api/v1/chat`` — simple asks run the single agent in this process (no workflow);
  composite asks (or ``plan=true``) start a pricing run (``SegmentRunWorkflow``) and stream its events.
* ``GET /api/v1/chat/threads/{thread_id}/stream`` — (re)attach to a run's stream; with
  ``Last-Event-ID`` it resumes after that event, without duplicates.
* ``POST /api/v1/chat/approve`` / ``/cancel`` — resume or stop a paused plan by thread id.

Delivery: an orchestrated stream is read from the workflow's durable ``WorkflowStream``
(long-poll Updates; queries once the run has closed). Each event's ``seq`` (and SSE ``id``)
is its offset in that log plus one, the same on every connection, so a client that
reconnects with ``Last-Event-ID: n`` receives exactly the events after ``n``. Keepalive
comments (``: keepalive``) are sent only after ``interval`` seconds without an event.

The routes are in :mod:`activities.pricing.chat_info` (health, tools, models),
:mod:`activities.pricing.chat_ask` (the ask and a thread's stream) and
:mod:`activities.pricing.chat_approvals` (approve, cancel); what they run on in
:mod:`activities.pricing.chat_routing` (model choice, intent routing, session history),
:mod:`activities.pricing.chat_fast_path`, :mod:`activities.pricing.chat_orchestrator`,
:mod:`activities.pricing.chat_sse` (framing and delivery) and :mod:`activities.pricing.chat_runs`.
"""

from __future__ import annotations

from fastapi import APIRouter

from activities.pricing import chat_approvals, chat_ask, chat_info
from overseer.plugin import Pipeline


def build_router(pipeline: Pipeline) -> APIRouter:
    """Every chat route (all under ``/api/v1/chat``, tagged ``chat``), in the order they match.

    Args:
        pipeline: the pricing pipeline as declared (``activities.pricing.pipeline``); the
            asks start its runs.
    """
    router = APIRouter()
    router.include_router(chat_info.router)
    router.include_router(chat_ask.build_router(pipeline))
    router.include_router(chat_approvals.router)
    return router
