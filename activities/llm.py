"""A minimal LLM call behind one function (the full LLM layer is a later issue).

Any OpenAI-compatible endpoint (``OVERSEER_LLM_BASE_URL`` + ``OVERSEER_LLM_API_KEY``)
through langchain-openai. No endpoint configured means callers use their
deterministic strategy and record ``strategy: rules``. Tests replace the model
with langchain-core's fake chat models through :func:`set_chat_model_factory`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from overseer.errors import LLMResponseError
from overseer.settings import Settings

ChatModelFactory = Callable[[Settings], BaseChatModel | None]


def _default_factory(settings: Settings) -> BaseChatModel | None:
    if not settings.llm_base_url:
        return None
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key or "not-needed",  # type: ignore[arg-type]
        model=settings.llm_model,
        timeout=settings.llm_timeout_seconds,
        max_retries=0,  # Temporal owns retries
        temperature=0,
    )


_factory: ChatModelFactory = _default_factory


def set_chat_model_factory(factory: ChatModelFactory | None) -> None:
    """Replace how chat models are made (tests pass a fake-model factory; None restores)."""
    global _factory
    _factory = factory or _default_factory


def chat_model(settings: Settings) -> BaseChatModel | None:
    """The configured chat model, or None when no endpoint is configured (offline default)."""
    return _factory(settings)


def model_name(model: BaseChatModel) -> str:
    """A short model name for ``strategy: llm:<model>`` records."""
    return str(getattr(model, "model_name", None) or getattr(model, "model", None) or model._llm_type)


async def extract_fields_with_llm(
    model: BaseChatModel, text: str, fields: Collection[str]
) -> dict[str, str | None]:
    """Ask the model for only ``fields`` from ``text``; JSON object out.

    Args:
        model: a chat model.
        text: the entry's text (form area and essay).
        fields: field names to extract.

    Returns:
        ``{field: value or None}`` for the requested fields only.

    Raises:
        LLMResponseError: the reply is not a JSON object (permanent for this step).
        Exception: transport errors from the client propagate (Temporal retries them).
    """
    wanted = sorted(fields)
    messages = [
        SystemMessage(
            "You read essay-contest entry forms. Reply with one JSON object only, mapping each "
            "requested field name to its value exactly as written on the form, or null when "
            "the form does not state it. Never guess."
        ),
        HumanMessage(f"Fields: {json.dumps(wanted)}\n\nForm text:\n{text[:8000]}"),
    ]
    reply = await model.ainvoke(messages)
    content = reply.content if isinstance(reply.content, str) else json.dumps(reply.content)
    start, end = content.find("{"), content.rfind("}")
    try:
        parsed = json.loads(content[start : end + 1]) if start >= 0 else None
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise LLMResponseError("model reply is not a JSON object", details={"fields": wanted})
    return {f: (str(parsed[f]).strip() or None) if parsed.get(f) else None for f in wanted}
