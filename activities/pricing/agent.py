"""The single-agent fast path (seed 003 AC3): simple asks answered without starting a workflow.

A simple ask ("What is the optimal price for ASTR 4?") needs one tool: the agent always
calls ``optimize_price`` for the items the ask names (a forced tool choice: no model round
trip to decide it) and then answers. Offline the answer is a fixed sentence built from the
tool's result (``strategy: rules``); with a model configured the model phrases the answer
from the tool's result, streamed through ``astream_events(version="v1")`` (seed 003 AC2),
and the rules sentence is the fallback when the model says nothing.

Events are the stream contract's (:mod:`activities.pricing.stream`): ``tool_call``, tokens,
one final event.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from activities.pricing.catalog import Catalog
from activities.pricing.stream import RULES, chunks, final, token, tool_call
from activities.pricing.tools import describe_item_answer

AGENT_PROMPT = (
    "You are a pricing assistant. Answer the question in one or two sentences using only the "
    "tool result (prices in USD, per tier). Never invent numbers."
)


async def single_agent(message: str, catalog: Catalog, options: dict[str, Any], *,
                       scope: dict[str, Any], model_name: str = RULES, settings: Any = None
                       ) -> AsyncIterator[dict[str, Any]]:
    """Answer a simple ask; yields ``tool_call``, ``token``… and one final event.

    Args:
        message: the ask.
        catalog: the current catalog.
        options: ``pricing_options`` (policy and optimizer settings).
        scope: ``router.resolve_scope`` of the ask.
        model_name: the chosen model, or ``rules`` offline.
        settings: settings for the chat model factory (LLM mode only).
    """
    yield tool_call("optimize_price")
    text, result = describe_item_answer(catalog, scope, options)
    strategy = RULES
    parts: list[str] = []
    if model_name != RULES:
        from activities.llm import chat_model

        model = chat_model(settings, model_name)
        if model is not None:
            prompt = [("system", AGENT_PROMPT),
                      ("human", f"Question: {message}\n\nTool optimize_price returned:\n"
                                f"{json.dumps(result)[:6000]}")]
            async for event in model.astream_events(prompt, version="v1"):
                if event["event"] == "on_chat_model_stream":
                    chunk = event["data"].get("chunk")
                    piece = getattr(chunk, "content", "")
                    if isinstance(piece, str) and piece:
                        parts.append(piece)
                        yield token(piece)
            if "".join(parts).strip():
                strategy = f"llm:{model_name}"
    if strategy == RULES:
        parts = []
        for piece in chunks(text):
            parts.append(piece)
            yield token(piece)
    yield final("".join(parts), tools_used=["optimize_price"],
                model=model_name if strategy != RULES else RULES, strategy=strategy)
