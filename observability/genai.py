"""Spans for LangGraph nodes and LLM calls, with OpenTelemetry GenAI semantic conventions.

:func:`instrument_langchain` registers one LangChain callback handler for the whole
process (the way LangSmith hooks in, but exporting OpenTelemetry instead), so every
chat-model call made through a langchain ``BaseChatModel`` inside an activity gets a
``chat <model>`` CLIENT span with ``gen_ai.*`` attributes (operation, provider, request and
response model, input/output tokens, finish reasons), and every LangGraph node that runs
inside an activity (the inner nodes of a subgraph such as ``read_text`` or
``infer_fields``) gets a ``langgraph.node <name>`` span. They nest under the Temporal
``RunActivity`` span, so one trace shows API → workflow → activity → node → LLM call.

Nothing is recorded inside workflow code (replay must stay deterministic: the workflow's
nodes are cheap and show as the workflow's own spans), and prompts, replies and node
inputs never become attributes unless :func:`sensitive_data_allowed` (the
``OVERSEER_TRACE_SENSITIVE_DATA`` debug switch) says so.

For a model call that does not go through langchain, use :func:`genai_span`.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

TRACER_NAME = "overseer.genai"
SENSITIVE_ENV = "OVERSEER_TRACE_SENSITIVE_DATA"
_MAX_CONTENT_CHARS = 4000

# GenAI semantic-convention attribute names (opentelemetry semconv, gen_ai.* registry).
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
SYSTEM = "gen_ai.system"  # the older name of gen_ai.provider.name, still read by many backends
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TEMPERATURE = "gen_ai.request.temperature"
MAX_TOKENS = "gen_ai.request.max_tokens"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"


def sensitive_data_allowed() -> bool:
    """True only when ``OVERSEER_TRACE_SENSITIVE_DATA`` is ``1``/``true`` (a debug switch, off by default)."""
    return os.environ.get(SENSITIVE_ENV, "").strip().lower() in ("1", "true", "yes")


@contextmanager
def genai_span(model: str, *, provider: str = "openai", operation: str = "chat",
               attributes: Mapping[str, Any] | None = None) -> Iterator[GenAISpan]:
    """A ``<operation> <model>`` CLIENT span for one model call made without langchain.

    Example::

        with genai_span("gpt-4o-mini", provider="openai") as call:
            reply = await client.chat(...)
            call.record_usage(input_tokens=12, output_tokens=40, finish_reason="stop",
                              response_model=reply.model)

    An exception raised inside marks the span as an error with ``error.type``.

    Args:
        model: the requested model (``gen_ai.request.model``).
        provider: ``gen_ai.provider.name`` (``openai``, ``groq``, ``ollama``, …).
        operation: ``gen_ai.operation.name`` (``chat``, ``text_completion``, ``embeddings``).
        attributes: extra attributes (never document text).
    """
    tracer = trace.get_tracer(TRACER_NAME)
    attrs: dict[str, Any] = {OPERATION: operation, PROVIDER: provider, SYSTEM: provider,
                             REQUEST_MODEL: model, **(attributes or {})}
    with tracer.start_as_current_span(f"{operation} {model}", kind=SpanKind.CLIENT,
                                      attributes=attrs, record_exception=True) as span:
        call = GenAISpan(span)
        try:
            yield call
        except BaseException as err:
            span.set_attribute(ERROR_TYPE, type(err).__name__)
            raise


class GenAISpan:
    """Handle on a GenAI span: record usage when the reply arrives."""

    def __init__(self, span: Span) -> None:
        self.span = span

    def record_usage(self, *, input_tokens: int | None = None, output_tokens: int | None = None,
                     finish_reason: str | None = None, response_model: str | None = None,
                     response_id: str | None = None) -> None:
        """Set ``gen_ai.usage.*`` and ``gen_ai.response.*`` attributes on the span."""
        _set_usage(self.span, input_tokens, output_tokens,
                   [finish_reason] if finish_reason else [], response_model, response_id)


def _set_usage(span: Span, input_tokens: int | None, output_tokens: int | None,
               finish_reasons: Sequence[str], response_model: str | None,
               response_id: str | None) -> None:
    if input_tokens is not None:
        span.set_attribute(INPUT_TOKENS, int(input_tokens))
    if output_tokens is not None:
        span.set_attribute(OUTPUT_TOKENS, int(output_tokens))
    if finish_reasons:
        span.set_attribute(FINISH_REASONS, list(finish_reasons))
    if response_model:
        span.set_attribute(RESPONSE_MODEL, response_model)
    if response_id:
        span.set_attribute(RESPONSE_ID, response_id)


# --- automatic spans through LangChain callbacks -------------------------------------------------


class OpenTelemetryCallbackHandler(BaseCallbackHandler):
    """LangChain callback handler that turns chat-model calls and LangGraph nodes into spans.

    Spans are started with an explicit parent (the span of the enclosing langchain run,
    else the current OpenTelemetry context) and never attached as the current context,
    so callbacks that run on another thread cannot leak context.
    """

    run_inline = True
    raise_error = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: dict[UUID, Span] = {}
        self._parents: dict[UUID, UUID | None] = {}

    # chat models and LLMs ---------------------------------------------------------------------

    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[Any]], *,
                            run_id: UUID, parent_run_id: UUID | None = None,
                            tags: list[str] | None = None, metadata: dict[str, Any] | None = None,
                            **kwargs: Any) -> None:
        """Start a ``chat <model>`` span."""
        self._start_llm(serialized, run_id, parent_run_id, metadata, kwargs, "chat",
                        messages[0] if messages else [])

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID,
                     parent_run_id: UUID | None = None, tags: list[str] | None = None,
                     metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Start a ``text_completion <model>`` span (non-chat LLMs)."""
        self._start_llm(serialized, run_id, parent_run_id, metadata, kwargs, "text_completion",
                        prompts)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """Record usage, response model and finish reasons; end the span."""
        span = self._pop(run_id)
        if span is None:
            return
        input_tokens, output_tokens, reasons, model, response_id = _usage_of(response)
        _set_usage(span, input_tokens, output_tokens, reasons, model, response_id)
        if sensitive_data_allowed():
            texts = [g.text for gens in response.generations for g in gens]
            span.set_attribute(OUTPUT_MESSAGES, _truncate(json.dumps(texts)))
        span.end()

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Mark the span failed with ``error.type``; end it."""
        self._fail(run_id, error)

    # LangGraph nodes --------------------------------------------------------------------------

    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID,
                       parent_run_id: UUID | None = None, tags: list[str] | None = None,
                       metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Start a ``langgraph.node <name>`` span when this chain run is a LangGraph node."""
        with self._lock:
            self._parents[run_id] = parent_run_id
        node = (metadata or {}).get("langgraph_node")
        if not node or kwargs.get("name") != node or _in_workflow():
            return
        attrs: dict[str, Any] = {"langgraph.node": str(node),
                                 "langgraph.step": int((metadata or {}).get("langgraph_step", 0))}
        self._start(f"langgraph.node {node}", run_id, parent_run_id, SpanKind.INTERNAL, attrs)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """End a node span."""
        span = self._pop(run_id)
        if span is not None:
            span.end()

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Mark a node span failed (a GraphInterrupt is not a failure); end it."""
        if type(error).__name__ in ("GraphInterrupt", "NodeInterrupt", "ParentCommand"):
            span = self._pop(run_id)
            if span is not None:
                span.end()
            return
        self._fail(run_id, error)

    # internals --------------------------------------------------------------------------------

    def _start_llm(self, serialized: dict[str, Any] | None, run_id: UUID,
                   parent_run_id: UUID | None, metadata: dict[str, Any] | None,
                   kwargs: Mapping[str, Any], operation: str, prompt: Any) -> None:
        with self._lock:
            self._parents[run_id] = parent_run_id
        if _in_workflow():
            return
        meta = metadata or {}
        params = kwargs.get("invocation_params") or {}
        model = str(meta.get("ls_model_name") or params.get("model") or params.get("model_name")
                    or params.get("_type") or "unknown")
        provider = _provider(str(meta.get("ls_provider") or params.get("_type") or "unknown"))
        attrs: dict[str, Any] = {OPERATION: operation, PROVIDER: provider, SYSTEM: provider,
                                 REQUEST_MODEL: model}
        temperature = meta.get("ls_temperature", params.get("temperature"))
        if isinstance(temperature, int | float):
            attrs[TEMPERATURE] = float(temperature)
        max_tokens = meta.get("ls_max_tokens", params.get("max_tokens"))
        if isinstance(max_tokens, int):
            attrs[MAX_TOKENS] = max_tokens
        if sensitive_data_allowed():
            attrs[INPUT_MESSAGES] = _truncate(json.dumps(_message_texts(prompt)))
        self._start(f"{operation} {model}", run_id, parent_run_id, SpanKind.CLIENT, attrs)

    def _start(self, name: str, run_id: UUID, parent_run_id: UUID | None, kind: SpanKind,
               attrs: dict[str, Any]) -> None:
        parent = self._parent_span(parent_run_id)
        context = trace.set_span_in_context(parent) if parent is not None else None
        span = trace.get_tracer(TRACER_NAME).start_span(name, context=context, kind=kind,
                                                        attributes=attrs)
        with self._lock:
            self._spans[run_id] = span

    def _parent_span(self, parent_run_id: UUID | None) -> Span | None:
        with self._lock:
            seen = 0
            while parent_run_id is not None and seen < 64:
                span = self._spans.get(parent_run_id)
                if span is not None:
                    return span
                parent_run_id = self._parents.get(parent_run_id)
                seen += 1
        return None

    def _pop(self, run_id: UUID) -> Span | None:
        with self._lock:
            self._parents.pop(run_id, None)
            return self._spans.pop(run_id, None)

    def _fail(self, run_id: UUID, error: BaseException) -> None:
        span = self._pop(run_id)
        if span is None:
            return
        span.set_attribute(ERROR_TYPE, type(error).__name__)
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        span.end()


_handler_var: ContextVar[OpenTelemetryCallbackHandler | None] = ContextVar(
    "overseer_otel_langchain_handler", default=None)
_installed: OpenTelemetryCallbackHandler | None = None


def instrument_langchain() -> OpenTelemetryCallbackHandler:
    """Install the process-wide LangChain → OpenTelemetry handler (idempotent).

    It joins every LangChain run's callbacks once this process records spans
    (:func:`observability.tracing.when_recording`): until then each token and each runnable
    would call it to make a span nobody records.

    Returns:
        The handler (tests may inspect it).
    """
    global _installed
    if _installed is not None:
        return _installed
    from observability.tracing import when_recording

    handler = _installed = OpenTelemetryCallbackHandler()

    def register() -> None:
        global _handler_var
        from langchain_core.tracers.context import register_configure_hook

        _handler_var = ContextVar("overseer_otel_langchain_handler", default=handler)
        register_configure_hook(_handler_var, inheritable=True)

    when_recording(register)
    return handler


def _usage_of(response: LLMResult) -> tuple[int | None, int | None, list[str], str | None, str | None]:
    input_tokens = output_tokens = None
    reasons: list[str] = []
    model = response_id = None
    for gens in response.generations:
        for gen in gens:
            info = gen.generation_info or {}
            message = getattr(gen, "message", None)
            meta = getattr(message, "response_metadata", None) or {}
            reason = info.get("finish_reason") or meta.get("finish_reason")
            if reason:
                reasons.append(str(reason))
            model = model or meta.get("model_name") or meta.get("model")
            response_id = response_id or getattr(message, "id", None) or meta.get("id")
            usage = getattr(message, "usage_metadata", None)
            if usage:
                input_tokens = (input_tokens or 0) + int(usage.get("input_tokens", 0))
                output_tokens = (output_tokens or 0) + int(usage.get("output_tokens", 0))
    llm_output = response.llm_output or {}
    token_usage = llm_output.get("token_usage") or llm_output.get("usage") or {}
    if input_tokens is None and token_usage:
        input_tokens = int(token_usage.get("prompt_tokens", token_usage.get("input_tokens", 0)))
        output_tokens = int(token_usage.get("completion_tokens",
                                            token_usage.get("output_tokens", 0)))
    model = model or llm_output.get("model_name")
    return input_tokens, output_tokens, reasons, model, response_id


def _provider(raw: str) -> str:
    lowered = raw.lower()
    for known in ("azure", "openai", "groq", "ollama", "anthropic", "mistral", "vllm"):
        if known in lowered:
            return "azure.ai.openai" if known == "azure" else known
    return lowered or "unknown"


def _message_texts(prompt: Any) -> list[str]:
    if isinstance(prompt, list):
        return [str(getattr(m, "content", m)) for m in prompt]
    return [str(prompt)]


def _truncate(text: str) -> str:
    return text if len(text) <= _MAX_CONTENT_CHARS else text[:_MAX_CONTENT_CHARS] + "…"


def _in_workflow() -> bool:
    try:
        from temporalio import workflow

        return workflow.in_workflow()
    except Exception:  # pragma: no cover - temporalio always importable here
        return False
